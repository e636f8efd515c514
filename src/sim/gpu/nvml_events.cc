// Simulated libnvidia-ml.so.1: event sets. Only XID critical errors are ever delivered; they come
// from the shared state, where hami-simctl inject-xid records them, with the GPU and compute
// instance ids of the MIG device they are charged to (0xFFFFFFFF for an XID of the whole GPU).
//
// Thread safety: each event set's registrations are guarded by its own mutex.

#include <vector>

#include "common/thread_annotations.h"
#include "sim/gpu/clock.h"
#include "sim/gpu/nvml_internal.h"

struct nvmlEventSet_st {
  uint32_t magic;
  hami::Mutex mu;
  struct Registration {
    nvmlDevice_t device;
    unsigned long long mask;
    uint64_t last_seq;  // XIDs up to this sequence number were already delivered (or predate)
  };
  std::vector<Registration> regs GUARDED_BY(mu);
};

namespace hami::sim {
namespace {

constexpr uint32_t kEventSetMagic = 0x4e564531;  // NVE1
constexpr unsigned long long kSupportedEvents =
    nvmlEventTypeSingleBitEccError | nvmlEventTypeDoubleBitEccError | nvmlEventTypePState |
    nvmlEventTypeXidCriticalError | nvmlEventTypeClock;

}  // namespace
}  // namespace hami::sim

using namespace hami::sim;  // NOLINT: the C ABI entry points below implement this namespace's API

// ---------------------------------------------------------------- events

HAMI_SIM_EXPORT nvmlReturn_t nvmlEventSetCreate(nvmlEventSet_t* set) {
  if (!Initialized()) return NVML_ERROR_UNINITIALIZED;
  if (set == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
  auto* s = new nvmlEventSet_st();
  s->magic = kEventSetMagic;
  *set = s;
  return NVML_SUCCESS;
}

HAMI_SIM_EXPORT nvmlReturn_t nvmlDeviceGetSupportedEventTypes(nvmlDevice_t device,
                                                              unsigned long long* eventTypes) {
  int phys;
  nvmlReturn_t rc = CheckDevice(device, &phys);
  if (rc != NVML_SUCCESS) return rc;
  if (eventTypes == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
  *eventTypes = kSupportedEvents;
  return NVML_SUCCESS;
}

HAMI_SIM_EXPORT nvmlReturn_t nvmlDeviceRegisterEvents(nvmlDevice_t device,
                                                      unsigned long long eventTypes,
                                                      nvmlEventSet_t set) {
  int phys;
  nvmlReturn_t rc = CheckDevice(device, &phys);
  if (rc != NVML_SUCCESS) return rc;
  if (set == nullptr || set->magic != kEventSetMagic) return NVML_ERROR_INVALID_ARGUMENT;
  if (eventTypes & ~kSupportedEvents) return NVML_ERROR_NOT_SUPPORTED;
  // Only events that happen after registration are delivered.
  uint64_t seq = g_rt->state().LatestXidSeq(phys);
  hami::MutexLock lock(set->mu);
  for (auto& r : set->regs) {
    if (r.device == device) {
      r.mask |= eventTypes;
      return NVML_SUCCESS;
    }
  }
  set->regs.push_back({device, eventTypes, seq});
  return NVML_SUCCESS;
}

HAMI_SIM_EXPORT nvmlReturn_t nvmlEventSetWait_v2(nvmlEventSet_t set, nvmlEventData_t* data,
                                                 unsigned int timeoutms) {
  if (!Initialized()) return NVML_ERROR_UNINITIALIZED;
  if (set == nullptr || set->magic != kEventSetMagic || data == nullptr) {
    return NVML_ERROR_INVALID_ARGUMENT;
  }
  SharedState& state = g_rt->state();
  const uint64_t deadline = MonotonicNs() + static_cast<uint64_t>(timeoutms) * 1000000ull;
  for (;;) {
    // Read the generation before scanning so an injection racing the scan wakes the wait.
    uint32_t gen = state.XidGeneration();
    {
      hami::MutexLock lock(set->mu);
      for (auto& r : set->regs) {
        if (!(r.mask & nvmlEventTypeXidCriticalError)) continue;
        XidRecord rec;
        if (state.NextXid(r.device->phys, r.last_seq, &rec)) {
          r.last_seq = rec.seq;
          data->device = r.device;
          data->eventType = nvmlEventTypeXidCriticalError;
          data->eventData = rec.xid;
          data->gpuInstanceId = rec.gi_id;  // kXidNoInstance unless charged to an instance
          data->computeInstanceId = rec.ci_id;
          return NVML_SUCCESS;
        }
      }
    }
    if (MonotonicNs() >= deadline) return NVML_ERROR_TIMEOUT;
    state.WaitXidChange(gen, deadline);
  }
}

HAMI_SIM_EXPORT nvmlReturn_t nvmlEventSetFree(nvmlEventSet_t set) {
  if (!Initialized()) return NVML_ERROR_UNINITIALIZED;
  if (set == nullptr || set->magic != kEventSetMagic) return NVML_ERROR_INVALID_ARGUMENT;
  set->magic = 0;
  delete set;
  return NVML_SUCCESS;
}
