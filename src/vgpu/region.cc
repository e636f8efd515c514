#include "vgpu/region.h"

#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <new>

#include "vgpu/log.h"

namespace hami::vgpu {

static_assert(std::atomic<uint64_t>::is_always_lock_free, "region atomics must be lock-free");
static_assert(std::atomic<int64_t>::is_always_lock_free, "region atomics must be lock-free");

namespace {

constexpr size_t kPage = 4096;
constexpr size_t RegionFileSize() { return (sizeof(RegionHeader) + kPage - 1) / kPage * kPage; }

void InitHeader(RegionHeader* h, const RegionInit& init) {
  h->version = kRegionVersion;
  h->header_size = sizeof(RegionHeader);
  h->file_size = RegionFileSize();
  h->priority = init.priority;
  int n = init.device_count;
  if (n < 0) n = 0;
  if (n > kMaxDevices) n = kMaxDevices;
  for (int i = 0; i < kMaxDevices; ++i) {
    h->devices[i].mem_limit.store(init.mem_limit[i], std::memory_order_relaxed);
    h->devices[i].sm_limit.store(init.sm_limit[i], std::memory_order_relaxed);
  }
  h->device_count.store(static_cast<uint32_t>(n), std::memory_order_relaxed);
  h->utilization_switch.store(1, std::memory_order_relaxed);
  h->recent_kernel.store(0, std::memory_order_relaxed);
  h->created_at.store(static_cast<uint64_t>(time(nullptr)), std::memory_order_relaxed);
  h->lock_owner.store(0, std::memory_order_relaxed);
  // Publish: readers check the magic with acquire ordering before touching anything else.
  std::atomic_thread_fence(std::memory_order_release);
  __atomic_store_n(&h->magic, kRegionMagic, __ATOMIC_RELEASE);
}

bool HeaderValid(const RegionHeader* h, char* err, size_t err_len) {
  uint64_t magic = __atomic_load_n(&h->magic, __ATOMIC_ACQUIRE);
  if (magic != kRegionMagic) {
    snprintf(err, err_len, "not a hami-cpp region (magic %#llx)",
             static_cast<unsigned long long>(magic));
    return false;
  }
  if (h->version != kRegionVersion || h->header_size != sizeof(RegionHeader)) {
    snprintf(err, err_len, "region format version %u (header %u bytes) is not %u (%zu bytes)",
             h->version, h->header_size, kRegionVersion, sizeof(RegionHeader));
    return false;
  }
  return true;
}

inline void CpuRelax() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#elif defined(__aarch64__)
  __asm__ __volatile__("yield");
#endif
}

// File size without fstat, which is not an exported glibc function before 2.33.
off_t FileSize(int fd) { return lseek(fd, 0, SEEK_END); }

RegionHeader* MapFd(int fd, size_t size) {
  void* p = mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  return p == MAP_FAILED ? nullptr : static_cast<RegionHeader*>(p);
}

}  // namespace

const char* MemKindName(MemKind kind) {
  switch (kind) {
    case MemKind::kData:
      return "data";
    case MemKind::kManaged:
      return "managed";
    case MemKind::kAsync:
      return "async";
    case MemKind::kVmm:
      return "vmm";
    case MemKind::kArray:
      return "array";
    case MemKind::kContext:
      return "context";
    default:
      return "?";
  }
}

bool ProcessStartTime(int pid, uint64_t* start_time) {
  char path[64];
  snprintf(path, sizeof(path), "/proc/%d/stat", pid);
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return false;
  char buf[1024];
  ssize_t n = read(fd, buf, sizeof(buf) - 1);
  close(fd);
  if (n <= 0) return false;
  buf[n] = '\0';
  // The command name (field 2) is parenthesised and may contain spaces; fields resume after
  // the last ')'.
  char* p = strrchr(buf, ')');
  if (p == nullptr || p[1] == '\0') return false;
  p += 2;
  char state = *p;
  if (state == 'Z' || state == 'X' || state == 'x') return false;
  // p is at field 3; skip to field 22.
  for (int field = 3; field < 22; ++field) {
    p = strchr(p, ' ');
    if (p == nullptr) return false;
    ++p;
  }
  uint64_t v = 0;
  while (*p >= '0' && *p <= '9') v = v * 10 + static_cast<uint64_t>(*p++ - '0');
  *start_time = v;
  return true;
}

