#include "monitor/region_access.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstddef>
#include <cstring>
#include <vector>

#include "vgpu/region.h"

namespace hami::monitor {
namespace {

// Reads exactly `n` bytes at `off`; false on a short read (the file shrank) or an error.
bool ReadAt(int fd, void* dst, size_t n, off_t off) {
  auto* p = static_cast<unsigned char*>(dst);
  while (n > 0) {
    ssize_t r = pread(fd, p, n, off);
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) return false;
    p += r;
    n -= static_cast<size_t>(r);
    off += r;
  }
  return true;
}

bool WriteAt(int fd, const void* src, size_t n, off_t off) {
  return pwrite(fd, src, n, off) == static_cast<ssize_t>(n);
}

template <typename T>
T Load(const unsigned char* base, size_t off) {
  T v;
  std::memcpy(&v, base + off, sizeof(T));
  return v;
}

off_t FileSize(int fd) {
  struct stat st {};
  return fstat(fd, &st) == 0 ? st.st_size : -1;
}

// --- hami-cpp's own layout -------------------------------------------------------------------
using vgpu::RegionHeader;
using vgpu::RegionSlot;

// Everything before the slot table: quotas, device totals, feedback fields, the slot directory.
constexpr size_t kPrefix = offsetof(RegionHeader, slots);
constexpr size_t kSlotsAt = offsetof(RegionHeader, slots);

struct alignas(64) SlotCopy {
  unsigned char bytes[sizeof(RegionSlot)];
};
struct alignas(64) PrefixCopy {
  unsigned char bytes[kPrefix];
};

class OwnRegion : public RegionAccess {
 public:
  OwnRegion(int fd, std::string path) : fd_(fd), path_(std::move(path)) {}
  ~OwnRegion() override { close(fd_); }
  const char* Format() const override { return "hami-cpp"; }

  bool Refresh(std::string* why) override {
    off_t size = FileSize(fd_);
    if (size < static_cast<off_t>(sizeof(RegionHeader))) {
      *why = path_ + " is not a whole hami-cpp region (" + std::to_string(size) +
             " bytes, expected " + std::to_string(sizeof(RegionHeader)) + ")";
      return false;
    }
    if (!ReadAt(fd_, prefix_.bytes, kPrefix, 0)) {
      *why = path_ + " could not be read (truncated meanwhile?)";
      return false;
    }
    const RegionHeader* h = H();
    if (h->magic != vgpu::kRegionMagic || h->version != vgpu::kRegionVersion ||
        h->header_size != sizeof(RegionHeader)) {
      *why = path_ + " is no longer a hami-cpp region of version " +
             std::to_string(vgpu::kRegionVersion);
      return false;
    }
    slot_of_.assign(vgpu::kMaxSlots, -1);
    slots_.clear();
    for (int i = 0; i < vgpu::kMaxSlots; ++i) {
      if (h->slot_pid[i].load(std::memory_order_relaxed) == 0) continue;
      SlotCopy c;
      if (!ReadAt(fd_, c.bytes, sizeof(RegionSlot), SlotOffset(i))) {
        *why = path_ + " could not be read (truncated meanwhile?)";
        return false;
      }
      slot_of_[i] = static_cast<int>(slots_.size());
      slots_.push_back(c);
    }
    return true;
  }

