#include "commands.h"

#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <memory>
#include <vector>

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

namespace {

// Checks that `instance` names a GPU instance (and compute instance) that exists on `device`;
// prints why not and returns false otherwise.
bool CheckXidInstance(SharedState& state, int device, const XidInstance& instance, FILE* err) {
  if (instance.gi_id < 0 && instance.ci_id < 0) return true;
  if (instance.gi_id < 0) {
    fprintf(err, "hami-simctl: --ci needs --gi (a compute instance is named within its GPU "
                 "instance)\n");
    return false;
  }
  const sim::MigDeviceState mig = state.MigSnapshot(device);
  const sim::MigGpuInstanceRecord* gi =
      instance.gi_id < sim::kMigGiIdSpace
          ? sim::MigFindGi(mig, static_cast<uint32_t>(instance.gi_id))
          : nullptr;
  if (gi == nullptr) {
    fprintf(err, "hami-simctl: GPU %d has no GPU instance %" PRId64 " (see `hami-simctl mig`)\n",
            device, instance.gi_id);
    return false;
  }
  if (instance.ci_id >= 0 &&
      (instance.ci_id >= sim::kMigCiIdSpace ||
       sim::MigFindCi(*gi, static_cast<uint32_t>(instance.ci_id)) == nullptr)) {
    fprintf(err,
            "hami-simctl: GPU instance %" PRId64 " of GPU %d has no compute instance %" PRId64
            " (see `hami-simctl mig`)\n",
            instance.gi_id, device, instance.ci_id);
    return false;
  }
  return true;
}

}  // namespace