Region::Region(RegionHeader* h, size_t size, bool is_private)
    : h_(h), size_(size), private_(is_private) {}

Region::~Region() { munmap(h_, size_); }

Region* Region::Make(RegionHeader* h, size_t size, bool is_private) {
  // malloc + placement new: the preload library must not depend on libstdc++'s operator new.
  void* mem = malloc(sizeof(Region));
  return mem == nullptr ? nullptr : new (mem) Region(h, size, is_private);
}

void Region::Free(Region* r) {
  if (r == nullptr) return;
  r->~Region();
  free(r);
}

Region* Region::Open(const char* path, const RegionInit& init, char* err, size_t err_len) {
  const size_t size = RegionFileSize();
  int fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0666);
  if (fd < 0) {
    snprintf(err, err_len, "cannot open %s: %s", path, strerror(errno));
    return nullptr;
  }
  // Fast path: an initialised region of the right size needs no file lock.
  if (static_cast<size_t>(FileSize(fd)) == size) {
    RegionHeader* h = MapFd(fd, size);
    if (h != nullptr && HeaderValid(h, err, err_len)) {
      close(fd);
      return Region::Make(h, size, false);
    }
    if (h != nullptr) munmap(h, size);
  }

  // Slow path, serialised between processes by flock: create, finish a crashed creation, or
  // reject a foreign file.
  if (flock(fd, LOCK_EX) != 0) {
    snprintf(err, err_len, "cannot lock %s: %s", path, strerror(errno));
    close(fd);
    return nullptr;
  }
  Region* result = nullptr;
  do {
    off_t file_size = FileSize(fd);
    if (file_size < 0) {
      snprintf(err, err_len, "cannot size %s: %s", path, strerror(errno));
      break;
    }
    bool fresh = file_size == 0;
    if (!fresh && static_cast<size_t>(file_size) != size) {
      snprintf(err, err_len,
               "%s has %lld bytes, expected %zu: it belongs to another program or format "
               "version; delete it or use another CUDA_DEVICE_MEMORY_SHARED_CACHE",
               path, static_cast<long long>(file_size), size);
      break;
    }
    if (fresh) {
      if (ftruncate(fd, static_cast<off_t>(size)) != 0) {
        snprintf(err, err_len, "cannot size %s: %s", path, strerror(errno));
        break;
      }
      // Every process of the container, whatever its user, must be able to join.
      if (fchmod(fd, 0666) != 0) {
        VGPU_DEBUG("cannot chmod %s: %s", path, strerror(errno));
      }
    }
    RegionHeader* h = MapFd(fd, size);
    if (h == nullptr) {
      snprintf(err, err_len, "cannot map %s: %s", path, strerror(errno));
      break;
    }
    uint64_t magic = __atomic_load_n(&h->magic, __ATOMIC_ACQUIRE);
    if (magic == 0) {
      // New file (already all zeros: no need to touch its pages), or a creator that died
      // before publishing, whose partial writes must be cleared.
      if (!fresh) memset(static_cast<void*>(h), 0, size);
      InitHeader(h, init);
    } else if (!HeaderValid(h, err, err_len)) {
      munmap(h, size);
      break;
    }
    result = Region::Make(h, size, false);
    if (result == nullptr) munmap(h, size);
  } while (false);
  flock(fd, LOCK_UN);
  close(fd);
  return result;
}

Region* Region::Attach(const char* path, char* err, size_t err_len) {
  const size_t size = RegionFileSize();
  int fd = open(path, O_RDWR | O_CLOEXEC);
  if (fd < 0) {
    snprintf(err, err_len, "cannot open %s: %s", path, strerror(errno));
    return nullptr;
  }
  off_t file_size = FileSize(fd);
  if (static_cast<size_t>(file_size) != size) {
    snprintf(err, err_len, "%s is not a hami-cpp region of this version (%lld bytes, expected %zu)",
             path, static_cast<long long>(file_size), size);
    close(fd);
    return nullptr;
  }
  RegionHeader* h = MapFd(fd, size);
  close(fd);
  if (h == nullptr) {
    snprintf(err, err_len, "cannot map %s: %s", path, strerror(errno));
    return nullptr;
  }
  if (!HeaderValid(h, err, err_len)) {
    munmap(h, size);
    return nullptr;
  }
  Region* r = Region::Make(h, size, false);
  if (r == nullptr) munmap(h, size);
  return r;
}

