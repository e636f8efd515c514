// Device visibility, emulating the container runtime and the CUDA driver.
//
//   NVIDIA_VISIBLE_DEVICES (what the container runtime would expose; applies to CUDA and NVML):
//     unset, "", "all" or "void" -> every device; "none" -> no device; otherwise a comma list of
//     physical indices and/or full UUIDs. Unknown entries are skipped with a warning.
//   CUDA_VISIBLE_DEVICES (CUDA only, applied on top): unset -> all of the above; otherwise a
//     comma list of ordinals (positions in the NVIDIA-visible list) and/or UUIDs or unique UUID
//     prefixes ("GPU-5a3c"), in the order given. Like the real driver, parsing stops at the first
//     invalid, ambiguous or repeated entry ("-1" therefore hides everything; "" too).
//
// Thread safety: pure functions.
#pragma once

#include <string>
#include <vector>

namespace hami::sim {

// Physical indices visible under NVIDIA_VISIBLE_DEVICES=`env` (nullptr = unset). `uuids[i]` is
// the UUID of physical device i. Problems are appended to *warnings.
std::vector<int> ResolveNvidiaVisible(const char* env, const std::vector<std::string>& uuids,
                                      std::vector<std::string>* warnings);

// Physical indices visible to CUDA, in CUDA ordinal order, given the NVIDIA-visible list `base`.
std::vector<int> ResolveCudaVisible(const char* env, const std::vector<int>& base,
                                    const std::vector<std::string>& uuids,
                                    std::vector<std::string>* warnings);

}  // namespace hami::sim
