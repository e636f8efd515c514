// Renders a placement Decision as a short, stable text trace for logs, events and
// `hamictl explain`:
//
//   pod default/train (uid-1): placed on node-a (score 13.75)
//   policy: node=binpack (global default), gpu=binpack (pod annotation), weights
//   slot=1,core=1,memory=1 node-a: fit, score 13.75
//     container 0 GPU-a [0] score 5.50 chosen
//     container 0 GPU-b [1] CardInsufficientMemory
//   node-b: 1/4 CardInsufficientMemory, 3/4 CardNotHealth
//
// Device lines appear when the decision was made with TraceLevel::kDevices.
//
// Thread safety: pure function; the ledger must be the one the decision was made on, unchanged.
#pragma once

#include <string>

#include "scheduler/ledger.h"
#include "scheduler/placement.h"

namespace hami::scheduler {

std::string RenderExplain(const Ledger& ledger, const PodSpec& pod, const Decision& decision);

}  // namespace hami::scheduler
