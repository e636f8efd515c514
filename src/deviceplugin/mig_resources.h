// Static MIG: which kubelet resources a node's existing MIG devices are offered under, and what a
// container allocated some of them is told. Pure functions over the driver's Inventory; the
// plugin never creates or destroys MIG instances here (that is dynamic MIG, a separate mode).
// The registrar (registrar.h) keeps the plan current and WholeDeviceBackend
// (whole_device_backend.h) serves it.
//
// Strategies (flag --mig-strategy, node config `migstrategy`), named as NVIDIA's device plugin
// names them so that pod specs carry over:
//   none   - MIG devices are not offered.
//   mixed  - each MIG device whose compute instance spans its whole GPU instance is offered
//            under "nvidia.com/mig-<profile>" with '+' written '.', e.g. nvidia.com/mig-1g.10gb,
//            nvidia.com/mig-1g.10gb.me; one resource (and one plugin socket) per profile.
//   single - every MIG device is offered as "nvidia.com/gpu"; every GPU must have MIG enabled
//            and instances of one identical profile, else the plan is an error.
// MIG-enabled GPUs are never shared as whole vGPUs, whatever the strategy (discovery.h).
//
//   Result<MigPlan> plan = PlanMigResources(inventory, MigStrategy::kMixed);
//   for (const MigResource& r : plan->resources) Serve(r.resource, r.socket, r.device_ids);
//
// Thread safety: stateless functions; callable from any thread.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"
#include "deviceplugin/allocation.h"
#include "deviceplugin/gpu_driver.h"

namespace hami::deviceplugin {

enum class MigStrategy { kNone, kSingle, kMixed };

// "none", "single" or "mixed"; InvalidArgument naming the value otherwise.
Result<MigStrategy> ParseMigStrategy(std::string_view text);

// The profile name NVIDIA's tools give `mig` on a GPU of `gpu_memory_bytes` total memory:
// "<g>g.<GB>gb", with "+me" for media extensions, when the compute instance spans the GPU
// instance, else "<c>c.<g>g.<GB>gb". GB is the instance's share of the GPU in eighths, rounded
// up, times the GPU's memory in whole GiB (rounded up), rounded to the nearest integer; so an
// A100-80GB's 9728 MiB instance is "1g.10gb". With the GPU's memory unknown (0): the
// instance's own MiB rounded to GiB.
std::string MigProfileName(const MigDeviceInfo& mig, uint64_t gpu_memory_bytes);

// "nvidia.com/mig-" + profile with '+' written '.'.
std::string MigResourceName(std::string_view profile);

// The plugin socket's file name for `resource`, as NVIDIA's plugin names it:
// "nvidia.com/mig-1g.10gb" -> "nvidia-mig-1g.10gb.sock".
std::string MigSocketName(std::string_view resource);

// One resource to serve: its kubelet name, the plugin socket's file name (in the kubelet's
// device-plugin directory) and the MIG UUIDs it offers, in inventory order.
struct MigResource {
  std::string resource;  // "nvidia.com/mig-1g.10gb" or "nvidia.com/gpu"
  std::string socket;    // "nvidia-mig-1g.10gb.sock" or "nvidia-gpu.sock"
  std::vector<std::string> device_ids;
  friend bool operator==(const MigResource&, const MigResource&) = default;
};

struct MigPlan {
  std::vector<MigResource> resources;  // sorted by resource name
  // Devices left out, one line each (mixed: a compute instance smaller than its GPU instance, a
  // GPU whose MIG devices the driver could not list).
  std::vector<std::string> warnings;
};

// The resources `strategy` offers for `inv`. kNone: an empty plan. kSingle: FailedPrecondition
// when some GPU has MIG disabled while another has it enabled, when a MIG-enabled GPU has no
// MIG device or its MIG devices could not be listed, or when the MIG devices are not all of one
// profile; an empty plan when no GPU has MIG enabled.
Result<MigPlan> PlanMigResources(const Inventory& inv, MigStrategy strategy);

// What a container allocated `ids` of `resource` is given: the MIG UUIDs (or, for whole GPUs,
// the GPU UUIDs) through the device list strategies of `settings` (RuntimeDeviceList, keyed by
// the first ID), nothing else (no libvgpu: the device is not shared). InvalidArgument when `ids`
// is empty, repeats an ID or names a device `resource` does not offer (kubelet passes back only
// IDs the plugin listed, so that is a stale or foreign request).
Result<ContainerAllocation> MigAllocation(const MigResource& resource,
                                          const std::vector<std::string>& ids,
                                          const AllocationSettings& settings);

}  // namespace hami::deviceplugin
