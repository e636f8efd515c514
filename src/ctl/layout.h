// Where hamictl finds its companions. A build tree and an installation share one layout:
//   <prefix>/bin/hamictl, <prefix>/bin/vgpu_probe, <prefix>/lib/libvgpu.so,
//   <prefix>/sim/libcuda.so.1 and libnvidia-ml.so.1 (the simulated driver).
//
// Thread safety: pure apart from reading /proc/self/exe.
#pragma once

#include <string>

namespace hami::ctl {

struct Layout {
  std::string hamictl;  // the hamictl executable
  std::string bin_dir;
  std::string lib;  // libvgpu.so
  std::string sim_dir;
  std::string probe;  // vgpu_probe
};

// The layout around the running executable (/proc/self/exe). False with a reason if the
// executable's path cannot be read.
bool SelfLayout(Layout* layout, std::string* error);

// The layout of the build tree at `prefix`; `hamictl` stays the running executable's path.
Layout LayoutAt(const std::string& prefix, const std::string& hamictl);

}  // namespace hami::ctl
