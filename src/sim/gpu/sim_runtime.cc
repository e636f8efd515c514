#include "sim/gpu/sim_runtime.h"

#include <stdlib.h>
#include <unistd.h>

#include <algorithm>

#include "sim/gpu/log.h"
#include "sim/gpu/mig_profiles.h"
#include "sim/gpu/mig_state.h"
#include "sim/gpu/proc_liveness.h"
#include "sim/gpu/visibility.h"

namespace hami::sim {
namespace {

struct InitResult {
  SimRuntime* runtime = nullptr;
  std::string error;
};

// A MIG device that exists, with what CUDA reports of it.
struct LiveMig {
  MigDeviceName name;
  uint64_t memory_bytes;
  int sm_count;
  int sm_first;
  int sm_span;
};

// Every MIG device of the node, each GPU's in NVML's index order.
std::vector<LiveMig> LiveMigDevices(SharedState& state) {
  std::vector<LiveMig> out;
  for (int phys = 0; phys < state.device_count(); ++phys) {
    const SharedDeviceInfo& d = state.device(phys);
    const MigModel* model = MigModelFor(d.name, d.memory_bytes);
    if (model == nullptr) continue;
    const MigDeviceState snap = state.MigSnapshot(phys);
    for (const auto& [gi_id, ci_id] : MigDevices(snap)) {
      const MigGpuInstanceRecord* gi = MigFindGi(snap, gi_id);
      const MigComputeInstanceRecord* ci = MigFindCi(*gi, ci_id);
      const MigGiProfile* gp = MigGiProfileById(*model, gi->profile_id);
      MigCiProfile cp;
      if (gp == nullptr || !MigCiProfileFor(*model, *gp, ci->profile_id, &cp)) continue;
      LiveMig m{{phys, gi_id, ci_id, ci->uuid}, gp->memory_mib << 20,
                static_cast<int>(cp.sm_count), 0, 0};
      MigSmRange(gi->start, ci->start, cp.sm_count, d.sm_count, &m.sm_first, &m.sm_span);
      out.push_back(std::move(m));
    }
  }
  return out;
}

CudaDevice MakeCudaDevice(const SharedState& state, const VisibleDevice& v,
                          const std::vector<LiveMig>& migs) {
  CudaDevice c;
  c.phys = v.phys;
  const SharedDeviceInfo& d = state.device(v.phys);
  if (v.mig < 0) {
    c.uuid = d.uuid;
    c.memory_bytes = d.memory_bytes;
    c.sm_count = c.sm_span = d.sm_count;
    return c;
  }
  const LiveMig& m = migs[static_cast<size_t>(v.mig)];
  c.mig = true;
  c.gi_id = m.name.gi_id;
  c.ci_id = m.name.ci_id;
  c.uuid = m.name.uuid;
  c.memory_bytes = m.memory_bytes;
  c.sm_count = m.sm_count;
  c.sm_first = m.sm_first;
  c.sm_span = m.sm_span;
  return c;
}

}  // namespace

SimRuntime* SimRuntime::CreateForInit(std::string* error) {
  SimConfig config;
  const char* path = getenv("HAMI_SIM_CONFIG");
  if (path != nullptr && path[0] != '\0') {
    if (!LoadConfigFile(path, &config, error)) {
      *error = "bad device config (HAMI_SIM_CONFIG): " + *error;
      return nullptr;
    }
  } else {
    config = DefaultConfig();
  }
  std::string state_path = StatePathFromEnv();
  const char* state_env = getenv("HAMI_SIM_STATE");
  if ((path == nullptr || path[0] == '\0') && (state_env == nullptr || state_env[0] == '\0')) {
    // Likely a process started by hand without its node's variables: say what it gets.
    SimLogWarn(
        "neither HAMI_SIM_CONFIG nor HAMI_SIM_STATE is set: this process sees the built-in node "
        "(%zu x %s), state %s; give it the HAMI_SIM_CONFIG and HAMI_SIM_STATE of its node's "
        "kubelet",
        config.devices.size(), config.devices[0].name.c_str(), state_path.c_str());
  }
  auto state = SharedState::Open(state_path, config, error);
  if (state == nullptr) return nullptr;
  auto* rt = new SimRuntime();
  rt->state_ = std::move(state);
  rt->nvml_sample_ns_ = static_cast<uint64_t>(config.nvml_sample_ms) * 1'000'000;
  rt->max_queued_ns_ = static_cast<uint64_t>(config.max_queued_ms) * 1'000'000;
  rt->ResolveVisibility();
  SimLogDebug("state %s: %d devices, %zu visible to NVML, %zu to CUDA", state_path.c_str(),
              rt->state_->device_count(), rt->nvml_visible_.size(), rt->cuda_devices_.size());
  return rt;
}

void SimRuntime::ResolveVisibility() {
  std::vector<std::string> uuids;
  for (int i = 0; i < state_->device_count(); ++i) uuids.push_back(state_->device(i).uuid);
  const std::vector<LiveMig> live = LiveMigDevices(*state_);
  std::vector<MigDeviceName> migs;
  for (const LiveMig& m : live) migs.push_back(m.name);
  std::vector<std::string> warnings;
  const std::vector<VisibleDevice> nvidia =
      ResolveNvidiaVisible(getenv("NVIDIA_VISIBLE_DEVICES"), uuids, migs, &warnings);
  nvml_visible_ = NvmlGpus(nvidia);
  for (const VisibleDevice& v : nvidia) {
    if (v.mig < 0) {
      nvml_whole_.push_back(v.phys);
    } else {
      const MigDeviceName& m = migs[static_cast<size_t>(v.mig)];
      nvml_migs_.push_back(MigId{m.phys, m.gi_id, m.ci_id});
    }
  }
  for (const VisibleDevice& v :
       ResolveCudaVisible(getenv("CUDA_VISIBLE_DEVICES"), nvidia, uuids, migs, &warnings)) {
    cuda_devices_.push_back(MakeCudaDevice(*state_, v, live));
  }
  for (const std::string& w : warnings) SimLogWarn("%s", w.c_str());
}

bool SimRuntime::NvmlSeesMig(int phys, uint32_t gi_id, uint32_t ci_id) const {
  if (std::find(nvml_whole_.begin(), nvml_whole_.end(), phys) != nvml_whole_.end()) return true;
  return std::any_of(nvml_migs_.begin(), nvml_migs_.end(), [&](const MigId& m) {
    return m.phys == phys && m.gi_id == gi_id && m.ci_id == ci_id;
  });
}

namespace {
InitResult* Initialise() {
  static InitResult* result = [] {
    auto* r = new InitResult();
    r->runtime = SimRuntime::CreateForInit(&r->error);
    if (r->runtime == nullptr) SimLogError("%s", r->error.c_str());
    return r;
  }();
  return result;
}
}  // namespace

SimRuntime* SimRuntime::Get() { return Initialise()->runtime; }

const std::string& SimRuntime::InitError() { return Initialise()->error; }

int SimRuntime::Slot() {
  const int64_t pid = getpid();
  int64_t cached = slot_cache_.load(std::memory_order_acquire);
  if (cached >= 0 && (cached >> 16) == pid) return static_cast<int>(cached & 0xffff);
  // Recorded by host PID, as a real driver reports processes (proc_liveness.h).
  const pid_t host_pid = SimSelfPid();
  int slot = state_->RegisterProcess(host_pid, ProcessStartTime(host_pid));
  if (slot < 0) {
    SimLogError("shared process table is full (%d live processes); cannot charge memory",
                kMaxProcesses);
    return -1;
  }
  slot_cache_.store((pid << 16) | slot, std::memory_order_release);
  return slot;
}

}  // namespace hami::sim