  int DeviceCount() const override {
    uint32_t n = H()->device_count.load(std::memory_order_relaxed);
    return static_cast<int>(n > vgpu::kMaxDevices ? vgpu::kMaxDevices : n);
  }
  std::string Uuid(int dev) const override {
    const char* u = H()->devices[dev].uuid;
    return std::string(u, strnlen(u, vgpu::kUuidLen));
  }
  RegionDeviceFigures Device(int dev) const override {
    RegionDeviceFigures f;
    const vgpu::RegionDevice& d = H()->devices[dev];
    f.uuid = Uuid(dev);
    f.limit = d.mem_limit.load(std::memory_order_relaxed);
    f.used = d.mem_used.load(std::memory_order_relaxed);
    uint32_t sm = d.sm_limit.load(std::memory_order_relaxed);
    f.sm_limit = sm >= 100 ? 0 : sm;
    for (const SlotCopy& c : slots_) {
      const RegionSlot* s = reinterpret_cast<const RegionSlot*>(c.bytes);
      for (int k = 0; k < static_cast<int>(vgpu::MemKind::kCount); ++k) {
        uint64_t v = s->used_by_kind[dev][k].load(std::memory_order_relaxed);
        (k == static_cast<int>(vgpu::MemKind::kContext) ? f.context : f.buffer) += v;
      }
    }
    return f;
  }
  uint64_t LastKernelTime() const override {
    return H()->last_kernel_time.load(std::memory_order_relaxed);
  }
  int32_t Priority() const override { return H()->priority; }
  int32_t RecentKernel() const override {
    return H()->recent_kernel.load(std::memory_order_relaxed);
  }
  bool ReplaceRecentKernel(int32_t expected, int32_t desired) override {
    constexpr off_t at = offsetof(RegionHeader, recent_kernel);
    int32_t now = 0;
    if (!ReadAt(fd_, &now, sizeof(now), at) || now != expected) return false;
    return WriteAt(fd_, &desired, sizeof(desired), at);
  }
  int32_t UtilizationSwitch() const override {
    return H()->utilization_switch.load(std::memory_order_relaxed);
  }
  void SetUtilizationSwitch(int32_t v) override {
    WriteAt(fd_, &v, sizeof(v), offsetof(RegionHeader, utilization_switch));
  }
  int SlotCount() const override { return vgpu::kMaxSlots; }
  RegionSlotView Slot(int i) const override {
    RegionSlotView v;
    if (i < 0 || i >= static_cast<int>(slot_of_.size()) || slot_of_[i] < 0) return v;
    const RegionSlot* s = reinterpret_cast<const RegionSlot*>(slots_[slot_of_[i]].bytes);
    v.pid = s->pid.load(std::memory_order_relaxed);
    v.host_pid = s->host_pid.load(std::memory_order_relaxed);
    v.start_time = s->start_time;
    return v;
  }
  void SetHostPid(int i, int host_pid) override {
    if (i < 0 || i >= vgpu::kMaxSlots) return;
    int32_t v = host_pid;
    WriteAt(fd_, &v, sizeof(v), SlotOffset(i) + static_cast<off_t>(offsetof(RegionSlot, host_pid)));
  }

 private:
  const RegionHeader* H() const { return reinterpret_cast<const RegionHeader*>(prefix_.bytes); }
  static off_t SlotOffset(int i) {
    return static_cast<off_t>(kSlotsAt + static_cast<size_t>(i) * sizeof(RegionSlot));
  }

  int fd_;
  std::string path_;
  PrefixCopy prefix_{};
  std::vector<SlotCopy> slots_;
  std::vector<int> slot_of_;  // slot index -> position in slots_, -1 = free
};

// --- HAMi-core 1.x ---------------------------------------------------------------------------
// Offsets of HAMi-core's 64-bit little-endian layout (facts of its shared region file).
constexpr size_t kNum = 56, kUuids = 64, kLimit = 1600, kSmLimit = 1728;
constexpr size_t kProcs = 1856, kProcSize = 1960, kMaxProcs = 1024, kUuidBytes = 96;
constexpr size_t kProcHostPid = 4, kProcUsed = 8, kUsedEntry = 64, kProcStatus = 1928;
constexpr size_t kTail = 2008896;  // procnum, utilizationSwitch, recentKernel, priority, ...
constexpr size_t kProcNum = 0, kSwitch = 4, kRecentKernel = 8, kPriority = 12, kLastKernel = 16;
constexpr int kV1MaxDevices = 16;
static_assert(kProcs + kMaxProcs * kProcSize == kTail && kTail + 56 == kHamiCoreV1Size);

class HamiCoreV1 : public RegionAccess {
 public:
  HamiCoreV1(int fd, std::string path) : fd_(fd), path_(std::move(path)) {}
  ~HamiCoreV1() override { close(fd_); }
  const char* Format() const override { return "HAMi-core 1.x"; }

  bool Refresh(std::string* why) override {
    if (FileSize(fd_) < static_cast<off_t>(kHamiCoreV1Size) ||
        !ReadAt(fd_, head_, sizeof(head_), 0) || !ReadAt(fd_, tail_, sizeof(tail_), kTail) ||
        Load<int32_t>(head_, 0) != kHamiCoreMagic || Load<int32_t>(head_, 4) != 1) {
      *why = path_ + " is no longer a whole HAMi-core 1.x region";
      return false;
    }
    int32_t n = Load<int32_t>(tail_, kProcNum);
    procs_ = n < 0 ? 0 : n > static_cast<int32_t>(kMaxProcs) ? static_cast<int>(kMaxProcs) : n;
    proc_bytes_.resize(static_cast<size_t>(procs_) * kProcSize);
    if (!proc_bytes_.empty() && !ReadAt(fd_, proc_bytes_.data(), proc_bytes_.size(), kProcs)) {
      *why = path_ + " could not be read (truncated meanwhile?)";
      return false;
    }
    return true;
  }

