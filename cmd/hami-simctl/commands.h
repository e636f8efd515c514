// The subcommands of hami-simctl, the control CLI of the simulated GPU node.
//
// Each command works directly on the shared state file (HAMI_SIM_STATE or --state), not
// through the simulated NVML/CUDA libraries, so it sees every physical device regardless of
// NVIDIA_VISIBLE_DEVICES and never registers itself as a GPU process.
//
// Thread safety: single-threaded CLI code.
#pragma once

#include <stdio.h>

#include <string>

namespace hami::simctl {

// `config_path` is the node's device config (HAMI_SIM_CONFIG; empty: the built-in default):
// every command but Reset refuses a state made from another config, and a missing state (they
// never create one).

// Prints devices, memory in use per process and utilisation over the last second.
int Status(const std::string& state_path, const std::string& config_path, FILE* out, FILE* err);

// Posts XID `xid` on physical device `device`; NVML event sets registered for
// nvmlEventTypeXidCriticalError on that device receive it.
int InjectXid(const std::string& state_path, const std::string& config_path, int device,
              unsigned long long xid, FILE* out, FILE* err);

// Prints each device's MIG support and mode, its GPU instances (profile, id, placement) and
// their compute instances (id, placement, MIG device UUID, attached live processes).
int MigList(const std::string& state_path, const std::string& config_path, FILE* out, FILE* err);

// Test hook: records process `pid` as running inside the MIG device `mig_uuid`, as if it had
// been started there. While it lives, destroying that compute instance fails with
// NVML_ERROR_IN_USE, MIG mode changes of the GPU stay pending, and NVML lists it among the
// processes of the MIG device and of its GPU.
int MigAttach(const std::string& state_path, const std::string& config_path,
              const std::string& mig_uuid, int pid, FILE* out, FILE* err);

// Removes the state file so the next process recreates it from the current config. Processes
// that still map the old file keep using it until they exit.
int Reset(const std::string& state_path, FILE* out, FILE* err);

}  // namespace hami::simctl
