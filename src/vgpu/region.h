// The shared region: one memory-mapped file per container that every process of the container
// (and the node monitor, and hamictl) maps. It holds the container's per-device quotas, the
// container-wide usage, one slot per process, and the SM limiter's shared state.
//
// Format: our own, versioned (magic "HAMIVGPU", kRegionVersion). It is NOT upstream HAMi-core's
// 1.2 layout; the monitor may read that one separately.
//
// Consistency model:
//  * Quotas (mem_limit, sm_limit) and policy switches are plain atomics; anyone may read them
//    without a lock, and hamictl/monitor may rewrite them live.
//  * Memory accounting (slot.used*, device.mem_used) changes only under the region lock, one
//    64-bit word holding the owner's identity (pid and process start time). Check-and-reserve
//    is one critical section, so two processes racing for the last bytes of a quota can never
//    both win. Uncontended, taking and releasing it is one CAS and one store. A waiter that
//    finds the owner dead (its pid gone, or reused by a process with another start time)
//    takes the lock over and rebuilds every device total from the slots (the slots are the
//    source of truth; a total is a cached sum), so a crash at any instruction loses nothing.
//  * A slot belongs to a live process identified by (pid, start_time); start_time defeats PID
//    reuse. Slots of dead processes are reclaimed by whoever notices: on an allocation that
//    would fail, on registration, or by `hamictl region sweep`.
//  * SM limiter state (tat_ns, ns_per_unit) is lock-free (CAS), see limiter.h.
//
// Thread safety: Region methods are safe from any thread of any process mapping the file.
#pragma once

#include <stddef.h>
#include <stdint.h>

#include <atomic>

namespace hami::vgpu {

inline constexpr uint64_t kRegionMagic = 0x5550475649'4d4148ULL;  // "HAMIVGPU" little-endian
inline constexpr uint32_t kRegionVersion = 1;
inline constexpr int kMaxDevices = 16;
inline constexpr int kMaxSlots = 1024;
inline constexpr int kUuidLen = 96;

// What an accounted allocation was, for the per-kind breakdown the monitor and hamictl show.
enum class MemKind : uint8_t {
  kData = 0,     // cuMemAlloc, cuMemAllocPitch
  kManaged = 1,  // cuMemAllocManaged
  kAsync = 2,    // cuMemAllocAsync, cuMemAllocFromPoolAsync
  kVmm = 3,      // cuMemCreate physical handles
  kArray = 4,    // cuArrayCreate, cuArray3DCreate, cuMipmappedArrayCreate
  kContext = 5,  // context overhead (when known)
  kCount = 6,
};
const char* MemKindName(MemKind kind);

enum SlotStatus : uint32_t {
  kSlotFree = 0,
  kSlotRunning = 1,
  kSlotSuspended = 2,
};

struct alignas(64) RegionDevice {
  char uuid[kUuidLen];                 // "GPU-..." of the container device at this index
  std::atomic<uint64_t> mem_limit;     // bytes; 0 = unlimited
  std::atomic<uint32_t> sm_limit;      // percent; 0 or >= 100 = unlimited
  std::atomic<uint32_t> util_percent;  // container SM utilisation last measured (x100 = bp)
  std::atomic<uint64_t> mem_used;      // cached sum of slots' used[] (guarded by Region lock)
  std::atomic<uint64_t> mem_peak;      // high-water mark of mem_used
  std::atomic<uint64_t> oom_denials;   // allocations refused by the quota
  // SM limiter (lock-free). See limiter.h for the algorithm.
  alignas(64) std::atomic<int64_t> tat_ns;  // GCRA theoretical arrival time, monotonic ns
  std::atomic<uint64_t> ns_per_unit_q16;    // cost of one work unit, ns * 65536; 0 = uncalibrated
  std::atomic<uint64_t> work_units;         // launched work units (monotone counter)
  std::atomic<uint64_t> throttled_ns;       // time launches spent waiting (monotone)
  std::atomic<uint64_t> launches;           // launches through the SM gate (monotone)
};

struct alignas(64) RegionSlot {
  std::atomic<int32_t> pid;       // 0 = free slot
  std::atomic<int32_t> host_pid;  // PID as NVML sees it; 0 = unknown
  std::atomic<uint32_t> status;   // SlotStatus
  uint32_t reserved0;
  uint64_t start_time;  // /proc/<pid>/stat field 22, to detect PID reuse
  // Bytes this process holds per device, and by kind. Written only under the Region lock;
  // atomics so that lock-free readers (monitor, hamictl) see whole values.
  std::atomic<uint64_t> used[kMaxDevices];
  std::atomic<uint64_t> used_by_kind[kMaxDevices][static_cast<int>(MemKind::kCount)];
  std::atomic<uint32_t> sm_util[kMaxDevices];  // this process's last measured SM util, percent
};

struct RegionHeader {
  uint64_t magic;
  uint32_t version;
  uint32_t header_size;  // sizeof(RegionHeader), a layout guard
  uint64_t file_size;
  std::atomic<uint32_t> device_count;  // number of valid entries in devices[]
  int32_t priority;                    // CUDA_TASK_PRIORITY of the creator (0 = high)
  // The region lock: 0 when free, else the owner's token (start_time_low32 << 32 | pid).
  alignas(64) std::atomic<uint64_t> lock_owner;
  // Policy and monitor feedback (upstream-compatible meaning).
  alignas(64) std::atomic<int32_t> utilization_switch;  // 1 = enforce SM limit under "default"
  std::atomic<int32_t> recent_kernel;       // > 0 recently active; < 0 = launches blocked
  std::atomic<uint64_t> last_kernel_time;   // epoch seconds of the latest launch
  std::atomic<uint32_t> suspend_request;    // 1 = launches and allocations wait (hamictl suspend)
  std::atomic<uint32_t> proc_count;         // number of non-free slots (informational)
  std::atomic<uint64_t> controller;         // SM controller lease: pid << 32 | generation
  std::atomic<int64_t> controller_beat_ns;  // last heartbeat of the lease holder (monotonic)
  std::atomic<uint64_t> created_at;         // epoch seconds
  std::atomic<uint32_t> config_gen;         // bumped by whoever changes limits live
  // Directory of slot owners: slot_pid[i] mirrors slots[i].pid (both written under the lock).
  // Scans read this 4 KiB array instead of touching every 1 KiB slot, which would fault in
  // the whole table in each newly started process.
  alignas(64) std::atomic<int32_t> slot_pid[kMaxSlots];
  RegionDevice devices[kMaxDevices];
  RegionSlot slots[kMaxSlots];
};

// Quotas a new region is initialised with (from the environment of its creator).
struct RegionInit {
  int device_count = 0;  // may be 0 and filled later with SetDevices
  uint64_t mem_limit[kMaxDevices] = {};
  uint32_t sm_limit[kMaxDevices] = {};
  int32_t priority = 1;
};

// Result of a reservation attempt.
struct ReserveResult {
  bool ok;
  uint64_t used;   // device usage seen by the decision
  uint64_t limit;  // device limit seen by the decision
};

class Region {
 public:
  // Opens (creating if absent) the region file at `path`. Returns nullptr and writes a reason
  // into `err` (size `err_len`) if the file cannot be used. A file with another magic, version
  // or size is never modified.
  static Region* Open(const char* path, const RegionInit& init, char* err, size_t err_len);
  // Maps an existing region read-write without creating it (for hamictl and the monitor).
  static Region* Attach(const char* path, char* err, size_t err_len);
  // Process-local anonymous region, used when the shared file is unusable so that the limits
  // still apply to this process alone.
  static Region* CreatePrivate(const RegionInit& init);
  // Unmaps and frees a Region returned by one of the factories above.
  static void Free(Region* r);
  Region(const Region&) = delete;
  Region& operator=(const Region&) = delete;

