// Simulated libnvidia-ml.so.1: memory, utilisation, per-process usage and the sensors that follow
// utilisation (temperature, power).
//
// Utilisation and per-process numbers come from the busy-time rings in the shared state (see
// README.md for the formulas).

#include <math.h>

#include <algorithm>
#include <vector>

#include "sim/gpu/clock.h"
#include "sim/gpu/log.h"
#include "sim/gpu/nvml_internal.h"

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

template <typename Info>
nvmlReturn_t RunningProcesses(nvmlDevice_t device, unsigned int* infoCount, Info* infos,
                              void (*fill)(Info*, const ProcessUsage&)) {
  int phys;
  nvmlReturn_t rc = CheckDevice(device, &phys);
  if (rc != NVML_SUCCESS) return rc;
  if (infoCount == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
  uint64_t now = MonotonicNs();
  std::vector<ProcessUsage> procs = g_rt->state().Processes(phys, now, now);
  unsigned n = static_cast<unsigned>(procs.size());
  if (*infoCount < n || (infos == nullptr && n > 0)) {
    *infoCount = n;
    return NVML_ERROR_INSUFFICIENT_SIZE;
  }
  for (unsigned i = 0; i < n; ++i) fill(&infos[i], procs[i]);
  *infoCount = n;
  return NVML_SUCCESS;
}

}  // namespace
}  // namespace hami::sim

using namespace hami::sim;  // NOLINT: the C ABI entry points below implement this namespace's API

// ---------------------------------------------------------------- memory and utilisation

HAMI_SIM_EXPORT nvmlReturn_t nvmlDeviceGetMemoryInfo(nvmlDevice_t device, nvmlMemory_t* memory) {
  int phys;
  nvmlReturn_t rc = CheckDevice(device, &phys);
  if (rc != NVML_SUCCESS) return rc;
  if (memory == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
  uint64_t total = g_rt->device(phys).memory_bytes;
  uint64_t used = std::min(total, g_rt->state().UsedMemory(phys));
  memory->total = total;
  memory->used = used;
  memory->free = total - used;
  return NVML_SUCCESS;
}

HAMI_SIM_EXPORT nvmlReturn_t nvmlDeviceGetMemoryInfo_v2(nvmlDevice_t device,
                                                        nvmlMemory_v2_t* memory) {
  int phys;
  nvmlReturn_t rc = CheckDevice(device, &phys);
  if (rc != NVML_SUCCESS) return rc;
  if (memory == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
  if (memory->version != nvmlMemory_v2) return NVML_ERROR_ARGUMENT_VERSION_MISMATCH;
  uint64_t total = g_rt->device(phys).memory_bytes;
  uint64_t used = std::min(total, g_rt->state().UsedMemory(phys));
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
void FillV1(nvmlProcessInfo_v1_t* out, const ProcessUsage& p) {
  out->pid = static_cast<unsigned>(p.pid);
  out->usedGpuMemory = p.mem_bytes;
}
void FillV2(nvmlProcessInfo_v2_t* out, const ProcessUsage& p) {
  out->pid = static_cast<unsigned>(p.pid);
  out->usedGpuMemory = p.mem_bytes;
  out->gpuInstanceId = 0xFFFFFFFFu;
  out->computeInstanceId = 0xFFFFFFFFu;
}
void FillV3(nvmlProcessInfo_t* out, const ProcessUsage& p) {
  out->pid = static_cast<unsigned>(p.pid);
  out->usedGpuMemory = p.mem_bytes;
  out->gpuInstanceId = 0xFFFFFFFFu;
  out->computeInstanceId = 0xFFFFFFFFu;
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