int InjectXid(const std::string& state_path, const std::string& config_path, int device,
              unsigned long long xid, const XidInstance& instance, FILE* out, FILE* err) {
  auto state = OpenState(state_path, config_path, err);
  if (state == nullptr) return 1;
  if (device < 0 || device >= state->device_count()) {
    fprintf(err, "hami-simctl: no device %d (the node has %d)\n", device, state->device_count());
    return 2;
  }
  if (!CheckXidInstance(*state, device, instance, err)) return 2;
  auto id = [](int64_t v) { return v < 0 ? sim::kXidNoInstance : static_cast<uint32_t>(v); };
  state->InjectXid(device, xid, id(instance.gi_id), id(instance.ci_id));
  fprintf(out, "injected XID %llu on GPU %d (%s)", xid, device, state->device(device).uuid);
  if (instance.gi_id >= 0) fprintf(out, ", GPU instance %" PRId64, instance.gi_id);
  if (instance.ci_id >= 0) fprintf(out, ", compute instance %" PRId64, instance.ci_id);
  fprintf(out, "\n");
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
      fprintf(out, "  GI %-2u  %-11s (profile %2u)  placement {%u,%u}  %s used\n", gi.id,
              p != nullptr ? p->name : "?", gi.profile_id, gi.start, gi.size,
              Mib(state->MigUsedMemory(i, gi.id)).c_str());
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

namespace {

// The MIG tables of physical device `device`; nullptr (after saying why) when there is no such
// device or it cannot do MIG.
const sim::MigModel* MigGpu(SharedState& state, int device, FILE* err) {
  if (device < 0 || device >= state.device_count()) {
    fprintf(err, "hami-simctl: no device %d (the node has %d)\n", device, state.device_count());
    return nullptr;
  }
  const sim::SharedDeviceInfo& d = state.device(device);
  const sim::MigModel* model = sim::MigModelFor(d.name, d.memory_bytes);
  if (model == nullptr) fprintf(err, "hami-simctl: GPU %d (%s) cannot do MIG\n", device, d.name);
  return model;
}

std::string ProfileNames(const sim::MigModel& model) {
  std::string names;
  for (int i = 0; i < model.profile_count; ++i) {
    names += (i > 0 ? ", " : "") + std::string(model.profiles[i].name);
  }
  return names;
}

std::string Placements(const sim::MigGiProfile& p) {
  std::string s;
  for (uint32_t start : sim::MigGiPlacementStarts(p)) {
    s += (s.empty() ? "" : " ") + std::to_string(start) + ":" + std::to_string(p.memory_slices);
  }
  return s;
}

// The compute instance profile spanning a whole GI of profile `p` (the tables always have one).
bool FullCiProfile(const sim::MigModel& model, const sim::MigGiProfile& p, sim::MigCiProfile* out) {
  for (uint32_t e = 0; e < sim::kMigCiProfileEnumCount; ++e) {
    if (sim::MigCiProfileFor(model, p, e, out) && out->slices == p.compute_slices) return true;
  }
  return false;
}

// Says why the driver refused to create `p` on `device` (NVML code `rc`).
void CreateRefused(nvmlReturn_t rc, int device, const sim::MigGiProfile& p, int start, FILE* err) {
  switch (rc) {
    case NVML_ERROR_NOT_SUPPORTED:
      fprintf(err, "hami-simctl: MIG is disabled on GPU %d (hami-simctl mig-mode --device %d "
                   "--enable)\n", device, device);
      return;
    case NVML_ERROR_INVALID_ARGUMENT:
      fprintf(err, "hami-simctl: %s cannot start at memory slice %d (its placements: %s)\n",
              p.name, start, Placements(p).c_str());
      return;
    case NVML_ERROR_INSUFFICIENT_RESOURCES:
      fprintf(err,
              "hami-simctl: no room for %s on GPU %d: it overlaps a GPU instance, or all %u "
              "instances of the profile exist (see `hami-simctl mig`)\n",
              p.name, device, p.instance_count);
      return;
    default:
      fprintf(err, "hami-simctl: creating %s on GPU %d failed (NVML error %d)\n", p.name, device,
              rc);
  }
}

}  // namespace

int MigCreate(const std::string& state_path, const std::string& config_path, int device,
              const std::string& profile, int start, FILE* out, FILE* err) {
  auto state = OpenState(state_path, config_path, err);
  if (state == nullptr) return 1;
  const sim::MigModel* model = MigGpu(*state, device, err);
  if (model == nullptr) return 2;
  const sim::MigGiProfile* p = nullptr;
  for (int i = 0; i < model->profile_count; ++i) {
    if (profile == model->profiles[i].name) p = &model->profiles[i];
  }
  sim::MigCiProfile full;
  if (p == nullptr || !FullCiProfile(*model, *p, &full)) {
    fprintf(err, "hami-simctl: GPU %d has no MIG profile %s (%s tables: %s)\n", device,
            profile.c_str(), model->name, ProfileNames(*model).c_str());
    return 2;
  }
  const nvmlGpuInstancePlacement_t at{static_cast<unsigned>(start), p->memory_slices};
  const uint64_t seed = state->MigUuidSeed(device);
  uint32_t gi_id = 0, ci_id = 0;
  nvmlReturn_t rc = state->UpdateMig(device, [&](sim::MigDeviceState& m, bool) {
    nvmlReturn_t r =
        sim::MigCreateGpuInstance(&m, *model, p->id, start < 0 ? nullptr : &at, &gi_id);
    if (r != NVML_SUCCESS) return r;
    r = sim::MigCreateComputeInstance(&m, *model, gi_id, full.id, nullptr, seed, &ci_id);
    if (r != NVML_SUCCESS) sim::MigDestroyGpuInstance(&m, gi_id);  // nothing half made stays
    return r;
  });
  if (rc != NVML_SUCCESS) {
    CreateRefused(rc, device, *p, start, err);
    return 2;
  }
  const sim::MigDeviceState mig = state->MigSnapshot(device);
  const sim::MigGpuInstanceRecord* gi = sim::MigFindGi(mig, gi_id);
  const sim::MigComputeInstanceRecord* ci = gi != nullptr ? sim::MigFindCi(*gi, ci_id) : nullptr;
  if (ci == nullptr) {
    fprintf(err, "hami-simctl: GPU instance %u of GPU %d was destroyed at once\n", gi_id, device);
    return 1;
  }
  fprintf(out, "%s GPU %d GI %u CI %u %s at %u:%u\n", ci->uuid, device, gi_id, ci_id, p->name,
          gi->start, gi->size);
  return 0;
}

int MigDestroy(const std::string& state_path, const std::string& config_path, int device,
               int64_t gi_id, FILE* out, FILE* err) {
  auto state = OpenState(state_path, config_path, err);
  if (state == nullptr) return 1;
  if (MigGpu(*state, device, err) == nullptr) return 2;
  const uint32_t id = static_cast<uint32_t>(gi_id);
  uint32_t destroyed = 0;
  nvmlReturn_t rc = NVML_ERROR_NOT_FOUND;
  if (gi_id >= 0 && gi_id < sim::kMigGiIdSpace) {
    rc = state->UpdateMig(device, [&](sim::MigDeviceState& m, bool) -> nvmlReturn_t {
      sim::MigDeviceState next = m;  // applied only once every destroy succeeded
      const sim::MigGpuInstanceRecord* gi = sim::MigFindGi(next, id);
      if (gi == nullptr) return NVML_ERROR_NOT_FOUND;
      std::vector<uint32_t> cis;
      for (const sim::MigComputeInstanceRecord& ci : gi->cis) {
        if (ci.live) cis.push_back(ci.id);
      }
      for (uint32_t ci : cis) {
        nvmlReturn_t r = sim::MigDestroyComputeInstance(&next, id, ci, &sim::ProcessAlive);
        if (r != NVML_SUCCESS) return r;
      }
      nvmlReturn_t r = sim::MigDestroyGpuInstance(&next, id);
      if (r == NVML_SUCCESS) {
        m = next;
        destroyed = static_cast<uint32_t>(cis.size());
      }
      return r;
    });
  }
  if (rc == NVML_ERROR_NOT_FOUND) {
    fprintf(err, "hami-simctl: GPU %d has no GPU instance %" PRId64 " (see `hami-simctl mig`)\n",
            device, gi_id);
    return 2;
  }
  if (rc == NVML_ERROR_IN_USE) {
    fprintf(err,
            "hami-simctl: GPU instance %u of GPU %d is in use: a process attached to one of its "
            "compute instances still runs (see `hami-simctl mig`); nothing was destroyed\n",
            id, device);
    return 2;
  }
  if (rc != NVML_SUCCESS) {
    fprintf(err, "hami-simctl: destroying GPU instance %u of GPU %d failed (NVML error %d)\n", id,
            device, rc);
    return 2;
  }
  fprintf(out, "destroyed GPU instance %u of GPU %d and its %u compute instance(s)\n", id, device,
          destroyed);
  return 0;
}

int MigMode(const std::string& state_path, const std::string& config_path, int device,
            bool enable, FILE* out, FILE* err) {
  auto state = OpenState(state_path, config_path, err);
  if (state == nullptr) return 1;
  if (MigGpu(*state, device, err) == nullptr) return 2;
  const uint32_t mode = enable ? NVML_DEVICE_MIG_ENABLE : NVML_DEVICE_MIG_DISABLE;
  nvmlReturn_t activation = NVML_SUCCESS;
  bool busy = false;
  nvmlReturn_t rc = state->UpdateMig(device, [&](sim::MigDeviceState& m, bool cuda_busy) {
    busy = cuda_busy || sim::MigHasLiveProcesses(m, &sim::ProcessAlive);
    return sim::MigSetMode(&m, mode, busy ? NVML_ERROR_IN_USE : NVML_SUCCESS, &activation);
  });
  const char* what = enable ? "enabled" : "disabled";
  if (rc != NVML_SUCCESS) {
    fprintf(err, "hami-simctl: setting the MIG mode of GPU %d failed (NVML error %d)\n", device,
            rc);
    return 2;
  }
  if (activation != NVML_SUCCESS) {
    fprintf(err, "hami-simctl: GPU %d: MIG %s is pending: %s\n", device, what,
            busy ? "processes use the GPU; it takes effect once they are gone and this is run "
                   "again"
                 : "GPU instances remain (hami-simctl mig-destroy them first)");
    return 2;
  }
  fprintf(out, "GPU %d: MIG %s\n", device, what);
  return 0;
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
