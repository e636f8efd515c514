// The subcommands of hami-simctl, the control CLI of the simulated GPU node.
//
// Each command works directly on the shared state file (HAMI_SIM_STATE or --state), not
// through the simulated NVML/CUDA libraries, so it sees every physical device regardless of
// NVIDIA_VISIBLE_DEVICES and never registers itself as a GPU process.
//
// Thread safety: single-threaded CLI code.
#pragma once

#include <stdint.h>
#include <stdio.h>

#include <string>

namespace hami::simctl {

// `config_path` is the node's device config (HAMI_SIM_CONFIG; empty: the built-in default):
// every command but Reset refuses a state made from another config, and a missing state (they
// never create one).

// Prints devices, memory in use per process and utilisation over the last second.
int Status(const std::string& state_path, const std::string& config_path, FILE* out, FILE* err);

// The MIG instance an injected XID is charged to: none (both negative), a GPU instance
// (gi_id >= 0), or one of its compute instances (both >= 0).
struct XidInstance {
  int64_t gi_id = -1;
  int64_t ci_id = -1;
};

// Posts XID `xid` on physical device `device`, charged to `instance` (which must exist: refused
// with exit status 2 otherwise); NVML event sets registered for nvmlEventTypeXidCriticalError on
// that device receive it, with the instance's ids in gpuInstanceId / computeInstanceId
// (0xFFFFFFFF where not given).
int InjectXid(const std::string& state_path, const std::string& config_path, int device,
              unsigned long long xid, const XidInstance& instance, FILE* out, FILE* err);

// Prints each device's MIG support and mode, its GPU instances (profile, id, placement, memory
// used) and their compute instances (id, placement, MIG device UUID, attached live processes).
int MigList(const std::string& state_path, const std::string& config_path, FILE* out, FILE* err);

// Test hook: records process `pid` as running inside the MIG device `mig_uuid`, as if it had
// been started there. While it lives, destroying that compute instance fails with
// NVML_ERROR_IN_USE, MIG mode changes of the GPU stay pending, and NVML lists it among the
// processes of the MIG device and of its GPU.
int MigAttach(const std::string& state_path, const std::string& config_path,
              const std::string& mig_uuid, int pid, FILE* out, FILE* err);

// Operator commands, the simulated node's stand-ins for `nvidia-smi mig -cgi NAME -C`,
// `nvidia-smi mig -dci -dgi` and `nvidia-smi -mig 1|0`. They change a GPU's MIG state by the
// driver's rules (sim/gpu/mig_state.h), atomically under the state lock, and exit with status 2,
// saying why, when the driver would refuse. HAMI_SIM_MIG_ACTIVATION (a hook of the simulated
// NVML library for its own process) does not apply to them.

// Makes a GPU instance of profile `profile` (NVML's name without "MIG ", e.g. "1g.10gb" or
// "1g.10gb+me") on physical device `device`, starting at memory slice `start` (negative: where
// the driver would put it, the free placement with the highest start), and a compute instance
// spanning it. Prints "<MIG UUID> GPU <n> GI <id> CI <id> <profile> at <start>:<size>", the
// UUID first.
int MigCreate(const std::string& state_path, const std::string& config_path, int device,
              const std::string& profile, int start, FILE* out, FILE* err);

// Destroys GPU instance `gi_id` of `device` and its compute instances: all of them, or nothing
// when a live process is attached to one of them.
int MigDestroy(const std::string& state_path, const std::string& config_path, int device,
               int64_t gi_id, FILE* out, FILE* err);

// Turns `device`'s MIG mode on or off. A change the GPU cannot activate now (processes use it;
// when disabling, GPU instances remain) stays pending, as the driver records it, and exits 2.
int MigMode(const std::string& state_path, const std::string& config_path, int device,
            bool enable, FILE* out, FILE* err);

// Removes the state file so the next process recreates it from the current config. Processes
// that still map the old file keep using it until they exit.
int Reset(const std::string& state_path, FILE* out, FILE* err);

}  // namespace hami::simctl