Region* Region::CreatePrivate(const RegionInit& init) {
  const size_t size = RegionFileSize();
  void* p = mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (p == MAP_FAILED) return nullptr;
  auto* h = static_cast<RegionHeader*>(p);
  InitHeader(h, init);
  Region* r = Region::Make(h, size, true);
  if (r == nullptr) munmap(p, size);
  return r;
}

uint64_t Region::Token() {
  if (token_ == 0) {
    const int pid = static_cast<int>(getpid());
    uint64_t start = 0;
    if (!private_) ProcessStartTime(pid, &start);
    token_ = ((start & 0xffffffffULL) << 32) | static_cast<uint32_t>(pid);
  }
  return token_;
}

void Region::Lock() {
  const uint64_t me = Token();
  uint64_t expected = 0;
  if (__builtin_expect(h_->lock_owner.compare_exchange_strong(
                           expected, me, std::memory_order_acquire, std::memory_order_relaxed),
                       1)) {
    return;
  }
  LockSlow(me);
}

void Region::LockSlow(uint64_t me) {
  // Critical sections last nanoseconds: spin briefly, then yield, then sleep, and every few
  // milliseconds check whether the owner still exists.
  int64_t waited_ns = 0;
  for (int round = 0;; ++round) {
    uint64_t owner = h_->lock_owner.load(std::memory_order_relaxed);
    if (owner == 0) {
      if (h_->lock_owner.compare_exchange_weak(owner, me, std::memory_order_acquire,
                                               std::memory_order_relaxed)) {
        return;
      }
      continue;
    }
    if (round < 200) {
      CpuRelax();
      continue;
    }
    if (round < 400) {
      sched_yield();
      continue;
    }
    struct timespec ts = {0, 100'000};  // 100 us
    nanosleep(&ts, nullptr);
    waited_ns += 100'000;
    if (waited_ns % 2'000'000 != 0 || private_) continue;
    const int pid = static_cast<int>(owner & 0xffffffffULL);
    if (OwnerAlive(pid, static_cast<uint32_t>(owner >> 32))) continue;
    if (h_->lock_owner.compare_exchange_strong(owner, me, std::memory_order_acquire,
                                               std::memory_order_relaxed)) {
      // The owner died inside a critical section. Slots are the source of truth: recompute
      // the cached totals and carry on.
      RebuildTotalsLocked();
      VGPU_WARN("process %d died holding the region lock; usage totals rebuilt from slots", pid);
      return;
    }
  }
}

namespace {
// Whether the process (pid, start time) runs, comparing start times under `mask`.
bool StartsAt(int pid, uint64_t start_time, uint64_t mask) {
  uint64_t start = 0;
  return ProcessStartTime(pid, &start) && (start & mask) == (start_time & mask);
}
}  // namespace

bool Region::SlotAlive(int slot) const {
  // Seen from another PID namespace (hamictl or a tool on the host looking at a container's
  // region), the slot's PID names another process; the host PID the node monitor recorded
  // names the same one. The start time (ticks since boot) is the same in every namespace.
  const RegionSlot& s = h_->slots[slot];
  int pid = h_->slot_pid[slot].load(std::memory_order_relaxed);
  if (StartsAt(pid, s.start_time, ~0ULL)) return true;
  int host = s.host_pid.load(std::memory_order_relaxed);
  return host != 0 && host != pid && StartsAt(host, s.start_time, ~0ULL);
}

bool Region::OwnerAlive(int pid, uint32_t start_low) const {
  if (StartsAt(pid, start_low, 0xffffffffULL)) return true;
  // The lock word holds the owner's own PID: through its slot's host PID, as SlotAlive.
  for (int i = 0; i < kMaxSlots; ++i) {
    if (h_->slot_pid[i].load(std::memory_order_relaxed) != pid) continue;
    const RegionSlot& s = h_->slots[i];
    int host = s.host_pid.load(std::memory_order_relaxed);
    if (host == 0 || host == pid || static_cast<uint32_t>(s.start_time) != start_low) continue;
    if (StartsAt(host, start_low, 0xffffffffULL)) return true;
  }
  return false;
}

void Region::Unlock() { h_->lock_owner.store(0, std::memory_order_release); }

void Region::RebuildTotalsLocked() {
  for (int d = 0; d < kMaxDevices; ++d) {
    uint64_t sum = 0;
    for (int s = 0; s < kMaxSlots; ++s) {
      if (h_->slot_pid[s].load(std::memory_order_relaxed) != 0) {
        sum += h_->slots[s].used[d].load(std::memory_order_relaxed);
      }
    }
    h_->devices[d].mem_used.store(sum, std::memory_order_relaxed);
  }
}

void Region::ClearSlotLocked(int slot) {
  RegionSlot& s = h_->slots[slot];
  for (int d = 0; d < kMaxDevices; ++d) {
    uint64_t held = s.used[d].load(std::memory_order_relaxed);
    if (held != 0) {
      uint64_t total = h_->devices[d].mem_used.load(std::memory_order_relaxed);
      h_->devices[d].mem_used.store(total > held ? total - held : 0, std::memory_order_relaxed);
    }
    s.used[d].store(0, std::memory_order_relaxed);
    for (int k = 0; k < static_cast<int>(MemKind::kCount); ++k) {
      s.used_by_kind[d][k].store(0, std::memory_order_relaxed);
    }
    s.sm_util[d].store(0, std::memory_order_relaxed);
  }
  s.host_pid.store(0, std::memory_order_relaxed);
  s.status.store(kSlotFree, std::memory_order_relaxed);
  s.start_time = 0;
  h_->slot_pid[slot].store(0, std::memory_order_release);
  if (s.pid.exchange(0, std::memory_order_release) != 0) {
    h_->proc_count.fetch_sub(1, std::memory_order_relaxed);
  }
}

int Region::SweepDeadLocked() {
  if (private_) return 0;
  int reclaimed = 0;
  for (int i = 0; i < kMaxSlots; ++i) {
    int pid = h_->slot_pid[i].load(std::memory_order_relaxed);
    if (pid == 0) continue;
    RegionSlot& s = h_->slots[i];
    if (!SlotAlive(i)) {
      uint64_t held = 0;
      for (int d = 0; d < kMaxDevices; ++d) held += s.used[d].load(std::memory_order_relaxed);
      VGPU_NOTICE("reclaimed slot of exited process %d (%llu bytes)", pid,
                  static_cast<unsigned long long>(held));
      ClearSlotLocked(i);
      ++reclaimed;
    }
  }
  return reclaimed;
}

int Region::SweepDead() {
  Lock();
  int n = SweepDeadLocked();
  Unlock();
  return n;
}

int Region::RegisterSelf() {
  const int me = static_cast<int>(getpid());
  uint64_t start = 0;
  if (!private_ && !ProcessStartTime(me, &start)) start = 0;
  Lock();
  int chosen = -1;
  for (int pass = 0; pass < 2 && chosen < 0; ++pass) {
    for (int i = 0; i < kMaxSlots; ++i) {
      int pid = h_->slot_pid[i].load(std::memory_order_relaxed);
      if (pid == me) {
        // Our PID already has a slot: a previous process with the same PID died without
        // cleaning up (crash loop in a fresh PID namespace). Its usage is not ours.
        ClearSlotLocked(i);
        pid = 0;
      }
      if (pid == 0 && chosen < 0) chosen = i;
      if (chosen >= 0 && pass == 0) break;
    }
    if (chosen < 0 && pass == 0) SweepDeadLocked();
  }
  if (chosen >= 0) {
    RegionSlot& s = h_->slots[chosen];
    s.start_time = start;
    s.host_pid.store(0, std::memory_order_relaxed);
    s.status.store(kSlotRunning, std::memory_order_relaxed);
    s.pid.store(me, std::memory_order_release);
    h_->slot_pid[chosen].store(me, std::memory_order_release);
    h_->proc_count.fetch_add(1, std::memory_order_relaxed);
  }
  Unlock();
  return chosen;
}

void Region::ReleaseSlot(int slot) {
  if (slot < 0 || slot >= kMaxSlots) return;
  Lock();
  ClearSlotLocked(slot);
  Unlock();
}

ReserveResult Region::Reserve(int slot, int dev, uint64_t bytes, MemKind kind) {
  if (slot < 0 || slot >= kMaxSlots || dev < 0 || dev >= kMaxDevices) return {true, 0, 0};
  RegionDevice& d = h_->devices[dev];
  RegionSlot& s = h_->slots[slot];
  Lock();
  uint64_t limit = d.mem_limit.load(std::memory_order_relaxed);
  uint64_t used = d.mem_used.load(std::memory_order_relaxed);
  auto exceeds = [&] { return limit != 0 && (bytes > limit || used > limit - bytes); };
  if (exceeds() && SweepDeadLocked() > 0) {
    used = d.mem_used.load(std::memory_order_relaxed);
  }
  if (exceeds()) {
    Unlock();
    d.oom_denials.fetch_add(1, std::memory_order_relaxed);
    return {false, used, limit};
  }
  s.used[dev].store(s.used[dev].load(std::memory_order_relaxed) + bytes, std::memory_order_relaxed);
  auto& by_kind = s.used_by_kind[dev][static_cast<int>(kind)];
  by_kind.store(by_kind.load(std::memory_order_relaxed) + bytes, std::memory_order_relaxed);
  uint64_t now_used = used + bytes;
  d.mem_used.store(now_used, std::memory_order_relaxed);
  if (now_used > d.mem_peak.load(std::memory_order_relaxed)) {
    d.mem_peak.store(now_used, std::memory_order_relaxed);
  }
  Unlock();
  return {true, used, limit};
}

void Region::Unreserve(int slot, int dev, uint64_t bytes, MemKind kind) {
  if (slot < 0 || slot >= kMaxSlots || dev < 0 || dev >= kMaxDevices) return;
  RegionDevice& d = h_->devices[dev];
  RegionSlot& s = h_->slots[slot];
  Lock();
  uint64_t held = s.used[dev].load(std::memory_order_relaxed);
  uint64_t take = bytes < held ? bytes : held;  // never underflow, whatever the caller says
  s.used[dev].store(held - take, std::memory_order_relaxed);
  auto& by_kind = s.used_by_kind[dev][static_cast<int>(kind)];
  uint64_t k = by_kind.load(std::memory_order_relaxed);
  by_kind.store(k > take ? k - take : 0, std::memory_order_relaxed);
  uint64_t total = d.mem_used.load(std::memory_order_relaxed);
  d.mem_used.store(total > take ? total - take : 0, std::memory_order_relaxed);
  Unlock();
}

void Region::SetDevices(int count, const char (*uuids)[kUuidLen]) {
  if (count <= 0) return;
  if (count > kMaxDevices) count = kMaxDevices;
  Lock();
  uint32_t known = h_->device_count.load(std::memory_order_relaxed);
  bool have_uuids = known > 0 && h_->devices[0].uuid[0] != '\0';
  if (!have_uuids) {
    for (int i = 0; i < count; ++i) {
      strncpy(h_->devices[i].uuid, uuids[i], kUuidLen - 1);
      h_->devices[i].uuid[kUuidLen - 1] = '\0';
    }
    h_->device_count.store(static_cast<uint32_t>(count), std::memory_order_release);
  }
  Unlock();
}

int Region::FindDevice(const char* uuid) const {
  uint32_t n = h_->device_count.load(std::memory_order_acquire);
  for (uint32_t i = 0; i < n && i < static_cast<uint32_t>(kMaxDevices); ++i) {
    if (strncmp(h_->devices[i].uuid, uuid, kUuidLen) == 0) return static_cast<int>(i);
  }
  return -1;
}

uint64_t Region::Used(int dev) const {
  if (dev < 0 || dev >= kMaxDevices) return 0;
  return h_->devices[dev].mem_used.load(std::memory_order_relaxed);
}

uint64_t Region::Limit(int dev) const {
  if (dev < 0 || dev >= kMaxDevices) return 0;
  return h_->devices[dev].mem_limit.load(std::memory_order_relaxed);
}

}  // namespace hami::vgpu
