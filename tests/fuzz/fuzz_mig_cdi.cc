// Fuzzes what the device plugin reads to write a MIG device's CDI spec: the NVIDIA toolkit's
// spec file (YAML or JSON, whose spec-wide edits are copied) and the kernel's mig-minors list.
// Neither may crash the plugin; edits that are read must give a spec that is valid JSON naming
// the device.
#include <stddef.h>
#include <stdint.h>

#include <nlohmann/json.hpp>
#include <string>

#include "deviceplugin/mig_cdi.h"

using namespace hami::deviceplugin;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string text(reinterpret_cast<const char*>(data), size);
  MigCdiNode node;
  node.gpu_minor["GPU-0"] = 0;
  node.caps_minor = ParseMigMinors(text);
  hami::Result<std::string> edits = CdiCommonEdits(text);
  if (edits.ok()) node.common_edits = *edits;
  MigInstance inst;
  inst.gpu_uuid = "GPU-0";
  inst.device = {"MIG-x", 1, 0};
  hami::Result<std::string> spec = MigCdiSpec(inst, node);
  if (!spec.ok()) __builtin_trap();
  nlohmann::json parsed = nlohmann::json::parse(*spec, nullptr, false);
  if (!parsed.is_object() || parsed["devices"][0]["name"] != "MIG-x") __builtin_trap();
  return 0;
}