  RegionHeader* header() { return h_; }
  const RegionHeader* header() const { return h_; }
  bool is_private() const { return private_; }

  // Registers the calling process (getpid()) and returns its slot index, or -1 if the table is
  // full even after reclaiming dead slots. A stale slot with the same pid is reset.
  int RegisterSelf();
  // Frees `slot` and subtracts everything it still holds.
  void ReleaseSlot(int slot);

  // Atomically checks the device quota and charges `bytes` to `slot`. When the quota would be
  // exceeded, dead processes are reclaimed and the check is repeated once.
  ReserveResult Reserve(int slot, int dev, uint64_t bytes, MemKind kind);
  // Returns `bytes` charged earlier by Reserve.
  void Unreserve(int slot, int dev, uint64_t bytes, MemKind kind);

  // Reclaims slots of processes that no longer exist. Returns how many were reclaimed.
  int SweepDead();

  // Fills device UUIDs (container device order) if not yet known. Idempotent.
  void SetDevices(int count, const char (*uuids)[kUuidLen]);
  // Index of the device with this UUID, or -1.
  int FindDevice(const char* uuid) const;

  // The region's critical section (see the consistency model above). Exposed for tools and
  // tests; hooks use the higher-level operations.
  void Lock();
  void Unlock();
  // Must be called in a forked child before it uses a Region inherited from its parent: the
  // lock token identifies the process.
  void AfterFork() { token_ = 0; }

  // Current usage of `dev` across the container.
  uint64_t Used(int dev) const;
  uint64_t Limit(int dev) const;

 private:
  Region(RegionHeader* h, size_t size, bool is_private);
  ~Region();
  static Region* Make(RegionHeader* h, size_t size, bool is_private);
  uint64_t Token();
  void LockSlow(uint64_t me);
  void RebuildTotalsLocked();
  void ClearSlotLocked(int slot);
  int SweepDeadLocked();
  // Whether the slot's process runs: by its PID, or by the host PID the monitor recorded when
  // the caller is in another PID namespace.
  bool SlotAlive(int slot) const;
  // Whether the lock owner (its PID and the low 32 bits of its start time) runs, likewise.
  bool OwnerAlive(int pid, uint32_t start_low) const;

  RegionHeader* h_;
  size_t size_;
  bool private_;
  uint64_t token_ = 0;  // this process's lock token, computed on first use
};

// Fills `*start_time` with the start time of `pid` from /proc. Returns false if the process does
// not exist or is a zombie.
bool ProcessStartTime(int pid, uint64_t* start_time);

}  // namespace hami::vgpu
