// Scheduling policies: how nodes are ranked (node level) and how a node's devices are ordered and
// chosen (GPU level), and where each comes from.
//
// Node level (`hami.io/node-scheduler-policy`): `binpack` prefers the node with the highest usage
// score after placing the pod, `spread` the lowest. Any other value acts as binpack (upstream).
//
// GPU level (`hami.io/gpu-scheduler-policy`): a comma chain of keys, applied in the written order
// as sort keys on the candidate devices (the first device in the order is the first chosen):
//   binpack     device score descending (fill used devices first)
//   spread      device score ascending (least used first; the default)
//   numa        NUMA node ascending (upstream's chain key)
//   best-fit    memory left after placing the request ascending (tightest fit first)
//   idle-first  devices with no task first
// and modifiers that change which devices are eligible or how a set is chosen:
//   mutex           only devices with no task may be used (and idle ones are preferred)
//   topology-aware  (alias `topology`) multi-device requests take the set with the best
//                   NVLink/PCIe pair scores; a single device leaves well-connected GPUs free
//   numa-first      a multi-device request is placed within one NUMA node when any can hold it,
//                   across NUMA nodes otherwise (a soft `nvidia.com/numa-bind`)
// Ties are broken by NUMA node, then device index, ascending. Unknown keys are dropped (reported in
// `ignored`); a chain left without sort keys orders by spread. Device scores include the request
// being placed (a deliberate difference from upstream, docs/compatibility.md).
//
// Precedence: pod annotation > node annotation > global default, for each level independently.
//
// Thread safety: pure functions and plain values.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace hami::scheduler {

inline constexpr std::string_view kNodeSchedulerPolicyAnnotation = "hami.io/node-scheduler-policy";
inline constexpr std::string_view kGpuSchedulerPolicyAnnotation = "hami.io/gpu-scheduler-policy";

enum class NodePolicy : uint8_t { kBinpack, kSpread };
std::string_view NodePolicyName(NodePolicy p);
// "spread" (case-insensitive, trimmed) is spread; anything non-empty else is binpack. Empty or
// blank: nullopt-like false return.
bool ParseNodePolicy(std::string_view text, NodePolicy* out);

enum class DeviceSortKey : uint8_t { kBinpack, kSpread, kNuma, kBestFit, kIdleFirst };
std::string_view DeviceSortKeyName(DeviceSortKey k);

struct GpuPolicy {
  static constexpr size_t kMaxKeys = 5;
  std::array<DeviceSortKey, kMaxKeys> keys{};
  uint8_t key_count = 0;
  bool mutex = false;
  bool topology = false;
  bool numa_first = false;
  std::vector<std::string> ignored;  // unknown tokens, for the explain trace

  // The spread default.
  static GpuPolicy Default();
  // Canonical text, e.g. "binpack,numa,mutex".
  std::string ToString() const;
  bool HasKeys() const { return key_count > 0 || mutex || topology || numa_first; }
};

// Parses a chain. Returns false (and leaves `out` with the ignored tokens) when no token is known,
// so the caller falls back to the next level of precedence.
bool ParseGpuPolicy(std::string_view text, GpuPolicy* out);

enum class PolicySource : uint8_t { kGlobal, kNode, kPod };
std::string_view PolicySourceName(PolicySource s);

}  // namespace hami::scheduler
