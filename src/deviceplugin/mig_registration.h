// Dynamic MIG registration (node operating mode "mig"): what a node whose GPUs are cut into MIG
// instances on demand publishes in `hami.io/node-nvidia-register`, so the scheduler can reserve
// a profile and a placement per container. Pure functions of the inventory, the allowlist
// (device-config.yaml `migProfileAllowlist`) and what the driver says of each GPU's profiles.
//
// Per GPU (filtered GPUs are left out):
//  - the allowlist entry is the one with the longest model string contained in the GPU's name
//    (first in list order on a tie), so "NVIDIA H200 NVL" takes the "H200 NVL" entry, not
//    "H20"'s;
//  - each allowlisted profile is resolved against the driver's profiles (ResolveMigProfile) and
//    registered under the driver's name: {name, memoryMB, core = ceil(SMs x 100 / SMs of the
//    largest profile), sliceCount, placements}; placements that overlap a MIG device no owner
//    holds (MigGpuFacts::blocked) are left out, so the scheduler never reserves them;
//  - `count` = the largest instance count of the registered profiles, `devmem` = the GPU's
//    memory in MiB and `devcore` = 100 (no scaling: MIG is a hard partition), `mode` = "mig";
//  - a GPU that matches no entry, whose driver lists no profile, or none of whose allowlisted
//    profiles resolve, is left out with a warning; one whose MIG mode is still pending (a reset
//    is required) is registered unhealthy, with a warning naming the reason.
//
// Thread safety: pure functions.
#pragma once

#include <map>
#include <set>
#include <string>
#include <vector>

#include "device/config.h"
#include "device/node_config.h"
#include "deviceplugin/discovery.h"
#include "deviceplugin/gpu_driver.h"
#include "deviceplugin/mig_driver.h"

namespace hami::deviceplugin {

// What the plugin learned of one GPU through the MIG driver.
struct MigGpuFacts {
  std::vector<MigProfileSpec> profiles;  // empty with `error` set when they could not be read
  std::string error;
  std::string not_ready;  // non-empty: MIG mode is not usable yet, and why
  std::vector<device::MigPlacement> blocked;  // held by MIG devices no owner holds
};

// The allowlist entry for a GPU named `gpu_name`; null when none matches.
const device::MigAllowlistEntry* MatchMigAllowlist(
    const std::vector<device::MigAllowlistEntry>& allowlist, const std::string& gpu_name);

// The driver profile an allowlist name stands for: the one of exactly that name, else the one
// of the same slice count and variant ("+me" etc.) whose size in GB is within 1 of the name's
// (the chart's "7g.79gb" is the A100-80GB's "7g.80gb"); null when none.
const MigProfileSpec* ResolveMigProfile(const std::string& allowed,
                                        const std::vector<MigProfileSpec>& profiles);

Registration BuildMigRegistration(const Inventory& inventory, const device::NodeDeviceSettings& s,
                                  const std::vector<device::MigAllowlistEntry>& allowlist,
                                  const std::map<std::string, MigGpuFacts>& facts,
                                  const std::set<std::string>& unhealthy);

}  // namespace hami::deviceplugin
