#include "monitor/region_access.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstring>

#include "vgpu/region.h"

namespace hami::monitor {
namespace {

constexpr auto kRelaxed = std::memory_order_relaxed;

// --- hami-cpp's own layout -------------------------------------------------------------------

class OwnRegion : public RegionAccess {
 public:
  explicit OwnRegion(vgpu::Region* r) : r_(r), h_(r->header()) {}
  ~OwnRegion() override { vgpu::Region::Free(r_); }
  const char* Format() const override { return "hami-cpp"; }

  int DeviceCount() const override {
    uint32_t n = h_->device_count.load(std::memory_order_acquire);
    return static_cast<int>(n > vgpu::kMaxDevices ? vgpu::kMaxDevices : n);
  }
  std::string Uuid(int dev) const override {
    const char* u = h_->devices[dev].uuid;
    return std::string(u, strnlen(u, vgpu::kUuidLen));
  }
  RegionDeviceFigures Device(int dev) const override {
    RegionDeviceFigures f;
    const vgpu::RegionDevice& d = h_->devices[dev];
    f.uuid = Uuid(dev);
    f.limit = d.mem_limit.load(kRelaxed);
    f.used = d.mem_used.load(kRelaxed);
    uint32_t sm = d.sm_limit.load(kRelaxed);
    f.sm_limit = sm >= 100 ? 0 : sm;
    for (int s = 0; s < vgpu::kMaxSlots; ++s) {
      if (h_->slot_pid[s].load(kRelaxed) == 0) continue;
      for (int k = 0; k < static_cast<int>(vgpu::MemKind::kCount); ++k) {
        uint64_t v = h_->slots[s].used_by_kind[dev][k].load(kRelaxed);
        (k == static_cast<int>(vgpu::MemKind::kContext) ? f.context : f.buffer) += v;
      }
    }
    return f;
  }
  uint64_t LastKernelTime() const override { return h_->last_kernel_time.load(kRelaxed); }
  int32_t Priority() const override { return h_->priority; }
  int32_t RecentKernel() const override { return h_->recent_kernel.load(kRelaxed); }
  bool ReplaceRecentKernel(int32_t expected, int32_t desired) override {
    return h_->recent_kernel.compare_exchange_strong(expected, desired);
  }
  int32_t UtilizationSwitch() const override { return h_->utilization_switch.load(kRelaxed); }
  void SetUtilizationSwitch(int32_t v) override { h_->utilization_switch.store(v, kRelaxed); }
  int SlotCount() const override { return vgpu::kMaxSlots; }
  RegionSlotView Slot(int i) const override {
    RegionSlotView v;
    v.pid = h_->slot_pid[i].load(kRelaxed);
    if (v.pid == 0) return v;
    v.host_pid = h_->slots[i].host_pid.load(kRelaxed);
    v.start_time = h_->slots[i].start_time;
    return v;
  }
  void SetHostPid(int i, int host_pid) override { h_->slots[i].host_pid.store(host_pid, kRelaxed); }

 private:
  vgpu::Region* r_;
  vgpu::RegionHeader* h_;
};

// --- HAMi-core 1.x ---------------------------------------------------------------------------
// Offsets of the 64-bit little-endian layout (reference hami-core.md section 4).
constexpr size_t kNum = 56, kUuids = 64, kLimit = 1600, kSmLimit = 1728;
constexpr size_t kProcs = 1856, kProcSize = 1960, kMaxProcs = 1024, kUuidBytes = 96;
constexpr size_t kProcHostPid = 4, kProcUsed = 8, kUsedEntry = 64, kProcStatus = 1928;
constexpr size_t kProcNum = 2008896, kSwitch = 2008900, kRecentKernel = 2008904;
constexpr size_t kPriority = 2008908, kLastKernel = 2008912;
constexpr int kV1MaxDevices = 16;

class HamiCoreV1 : public RegionAccess {
 public:
  explicit HamiCoreV1(unsigned char* base) : b_(base) {}
  ~HamiCoreV1() override { munmap(b_, kHamiCoreV1Size); }
  const char* Format() const override { return "HAMi-core 1.x"; }

