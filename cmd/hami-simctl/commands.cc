#include "commands.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <memory>

#include "sim/gpu/clock.h"
#include "sim/gpu/config.h"
#include "sim/gpu/mig_profiles.h"
#include "sim/gpu/mig_state.h"
#include "sim/gpu/proc_liveness.h"
#include "sim/gpu/shared_state.h"

namespace hami::simctl {
namespace {

using sim::SharedState;

// Opens the state the node's processes use, checked against `config_path` (the node's
// HAMI_SIM_CONFIG; empty: the built-in default node). A missing state is not created: no
// process has used the node yet, and a state made here from a guessed config would be the
// wrong one for them. A state made from another config is refused with the fix.
std::unique_ptr<SharedState> OpenState(const std::string& path, const std::string& config_path,
                                       FILE* err) {
  if (access(path.c_str(), F_OK) != 0) {
    fprintf(err,
            "hami-simctl: no state at %s: no process has used this simulated node yet (or "
            "--state / HAMI_SIM_STATE is not the one its kubelet and device plugin use)\n",
            path.c_str());
    return nullptr;
  }
  sim::SimConfig config;
  std::string error;
  if (!config_path.empty()) {
    if (!sim::LoadConfigFile(config_path, &config, &error)) {
      fprintf(err, "hami-simctl: bad device config (--config / HAMI_SIM_CONFIG): %s\n",
              error.c_str());
      return nullptr;
    }
  } else {
    config = sim::DefaultConfig();
  }
  auto state = SharedState::Open(path, config, &error);
  if (state == nullptr) {
    fprintf(err, "hami-simctl: %s%s\n", error.c_str(),
            config_path.empty() ? " (no --config or HAMI_SIM_CONFIG given: compared with the "
                                  "built-in default node; pass the node's device config)"
                                : "");
  }
  return state;
}

std::string Mib(uint64_t bytes) { return std::to_string(bytes >> 20) + " MiB"; }

}  // namespace

int Status(const std::string& state_path, const std::string& config_path, FILE* out, FILE* err) {
  auto state = OpenState(state_path, config_path, err);
  if (state == nullptr) return 1;
  const uint64_t now = sim::MonotonicNs();
  const uint64_t window = 1000000000ull;
  fprintf(out, "state: %s  config: %s  driver %s  CUDA %d.%d\n", state_path.c_str(),
          config_path.empty() ? "(built-in default)" : config_path.c_str(),
          state->driver_version(), state->cuda_driver_version() / 1000,
          state->cuda_driver_version() % 1000 / 10);
  for (int i = 0; i < state->device_count(); ++i) {
    const sim::SharedDeviceInfo& d = state->device(i);
    auto procs = state->Processes(i, now - window, now);
    uint64_t used = state->UsedMemory(i);
    double capacity = static_cast<double>(d.sm_count) * static_cast<double>(window);
    double util = 100.0 * state->DeviceBusyNs(i, now - window, now) / capacity;
    fprintf(out, "GPU %d  %s  %s\n", i, d.name, d.uuid);
    fprintf(out, "  bus %08X:%02X:%02X.0  NUMA %d  SMs %d  CC %d.%d  NVLinks %d\n", d.pci_domain,
            d.pci_bus, d.pci_device, d.numa_node, d.sm_count, d.cc_major, d.cc_minor,
            d.nvlink_count);
    fprintf(out, "  memory %s / %s used  SM utilisation %.1f%% (last 1 s)\n", Mib(used).c_str(),
            Mib(d.memory_bytes).c_str(), util);
    if (procs.empty()) {
      fprintf(out, "  no processes\n");
      continue;
    }
    fprintf(out, "  %-10s %-14s %-9s %s\n", "PID", "MEMORY", "CONTEXTS", "SM UTIL (last 1 s)");
    for (const auto& p : procs) {
      fprintf(out, "  %-10d %-14s %-9u %.1f%%\n", static_cast<int>(p.pid), Mib(p.mem_bytes).c_str(),
              p.contexts, 100.0 * p.busy_sm_ns / capacity);
    }
  }
  return 0;
}

int InjectXid(const std::string& state_path, const std::string& config_path, int device,
              unsigned long long xid, FILE* out, FILE* err) {
  auto state = OpenState(state_path, config_path, err);
  if (state == nullptr) return 1;
  if (device < 0 || device >= state->device_count()) {
    fprintf(err, "hami-simctl: no device %d (the node has %d)\n", device, state->device_count());
    return 2;
  }
  state->InjectXid(device, xid);
  fprintf(out, "injected XID %llu on GPU %d (%s)\n", xid, device, state->device(device).uuid);
  return 0;
}

int MigList(const std::string& state_path, const std::string& config_path, FILE* out, FILE* err) {
  auto state = OpenState(state_path, config_path, err);
  if (state == nullptr) return 1;
  for (int i = 0; i < state->device_count(); ++i) {
    const sim::SharedDeviceInfo& d = state->device(i);
    const sim::MigModel* model = sim::MigModelFor(d.name, d.memory_bytes);
    if (model == nullptr) {
      fprintf(out, "GPU %d  %s  %s  MIG not supported\n", i, d.name, d.uuid);
      continue;
    }
    const sim::MigDeviceState mig = state->MigSnapshot(i);
    auto mode = [](uint32_t m) { return m == NVML_DEVICE_MIG_ENABLE ? "enabled" : "disabled"; };
    fprintf(out, "GPU %d  %s  %s  MIG %s (pending %s; %s tables)\n", i, d.name, d.uuid,
            mode(mig.current_mode), mode(mig.pending_mode), model->name);
    for (const sim::MigGpuInstanceRecord& gi : mig.gis) {
      if (!gi.live) continue;
      const sim::MigGiProfile* p = sim::MigGiProfileById(*model, gi.profile_id);
      fprintf(out, "  GI %-2u  %-11s (profile %2u)  placement {%u,%u}\n", gi.id,
              p != nullptr ? p->name : "?", gi.profile_id, gi.start, gi.size);
      for (const sim::MigComputeInstanceRecord& ci : gi.cis) {
        if (!ci.live) continue;
        fprintf(out, "    CI %u  profile %u  placement {%u,%u}  %s", ci.id, ci.profile_id,
                ci.start, ci.size, ci.uuid);
        for (const sim::MigAttachedProcess& proc : ci.procs) {
          if (proc.pid != 0 && sim::ProcessAlive(proc.pid, proc.start_time)) {
            fprintf(out, "  pid %d", proc.pid);
          }
        }
        fprintf(out, "\n");
      }
    }
  }
  return 0;
}

int MigAttach(const std::string& state_path, const std::string& config_path,
              const std::string& mig_uuid, int pid, FILE* out, FILE* err) {
  auto state = OpenState(state_path, config_path, err);
  if (state == nullptr) return 1;
  const uint64_t start_time = sim::ProcessStartTime(pid);
  if (pid <= 0 || start_time == 0) {
    fprintf(err, "hami-simctl: no running process %d\n", pid);
    return 2;
  }
  for (int i = 0; i < state->device_count(); ++i) {
    const sim::MigDeviceState mig = state->MigSnapshot(i);
    for (const sim::MigGpuInstanceRecord& gi : mig.gis) {
      for (const sim::MigComputeInstanceRecord& ci : gi.cis) {
        if (!gi.live || !ci.live || mig_uuid != ci.uuid) continue;
        nvmlReturn_t rc = state->UpdateMig(i, [&](sim::MigDeviceState& m, bool) {
          return sim::MigAttachProcess(&m, gi.id, ci.id, pid, start_time, &sim::ProcessAlive);
        });
        if (rc == NVML_ERROR_INSUFFICIENT_RESOURCES) {
          fprintf(err, "hami-simctl: %s already has %d live processes\n", mig_uuid.c_str(),
                  sim::kMigMaxAttached);
          return 2;
        }
        if (rc != NVML_SUCCESS) break;  // destroyed meanwhile
        fprintf(out, "attached pid %d to %s (GPU %d, GI %u, CI %u)\n", pid, mig_uuid.c_str(), i,
                gi.id, ci.id);
        return 0;
      }
    }
  }
  fprintf(err, "hami-simctl: no MIG device %s\n", mig_uuid.c_str());
  return 2;
}

int Reset(const std::string& state_path, FILE* out, FILE* err) {
  if (unlink(state_path.c_str()) != 0 && errno != ENOENT) {
    fprintf(err, "hami-simctl: cannot remove %s: %s\n", state_path.c_str(), strerror(errno));
    return 1;
  }
  fprintf(out, "removed %s; the next process recreates it from the current config\n",
          state_path.c_str());
  return 0;
}

}  // namespace hami::simctl
