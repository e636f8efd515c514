// The node-wide state of the simulated GPUs, shared by every process through one mmap'd file.
//
// What lives here is what processes must agree on: the device table (copied from the config by
// whoever creates the file), memory charged per process and device, each device's SM timeline,
// busy-time rings per device and per (process, device), injected XID events (with the MIG
// instance they are charged to, if any), memory charged per (process, MIG device), and each
// device's MIG state (mode, GPU and compute instances; mig_state.h), which outlives every client
// process as a real driver's does. Everything else (pointers, contexts, streams) is per-process
// and lives in the driver libraries.
//
// The file starts with a header holding a magic number, a layout version and the fingerprint of
// the config it was built from; opening it with a different config fails with a message telling
// the user to run `hami-simctl reset` (which unlinks the file; processes that still have the old
// file mapped keep using it until they exit).
//
// Thread safety: every public method is safe to call from any thread of any process. Mutations
// happen under one process-shared robust mutex in the file; if a process dies holding it, the
// next locker marks it consistent and carries on (each update is a handful of independent
// stores, so a half-done one only skews accounting by one operation). XID waiters sleep on a
// futex word in the file.
#pragma once

#include <pthread.h>
#include <stdint.h>
#include <sys/types.h>

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "nvml/abi.h"
#include "sim/gpu/config.h"
#include "sim/gpu/mig_state.h"
#include "sim/gpu/sm_timeline.h"

namespace hami::sim {

inline constexpr int kMaxProcesses = 128;
inline constexpr int kMaxSms = 1024;
inline constexpr int kXidRing = 64;

// Immutable after creation: the device as configured.
struct SharedDeviceInfo {
  char name[64];
  char uuid[80];
  uint64_t memory_bytes;
  int32_t sm_count;
  int32_t max_threads_per_sm;
  int32_t cc_major;
  int32_t cc_minor;
  int32_t numa_node;
  int32_t pcie_switch;
  uint32_t pci_domain;
  uint32_t pci_bus;
  uint32_t pci_device;
  uint32_t pci_device_id;
  int32_t nvlink_count;
  int32_t nvlink_peers[kMaxNvLinks];
};

// gi_id / ci_id of an XID that is not charged to a MIG instance (NVML's value for "none").
inline constexpr uint32_t kXidNoInstance = 0xFFFFFFFFu;

struct XidRecord {
  uint64_t seq;  // 1-based sequence number within the device
  uint64_t xid;
  uint64_t realtime_ns;
  uint32_t gi_id;  // the MIG instance it is charged to, or kXidNoInstance
  uint32_t ci_id;
};

struct SharedDevice {
  SharedDeviceInfo info;
  uint64_t sm_free_ns[kMaxSms];  // CLOCK_MONOTONIC time each SM next becomes free
  uint64_t xid_seq;              // last sequence number issued
  XidRecord xids[kXidRing];
  UtilRing util;  // busy SM-ns of all processes
  MigDeviceState mig;
};

// Kept small and contiguous (the busy rings live apart, in SharedHeader::proc_util) so that a
// scan of the process table touches a few pages, not one page per slot.
struct SharedProcess {
  int32_t pid;  // 0 = free slot
  int32_t reserved;
  uint64_t start_time;     // ProcessStartTime token
  uint64_t registered_ns;  // CLOCK_MONOTONIC; older ring contents belong to a previous owner
  uint64_t mem[kMaxDevices];       // charged to the whole GPU
  uint32_t contexts[kMaxDevices];  // live contexts this process holds on each (whole) device
  // Charged to MIG devices of each GPU, in total; the breakdown per (GI, CI) is in
  // SharedHeader::mig_mem, which only needs clearing where this is non-zero.
  uint64_t mig_mem[kMaxDevices];
};

struct SharedHeader {
  uint64_t magic;
  uint32_t layout_version;
  uint32_t device_count;
  uint64_t fingerprint;
  uint64_t file_size;
  uint64_t created_realtime_ns;
  char driver_version[64];
  int32_t cuda_driver_version;
  uint32_t xid_futex;  // bumped (and woken) on every injected XID
  pthread_mutex_t mutex;
  SharedDevice devices[kMaxDevices];
  SharedProcess procs[kMaxProcesses];
  UtilRing proc_util[kMaxProcesses][kMaxDevices];  // busy SM-ns per (process slot, device)
  // Bytes charged per (process slot, device, GI id, CI id) to MIG devices.
  uint64_t mig_mem[kMaxProcesses][kMaxDevices][kMigGiIdSpace][kMigCiIdSpace];
};

// A MIG device as a target of memory charges: (GPU, GI id, CI id), the UUID the CI must still
// have (one re-created with the same ids is another device) and its GPU instance's memory,
// which the CIs of that GI share.
struct MigChargeTarget {
  int dev;
  uint32_t gi_id;
  uint32_t ci_id;
  const char* uuid;
  uint64_t gi_memory_bytes;
};

struct ProcessUsage {
  pid_t pid;
  uint64_t mem_bytes;
  uint32_t contexts;
  double busy_sm_ns;  // over the requested window
};

class SharedState {
 public:
  // Opens the state at `path`, creating its directory and the file (initialised from `config`)
  // if needed. Fails with a user-facing message if the file is unusable or was built from a
  // different config.
  static std::unique_ptr<SharedState> Open(const std::string& path, const SimConfig& config,
                                           std::string* error);
  // Opens an existing state whatever config built it (for inspection tools).
  static std::unique_ptr<SharedState> OpenExisting(const std::string& path, std::string* error);

