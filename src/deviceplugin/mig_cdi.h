// MigCdiSpecs: one CDI spec file per MIG device made at Allocate (dynamic MIG with a CDI device
// list strategy), so that a container runtime resolving CDI names finds
// `nvidia.com/gpu=MIG-<uuid>` although the device did not exist when the NVIDIA toolkit generated
// its own spec (upstream's defect B8: `unresolvable CDI devices`).
//
// Contract with the runtime: `<dir>/hami-mig-<MIG UUID>.json` (CDI 0.5.0, kind nvidia.com/gpu)
// defines the one device `MIG-<uuid>`; its edits are the parent GPU's device node
// (/dev/nvidia<minor>) and, when the kernel lists them, the MIG capability nodes of its GPU and
// compute instance (/dev/nvidia-caps/nvidia-cap<n>, from /proc/driver/nvidia-caps/mig-minors).
// The spec-wide edits (driver libraries, hooks, /dev/nvidiactl) are copied from the toolkit's
// generated spec for kind nvidia.com/gpu when one is found, so the device is usable on its own;
// without one they are /dev/nvidiactl and the UVM nodes, and the driver's libraries must come
// from the runtime's own hook.
//
// Sync() makes the directory agree with the MIG devices the plugin holds: a spec is written
// (atomically) for each device before Allocate answers, and removed when the device is
// destroyed; stale `hami-mig-*.json` files (a device destroyed while the plugin was down) go at
// the first Sync. Files other than `hami-mig-*.json` are never touched.
//
// Thread safety: Sync may be called from any thread; calls are serialised.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"
#include "common/thread_annotations.h"
#include "deviceplugin/gpu_driver.h"
#include "deviceplugin/mig_instances.h"

namespace hami::deviceplugin {

// What a spec needs to know of the node.
struct MigCdiNode {
  std::map<std::string, uint32_t> gpu_minor;  // GPU UUID -> minor of /dev/nvidia<minor>
  // mig-minors entries: "gpu0/gi1/access" and "gpu0/gi1/ci0/access" -> capability minor
  std::map<std::string, uint32_t> caps_minor;
  // The spec-wide containerEdits of the toolkit's spec, as JSON text; "" when none was found.
  std::string common_edits;
};

// The parsed lines of /proc/driver/nvidia-caps/mig-minors ("gpu0/gi1/access 12"); malformed
// lines are skipped.
std::map<std::string, uint32_t> ParseMigMinors(std::string_view text);

// The spec-wide containerEdits (JSON text) of a CDI spec in YAML or JSON. NotFound when the spec
// is of another kind than nvidia.com/gpu or has none; InvalidArgument when it cannot be read.
Result<std::string> CdiCommonEdits(std::string_view spec_text);

// The spec file's text for one MIG device. FailedPrecondition when its GPU's minor is unknown.
Result<std::string> MigCdiSpec(const MigInstance& instance, const MigCdiNode& node);

// "hami-mig-<MIG UUID>.json".
std::string MigCdiSpecFileName(const std::string& mig_uuid);

struct MigCdiOptions {
  std::string spec_dir = "/var/run/cdi";  // where the specs are written
  // The toolkit's generated specs, first found wins.
  std::vector<std::string> toolkit_specs = {"/etc/cdi/nvidia.yaml", "/etc/cdi/nvidia.json",
                                            "/var/run/cdi/nvidia.yaml",
                                            "/var/run/cdi/nvidia.json"};
  std::string mig_minors = "/proc/driver/nvidia-caps/mig-minors";
};

class MigCdiSpecs {
 public:
  // `driver` (must outlive this) is asked for the GPUs' minors the first time a GPU is seen. No
  // file is read or written before the first Sync.
  MigCdiSpecs(GpuDriver& driver, MigCdiOptions options);
  MigCdiSpecs(const MigCdiSpecs&) = delete;
  MigCdiSpecs& operator=(const MigCdiSpecs&) = delete;

  // Writes the specs `instances` lack and removes those of devices not among them (the first
  // call also sweeps the directory of specs left by devices gone while no plugin ran). Errors
  // are logged (a container of that device then fails with the runtime's message) and returned.
  Status Sync(const std::vector<MigInstance>& instances);

 private:
  void ReadNode() REQUIRES(mu_);

  GpuDriver& driver_;
  const MigCdiOptions options_;
  Mutex mu_;
  bool node_read_ GUARDED_BY(mu_) = false;
  MigCdiNode node_ GUARDED_BY(mu_);
  std::set<std::string> written_ GUARDED_BY(mu_);  // MIG UUIDs whose spec this object wrote
};

}  // namespace hami::deviceplugin
