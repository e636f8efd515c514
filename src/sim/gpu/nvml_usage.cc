// Simulated libnvidia-ml.so.1: memory, utilisation, per-process usage and the sensors that follow
// utilisation (temperature, power).
//
// Utilisation and per-process numbers come from the busy-time rings in the shared state (see
// README.md for the formulas). A MIG device reports its GPU instance's memory and what processes
// have allocated in that GPU instance (its CIs share it), and the processes attached to it (by
// hami-simctl mig-attach, or by holding a CUDA context on it) with what each allocated on it.
// A GPU's used memory includes what its MIG devices hold.

#include <math.h>

#include <algorithm>
#include <vector>

#include "sim/gpu/clock.h"
#include "sim/gpu/log.h"
#include "sim/gpu/nvml_internal.h"
#include "sim/gpu/proc_liveness.h"

namespace hami::sim {
namespace {

// Window of nvmlDeviceGetUtilizationRates.
constexpr uint64_t kUtilWindowNs = 1000000000ull;

// Device occupancy in percent over the last second (for the utilisation-dependent sensors).
double RecentOccupancy(int phys) {
  uint64_t now = MonotonicNs();
  double busy = g_rt->state().DeviceBusyNs(phys, now - kUtilWindowNs, now);
  return 100.0 * busy / (static_cast<double>(g_rt->device(phys).sm_count) * kUtilWindowNs);
}

// One row of a running-process list.
struct ProcRow {
  unsigned pid;
  unsigned long long mem_bytes;
  unsigned gi_id;  // 0xFFFFFFFF: not in a MIG instance
  unsigned ci_id;
};

constexpr unsigned kNoInstance = 0xFFFFFFFFu;

// Live processes attached to compute instances of `phys` that this process may see (only `mig`
// if given), with the memory each holds there.
void AppendMigProcesses(int phys, const DeviceRef* mig, std::vector<ProcRow>* rows) {
  if (MigModelOf(phys) == nullptr) return;
  MigDeviceState snap = g_rt->state().MigSnapshot(phys);
  for (const MigGpuInstanceRecord& gi : snap.gis) {
    if (!gi.live || (mig != nullptr && gi.id != mig->gi_id)) continue;
    for (const MigComputeInstanceRecord& ci : gi.cis) {
      if (!ci.live || (mig != nullptr && ci.id != mig->ci_id)) continue;
      if (!g_rt->NvmlSeesMig(phys, gi.id, ci.id)) continue;
      for (const MigAttachedProcess& p : ci.procs) {
        if (p.pid != 0 && ProcessAlive(p.pid, p.start_time)) {
          uint64_t bytes =
              g_rt->state().MigProcessMemory(p.pid, p.start_time, phys, gi.id, ci.id);
          rows->push_back(ProcRow{static_cast<unsigned>(p.pid), bytes, gi.id, ci.id});
        }
      }
    }
  }
}

template <typename Info>
nvmlReturn_t RunningProcesses(nvmlDevice_t device, unsigned int* infoCount, Info* infos,
                              void (*fill)(Info*, const ProcRow&)) {
  DeviceRef ref;
  nvmlReturn_t rc = CheckAnyDevice(device, &ref);
  if (rc != NVML_SUCCESS) return rc;
  if (infoCount == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
  std::vector<ProcRow> rows;
  if (ref.mig) {
    AppendMigProcesses(ref.phys, &ref, &rows);
  } else {
    uint64_t now = MonotonicNs();
    for (const ProcessUsage& p : g_rt->state().Processes(ref.phys, now, now)) {
      rows.push_back(ProcRow{static_cast<unsigned>(p.pid), p.mem_bytes, kNoInstance, kNoInstance});
    }
    AppendMigProcesses(ref.phys, nullptr, &rows);
  }
  unsigned n = static_cast<unsigned>(rows.size());
  if (*infoCount < n || (infos == nullptr && n > 0)) {
    *infoCount = n;
    return NVML_ERROR_INSUFFICIENT_SIZE;
  }
  for (unsigned i = 0; i < n; ++i) fill(&infos[i], rows[i]);
  *infoCount = n;
  return NVML_SUCCESS;
}

// Total and used bytes of a GPU or MIG device.
nvmlReturn_t MemoryOf(nvmlDevice_t device, uint64_t* total, uint64_t* used) {
  DeviceRef ref;
  nvmlReturn_t rc = CheckAnyDevice(device, &ref);
  if (rc != NVML_SUCCESS) return rc;
  if (ref.mig) {
    MigDeviceView v;
    if (!ViewMigDevice(ref.phys, ref.gi_id, ref.ci_id, &v)) return NVML_ERROR_NOT_FOUND;
    *total = v.gi_profile->memory_mib << 20;
    *used = std::min(*total, g_rt->state().MigUsedMemory(ref.phys, ref.gi_id));
    return NVML_SUCCESS;
  }
  *total = g_rt->device(ref.phys).memory_bytes;
  *used = std::min(*total, g_rt->state().UsedMemory(ref.phys));
  return NVML_SUCCESS;
}

}  // namespace
}  // namespace hami::sim

using namespace hami::sim;  // NOLINT: the C ABI entry points below implement this namespace's API

// ---------------------------------------------------------------- memory and utilisation

HAMI_SIM_EXPORT nvmlReturn_t nvmlDeviceGetMemoryInfo(nvmlDevice_t device, nvmlMemory_t* memory) {
  uint64_t total, used;
  nvmlReturn_t rc = MemoryOf(device, &total, &used);
  if (rc != NVML_SUCCESS) return rc;
  if (memory == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
  memory->total = total;
  memory->used = used;
  memory->free = total - used;
  return NVML_SUCCESS;
}

HAMI_SIM_EXPORT nvmlReturn_t nvmlDeviceGetMemoryInfo_v2(nvmlDevice_t device,
                                                        nvmlMemory_v2_t* memory) {
  uint64_t total, used;
  nvmlReturn_t rc = MemoryOf(device, &total, &used);
  if (rc != NVML_SUCCESS) return rc;
  if (memory == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
  if (memory->version != nvmlMemory_v2) return NVML_ERROR_ARGUMENT_VERSION_MISMATCH;
  memory->total = total;
  memory->reserved = 0;
  memory->used = used;
  memory->free = total - used;
  return NVML_SUCCESS;
}

HAMI_SIM_EXPORT nvmlReturn_t nvmlDeviceGetUtilizationRates(nvmlDevice_t device,
                                                           nvmlUtilization_t* utilization) {
  int phys;
  nvmlReturn_t rc = CheckDevice(device, &phys);
  if (rc != NVML_SUCCESS) return rc;
  if (utilization == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
  double pct = RecentOccupancy(phys);
  utilization->gpu = static_cast<unsigned>(std::min(100.0, std::max(0.0, std::round(pct))));
  utilization->memory = 0;
  return NVML_SUCCESS;
}

HAMI_SIM_EXPORT nvmlReturn_t nvmlDeviceGetProcessUtilization(
    nvmlDevice_t device, nvmlProcessUtilizationSample_t* utilization,
    unsigned int* processSamplesCount, unsigned long long lastSeenTimeStamp) {
  int phys;
  nvmlReturn_t rc = CheckDevice(device, &phys);
  if (rc != NVML_SUCCESS) return rc;
  if (processSamplesCount == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
  // Convert the caller's wall-clock microseconds to the monotonic clock of the timeline.
  uint64_t now_mono = MonotonicNs();
  uint64_t now_real = RealtimeNs();
  const uint64_t span = static_cast<uint64_t>(kRingBuckets - 1) * kBucketNs;
  uint64_t from_mono = now_mono > span ? now_mono - span : 0;
  const unsigned __int128 last_real = static_cast<unsigned __int128>(lastSeenTimeStamp) * 1000;
  if (const uint64_t period = g_rt->nvml_sample_ns(); period != 0) {
    // Like a real driver: one sample per process per period, taken at the period's end (wall
    // clock multiples of the period) and covering that period alone.
    const uint64_t boundary = now_real / period * period;
    if (last_real >= boundary || now_mono < now_real - boundary + period) {
      *processSamplesCount = 0;
      return NVML_ERROR_NOT_FOUND;
    }
    now_mono -= now_real - boundary;
    now_real = boundary;
    from_mono = now_mono - period;
  } else {
    if (last_real >= now_real) {
      *processSamplesCount = 0;
      return NVML_ERROR_NOT_FOUND;
    }
    uint64_t back = static_cast<uint64_t>(now_real - last_real);
    if (back < now_mono - from_mono) from_mono = now_mono - back;
  }
  std::vector<ProcessUsage> procs = g_rt->state().Processes(phys, from_mono, now_mono);
  unsigned n = static_cast<unsigned>(procs.size());
  if (n == 0) {
    *processSamplesCount = 0;
    return NVML_ERROR_NOT_FOUND;
  }
  if (utilization == nullptr || *processSamplesCount < n) {
    *processSamplesCount = n;
    return NVML_ERROR_INSUFFICIENT_SIZE;
  }
  const double capacity =
      static_cast<double>(g_rt->device(phys).sm_count) * static_cast<double>(now_mono - from_mono);
  SimLogDebug("process utilisation of device %d over %.3f ms: %u processes", phys,
              static_cast<double>(now_mono - from_mono) / 1e6, n);
  for (unsigned i = 0; i < n; ++i) {
    SimLogDebug("  pid %d busy %.3f SM-ms", static_cast<int>(procs[i].pid),
                procs[i].busy_sm_ns / 1e6);
    double pct = capacity > 0 ? 100.0 * procs[i].busy_sm_ns / capacity : 0.0;
    nvmlProcessUtilizationSample_t& s = utilization[i];
    s.pid = static_cast<unsigned>(procs[i].pid);
    s.timeStamp = now_real / 1000;
    s.smUtil = static_cast<unsigned>(std::min(100.0, std::max(0.0, std::round(pct))));
    s.memUtil = 0;
    s.encUtil = 0;
    s.decUtil = 0;
  }
  *processSamplesCount = n;
  return NVML_SUCCESS;
}

namespace {
void FillV1(nvmlProcessInfo_v1_t* out, const ProcRow& p) {
  out->pid = p.pid;
  out->usedGpuMemory = p.mem_bytes;
}
void FillV2(nvmlProcessInfo_v2_t* out, const ProcRow& p) {
  out->pid = p.pid;
  out->usedGpuMemory = p.mem_bytes;
  out->gpuInstanceId = p.gi_id;
  out->computeInstanceId = p.ci_id;
}
void FillV3(nvmlProcessInfo_t* out, const ProcRow& p) {
  out->pid = p.pid;
  out->usedGpuMemory = p.mem_bytes;
  out->gpuInstanceId = p.gi_id;
  out->computeInstanceId = p.ci_id;
}
}  // namespace

HAMI_SIM_EXPORT nvmlReturn_t nvmlDeviceGetComputeRunningProcesses(nvmlDevice_t device,
                                                                  unsigned int* infoCount,
                                                                  nvmlProcessInfo_v1_t* infos) {
  return RunningProcesses(device, infoCount, infos, &FillV1);
}

HAMI_SIM_EXPORT nvmlReturn_t nvmlDeviceGetComputeRunningProcesses_v2(nvmlDevice_t device,
                                                                     unsigned int* infoCount,
                                                                     nvmlProcessInfo_v2_t* infos) {
  return RunningProcesses(device, infoCount, infos, &FillV2);
}

HAMI_SIM_EXPORT nvmlReturn_t nvmlDeviceGetComputeRunningProcesses_v3(nvmlDevice_t device,
                                                                     unsigned int* infoCount,
                                                                     nvmlProcessInfo_t* infos) {
  return RunningProcesses(device, infoCount, infos, &FillV3);
}

// The sim runs no graphics work: an empty list for any valid GPU or MIG device.
HAMI_SIM_EXPORT nvmlReturn_t nvmlDeviceGetGraphicsRunningProcesses_v3(nvmlDevice_t device,
                                                                      unsigned int* infoCount,
                                                                      nvmlProcessInfo_t* infos) {
  DeviceRef ref;
  nvmlReturn_t rc = CheckAnyDevice(device, &ref);
  if (rc != NVML_SUCCESS) return rc;
  if (infoCount == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
  (void)infos;
  *infoCount = 0;
  return NVML_SUCCESS;
}

HAMI_SIM_EXPORT nvmlReturn_t nvmlDeviceGetTemperature(nvmlDevice_t device,
                                                      nvmlTemperatureSensors_t sensorType,
                                                      unsigned int* temp) {
  int phys;
  nvmlReturn_t rc = CheckDevice(device, &phys);
  if (rc != NVML_SUCCESS) return rc;
  if (temp == nullptr || sensorType != NVML_TEMPERATURE_GPU) return NVML_ERROR_INVALID_ARGUMENT;
  *temp = 32 + static_cast<unsigned>(std::lround(RecentOccupancy(phys) * 0.4));
  return NVML_SUCCESS;
}

HAMI_SIM_EXPORT nvmlReturn_t nvmlDeviceGetPowerUsage(nvmlDevice_t device, unsigned int* power) {
  int phys;
  nvmlReturn_t rc = CheckDevice(device, &phys);
  if (rc != NVML_SUCCESS) return rc;
  if (power == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
  *power = 60000 + static_cast<unsigned>(std::lround(RecentOccupancy(phys) * 3400.0));  // mW
  return NVML_SUCCESS;
}