  int DeviceCount() const override {
    uint64_t n = Load<uint64_t>(head_, kNum);
    return static_cast<int>(n > kV1MaxDevices ? kV1MaxDevices : n);
  }
  std::string Uuid(int dev) const override {
    const char* u = reinterpret_cast<const char*>(head_ + kUuids + dev * kUuidBytes);
    return std::string(u, strnlen(u, kUuidBytes));
  }
  RegionDeviceFigures Device(int dev) const override {
    RegionDeviceFigures f;
    f.uuid = Uuid(dev);
    f.limit = Load<uint64_t>(head_, kLimit + dev * 8);
    uint64_t sm = Load<uint64_t>(head_, kSmLimit + dev * 8);
    f.sm_limit = sm >= 100 ? 0 : static_cast<uint32_t>(sm);
    for (int p = 0; p < procs_; ++p) {
      const unsigned char* proc = proc_bytes_.data() + static_cast<size_t>(p) * kProcSize;
      if (Load<int32_t>(proc, kProcStatus) == 0) continue;
      size_t used = kProcUsed + dev * kUsedEntry;  // context, module, buffer, offset, total
      f.context += Load<uint64_t>(proc, used);
      f.module += Load<uint64_t>(proc, used + 8);
      f.buffer += Load<uint64_t>(proc, used + 16);
      f.used += Load<uint64_t>(proc, used + 32);
    }
    return f;
  }
  uint64_t LastKernelTime() const override {
    int64_t t = Load<int64_t>(tail_, kLastKernel);
    return t > 0 ? static_cast<uint64_t>(t) : 0;
  }
  int32_t Priority() const override { return Load<int32_t>(tail_, kPriority); }
  int32_t RecentKernel() const override { return Load<int32_t>(tail_, kRecentKernel); }
  bool ReplaceRecentKernel(int32_t expected, int32_t desired) override {
    int32_t now = 0;
    if (!ReadAt(fd_, &now, sizeof(now), kTail + kRecentKernel) || now != expected) return false;
    return WriteAt(fd_, &desired, sizeof(desired), kTail + kRecentKernel);
  }
  int32_t UtilizationSwitch() const override { return Load<int32_t>(tail_, kSwitch); }
  void SetUtilizationSwitch(int32_t v) override {
    WriteAt(fd_, &v, sizeof(v), kTail + kSwitch);
    std::memcpy(tail_ + kSwitch, &v, sizeof(v));
  }
  int SlotCount() const override { return procs_; }
  RegionSlotView Slot(int i) const override {
    RegionSlotView v;
    if (i < 0 || i >= procs_) return v;  // the process count may have shrunk since
    const unsigned char* proc = proc_bytes_.data() + static_cast<size_t>(i) * kProcSize;
    if (Load<int32_t>(proc, kProcStatus) == 0) return v;
    v.pid = Load<int32_t>(proc, 0);
    v.host_pid = Load<int32_t>(proc, kProcHostPid);
    return v;  // no start time in this layout
  }
  void SetHostPid(int i, int host_pid) override {
    if (i < 0 || i >= static_cast<int>(kMaxProcs)) return;
    int32_t v = host_pid;
    WriteAt(fd_, &v, sizeof(v),
            static_cast<off_t>(kProcs + static_cast<size_t>(i) * kProcSize + kProcHostPid));
  }

 private:
  int fd_;
  std::string path_;
  unsigned char head_[kProcs] = {};
  unsigned char tail_[56] = {};
  std::vector<unsigned char> proc_bytes_;
  int procs_ = 0;
};

}  // namespace

int RegionAccess::FindDevice(const std::string& uuid) const {
  for (int i = 0; i < DeviceCount(); ++i) {
    if (Uuid(i) == uuid) return i;
  }
  return -1;
}

std::unique_ptr<RegionAccess> OpenRegion(const std::string& path, std::string* error) {
  int fd = open(path.c_str(), O_RDWR | O_CLOEXEC);
  if (fd < 0) {
    *error = "cannot open " + path + ": " + strerror(errno);
    return nullptr;
  }
  unsigned char head[8] = {};
  if (!ReadAt(fd, head, sizeof(head), 0)) {
    *error = path + " is too short to be a region (" + std::to_string(FileSize(fd)) + " bytes)";
    close(fd);
    return nullptr;
  }
  std::unique_ptr<RegionAccess> r;
  if (Load<int32_t>(head, 0) == kHamiCoreMagic) {
    if (Load<int32_t>(head, 4) != 1) {
      close(fd);
      *error = path + " is a HAMi-core region of version " +
               std::to_string(Load<int32_t>(head, 4)) + " (only 1.x is read)";
      return nullptr;
    }
    r = std::make_unique<HamiCoreV1>(fd, path);
  } else if (Load<uint64_t>(head, 0) == vgpu::kRegionMagic) {
    r = std::make_unique<OwnRegion>(fd, path);
  } else {
    off_t size = FileSize(fd);
    close(fd);
    *error = path + " is not a region hami-monitor knows (" + std::to_string(size) + " bytes)";
    return nullptr;
  }
  if (!r->Refresh(error)) return nullptr;  // closes fd
  return r;
}

}  // namespace hami::monitor