  int DeviceCount() const override {
    uint64_t n = U64(kNum);
    return static_cast<int>(n > kV1MaxDevices ? kV1MaxDevices : n);
  }
  std::string Uuid(int dev) const override {
    const char* u = reinterpret_cast<const char*>(b_ + kUuids + dev * kUuidBytes);
    return std::string(u, strnlen(u, kUuidBytes));
  }
  RegionDeviceFigures Device(int dev) const override {
    RegionDeviceFigures f;
    f.uuid = Uuid(dev);
    f.limit = U64(kLimit + dev * 8);
    uint64_t sm = U64(kSmLimit + dev * 8);
    f.sm_limit = sm >= 100 ? 0 : static_cast<uint32_t>(sm);
    int n = ProcNum();
    for (int p = 0; p < n; ++p) {
      size_t proc = kProcs + p * kProcSize;
      if (I32(proc + kProcStatus) == 0) continue;
      size_t used = proc + kProcUsed + dev * kUsedEntry;  // context, module, buffer, offset, total
      f.context += U64(used);
      f.module += U64(used + 8);
      f.buffer += U64(used + 16);
      f.used += U64(used + 32);
    }
    return f;
  }
  uint64_t LastKernelTime() const override {
    int64_t t = static_cast<int64_t>(U64(kLastKernel));
    return t > 0 ? static_cast<uint64_t>(t) : 0;
  }
  int32_t Priority() const override { return I32(kPriority); }
  int32_t RecentKernel() const override { return I32(kRecentKernel); }
  bool ReplaceRecentKernel(int32_t expected, int32_t desired) override {
    return Ref32(kRecentKernel).compare_exchange_strong(expected, desired);
  }
  int32_t UtilizationSwitch() const override { return I32(kSwitch); }
  void SetUtilizationSwitch(int32_t v) override { Ref32(kSwitch).store(v, kRelaxed); }
  int SlotCount() const override { return ProcNum(); }
  RegionSlotView Slot(int i) const override {
    RegionSlotView v;
    size_t proc = kProcs + static_cast<size_t>(i) * kProcSize;
    if (I32(proc + kProcStatus) == 0) return v;
    v.pid = I32(proc);
    v.host_pid = I32(proc + kProcHostPid);
    return v;  // no start time in this layout
  }
  void SetHostPid(int i, int host_pid) override {
    Ref32(kProcs + static_cast<size_t>(i) * kProcSize + kProcHostPid).store(host_pid, kRelaxed);
  }

 private:
  std::atomic_ref<int32_t> Ref32(size_t off) const {
    return std::atomic_ref<int32_t>(*reinterpret_cast<int32_t*>(b_ + off));
  }
  int32_t I32(size_t off) const { return Ref32(off).load(kRelaxed); }
  uint64_t U64(size_t off) const {
    return std::atomic_ref<uint64_t>(*reinterpret_cast<uint64_t*>(b_ + off)).load(kRelaxed);
  }
  int ProcNum() const {
    int32_t n = I32(kProcNum);
    return n < 0 ? 0 : n > static_cast<int32_t>(kMaxProcs) ? static_cast<int>(kMaxProcs) : n;
  }

  unsigned char* b_;
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
  struct stat st {};
  int32_t head[2] = {0, 0};
  bool v1 = fstat(fd, &st) == 0 && static_cast<size_t>(st.st_size) >= kHamiCoreV1Size &&
            pread(fd, head, sizeof(head), 0) == static_cast<ssize_t>(sizeof(head)) &&
            head[0] == kHamiCoreMagic && head[1] == 1;
  if (v1) {
    void* p = mmap(nullptr, kHamiCoreV1Size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    close(fd);
    if (p == MAP_FAILED) {
      *error = "cannot map " + path + ": " + strerror(errno);
      return nullptr;
    }
    static_assert(kPriority + 4 == kLastKernel && kLastKernel + 40 == kHamiCoreV1Size);
    return std::make_unique<HamiCoreV1>(static_cast<unsigned char*>(p));
  }
  close(fd);
  char err[512] = {};
  vgpu::Region* r = vgpu::Region::Attach(path.c_str(), err, sizeof(err));
  if (r == nullptr) {
    *error = err;
    if (head[0] == kHamiCoreMagic) {
      *error = path + " is a HAMi-core region of version " + std::to_string(head[1]) +
               " (only 1.x is read)";
    }
    return nullptr;
  }
  return std::make_unique<OwnRegion>(r);
}

}  // namespace hami::monitor
