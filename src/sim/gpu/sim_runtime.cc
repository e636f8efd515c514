#include "sim/gpu/sim_runtime.h"

#include <stdlib.h>
#include <unistd.h>

#include "sim/gpu/log.h"
#include "sim/gpu/proc_liveness.h"
#include "sim/gpu/visibility.h"

namespace hami::sim {
namespace {

struct InitResult {
  SimRuntime* runtime = nullptr;
  std::string error;
};

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
  std::vector<std::string> uuids;
  for (int i = 0; i < rt->state_->device_count(); ++i) uuids.push_back(rt->state_->device(i).uuid);
  std::vector<std::string> warnings;
  rt->nvml_visible_ = ResolveNvidiaVisible(getenv("NVIDIA_VISIBLE_DEVICES"), uuids, &warnings);
  rt->cuda_visible_ =
      ResolveCudaVisible(getenv("CUDA_VISIBLE_DEVICES"), rt->nvml_visible_, uuids, &warnings);
  for (const std::string& w : warnings) SimLogWarn("%s", w.c_str());
  SimLogDebug("state %s: %d devices, %zu visible to NVML, %zu to CUDA", state_path.c_str(),
              rt->state_->device_count(), rt->nvml_visible_.size(), rt->cuda_visible_.size());
  return rt;
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
