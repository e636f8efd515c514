// `hamictl demo`: the README's main job. On a fresh simulated node (two 80 GB A100s, state in a
// temp dir) it runs vgpu_probe under `hamictl run` and shows, step by step, that the quota is what
// a process sees, that allocations stop at it, that two processes share one quota, that the SM
// limiter holds a saturating workload near 30 % and 60 %, and what `hamictl smi` shows inside a
// quota. Every check is computed from what the processes printed.
//
// Thread safety: runs child processes and writes to the given streams; one demo at a time per
// process.
#pragma once

#include <ostream>

#include "ctl/layout.h"

namespace hami::ctl {

// Runs the demo with the artefacts of `layout` (the probe, libvgpu.so, the simulated driver and
// the hamictl binary itself). Returns kExitOk when every check passed, kExitFailure otherwise
// (also when an artefact is missing; the message names it and how to build it).
int RunDemo(const Layout& layout, std::ostream& out, std::ostream& err);

}  // namespace hami::ctl