  ~SharedState();
  SharedState(const SharedState&) = delete;
  SharedState& operator=(const SharedState&) = delete;

  int device_count() const { return static_cast<int>(header_->device_count); }
  const SharedDeviceInfo& device(int index) const { return header_->devices[index].info; }
  const char* driver_version() const { return header_->driver_version; }
  int cuda_driver_version() const { return header_->cuda_driver_version; }

  // Finds or claims the slot of (pid, start_time). Returns -1 if the table is full of live
  // processes.
  int RegisterProcess(pid_t pid, uint64_t start_time);
  void AddContext(int slot, int dev, int delta);

  // Charges `bytes` on `dev` to `slot` unless the device would exceed its physical memory (after
  // reclaiming dead processes). Returns false on out-of-memory.
  bool Charge(int slot, int dev, uint64_t bytes);
  void Uncharge(int slot, int dev, uint64_t bytes);
  // Memory in use on `dev` by live processes, whole-GPU and MIG charges together (dead ones are
  // reclaimed first).
  uint64_t UsedMemory(int dev);

  // MIG memory. Charges `bytes` on MIG device `t` to `slot` unless its GPU instance would exceed
  // its memory (after reclaiming dead processes); false then, or when the CI no longer exists
  // with that UUID.
  bool ChargeMig(int slot, const MigChargeTarget& t, uint64_t bytes);
  void UnchargeMig(int slot, const MigChargeTarget& t, uint64_t bytes);
  // Memory in use in GPU instance `gi_id` of `dev` by live processes (dead ones are reclaimed
  // first).
  uint64_t MigUsedMemory(int dev, uint32_t gi_id);
  // Memory the live process (pid, start_time) holds on MIG device (gi_id, ci_id) of `dev`.
  uint64_t MigProcessMemory(pid_t pid, uint64_t start_time, int dev, uint32_t gi_id,
                            uint32_t ci_id);

  // Books a busy kernel for `slot` on SMs [sm_first, sm_first + sm_count) of `dev` (the whole
  // GPU, or a MIG device's share: MigSmRange; see ScheduleBlocks); returns its completion time.
  uint64_t ScheduleKernel(int slot, int dev, int sm_first, int sm_count, uint64_t t0_ns,
                          uint64_t blocks, uint64_t duration_ns);

  // Live processes that hold memory or a context on `dev`, with their busy SM-ns in
  // (from_ns, to_ns] (CLOCK_MONOTONIC). Reclaims dead processes first.
  std::vector<ProcessUsage> Processes(int dev, uint64_t from_ns, uint64_t to_ns);
  // Busy SM-ns of the whole device in (from_ns, to_ns].
  double DeviceBusyNs(int dev, uint64_t from_ns, uint64_t to_ns);

  // XID events; `gi_id`/`ci_id` name the MIG instance the event is charged to (kXidNoInstance:
  // none). The last kXidRing events of each device are kept.
  void InjectXid(int dev, uint64_t xid, uint32_t gi_id = kXidNoInstance,
                 uint32_t ci_id = kXidNoInstance);
  uint64_t LatestXidSeq(int dev);
  // The oldest record on `dev` with seq > after_seq still in the ring; false if none.
  bool NextXid(int dev, uint64_t after_seq, XidRecord* out);
  uint32_t XidGeneration() const;
  // Sleeps until the XID generation differs from `seen` or the deadline passes.
  void WaitXidChange(uint32_t seen, uint64_t deadline_monotonic_ns) const;

  // Frees the slots of processes that are no longer running; returns how many.
  int ReclaimDead();

  // MIG. A copy of `dev`'s MIG state, taken under the lock.
  MigDeviceState MigSnapshot(int dev);
  // Runs `fn` on `dev`'s MIG state in place, under the lock, and returns its result.
  // `cuda_busy` tells `fn` whether a live process holds memory or a context on `dev` (dead ones
  // are reclaimed first). `fn` must be quick and must not call back into this object.
  using MigUpdate = std::function<nvmlReturn_t(MigDeviceState& mig, bool cuda_busy)>;
  nvmlReturn_t UpdateMig(int dev, const MigUpdate& fn);
  // Seed of `dev`'s MIG UUIDs: differs per device and per state file, so UUIDs are never reused
  // across a `hami-simctl reset`.
  uint64_t MigUuidSeed(int dev) const;

 private:
  class Lock;
  explicit SharedState(SharedHeader* header, size_t size);
  int ReclaimDeadLocked();
  // Whole-GPU and MIG charges of live slots on `dev`; in GI `gi_id` of `dev`. Caller holds Lock.
  uint64_t UsedLocked(int dev) const;
  uint64_t MigUsedLocked(int dev, uint32_t gi_id) const;

  SharedHeader* header_;
  size_t size_;
};

// Default state path (/tmp/hami-sim/state) unless HAMI_SIM_STATE is set.
std::string StatePathFromEnv();

}  // namespace hami::sim
