#include "device/volcano_pod_select.h"

#include <algorithm>
#include <limits>
#include <vector>

#include "device/oldest_candidates.h"
#include "device/resource_quantity.h"
#include "device/text_util.h"

namespace hami::device {

namespace {

// Reasons listed in a NotFound message before "and N more".
constexpr size_t kMaxReasons = 4;

// "1 device", "2 devices"; `plural` defaults to `what` + "s".
std::string Plural(size_t n, const char* what, const char* plural = nullptr) {
  if (n == 1) return "1 " + std::string(what);
  return std::to_string(n) + " " + (plural != nullptr ? plural : std::string(what) + "s");
}

std::string AnnotationOf(const VolcanoPod& pod, std::string_view key) {
  auto it = pod.annotations.find(key);
  return it == pod.annotations.end() ? std::string() : it->second;
}

// The container's limit of `resource`: 0 when absent; an error for text that is not a
// non-negative whole quantity.
Result<int64_t> LimitOf(const ContainerResources& c, const std::string& resource) {
  auto it = c.limits.find(resource);
  if (it == c.limits.end()) return int64_t{0};
  Result<int64_t> v = ParseIntegerQuantity(it->second);
  if (!v.ok() || *v < 0 || *v > std::numeric_limits<int32_t>::max()) {
    return InvalidArgumentError("container " + text::Quote(c.name) + ": limit " + resource + " " +
                                text::Quote(it->second) + " is not a device count");
  }
  return v;
}

// An app container Volcano wrote an entry for, in spec order.
struct Requesting {
  size_t container = 0;
  int64_t count = 0;  // the count limit; 0 for a memory-only container
};

Result<std::vector<Requesting>> RequestingContainers(const VolcanoPod& pod,
                                                     const VolcanoResourceNames& names) {
  for (const ContainerResources& c : pod.resources.init_containers) {
    HAMI_ASSIGN_OR_RETURN(int64_t count, LimitOf(c, names.count));
    if (count > 0) {
      return InvalidArgumentError("init container " + text::Quote(c.name) + " asks for " +
                                  names.count +
                                  ", but Volcano's scheduler assigns devices to app containers "
                                  "only");
    }
  }
  std::vector<Requesting> out;
  for (size_t i = 0; i < pod.resources.containers.size(); ++i) {
    const ContainerResources& c = pod.resources.containers[i];
    HAMI_ASSIGN_OR_RETURN(int64_t count, LimitOf(c, names.count));
    HAMI_ASSIGN_OR_RETURN(int64_t memory, LimitOf(c, names.memory));
    if (count > 0 || memory > 0) out.push_back({i, count});
  }
  return out;
}

// NextVolcanoContainer without the pod's name in the messages.
Result<VolcanoPick> NextContainer(const VolcanoPod& pod, size_t request_count,
                                  const VolcanoResourceNames& names) {
  auto list = pod.annotations.find(kVolcanoDevicesToAllocateAnnotation);
  if (list == pod.annotations.end()) {
    return NotFoundError("no " + std::string(kVolcanoDevicesToAllocateAnnotation) +
                         " annotation: nothing to allocate");
  }
  VolcanoPick pick;
  Result<PodSingleDevice> to_allocate = DecodeVolcanoPodDevices(list->second);
  if (!to_allocate.ok()) {
    return to_allocate.status().WithContext(kVolcanoDevicesToAllocateAnnotation);
  }
  pick.to_allocate = std::move(to_allocate).value();
  HAMI_ASSIGN_OR_RETURN(std::vector<Requesting> requesting, RequestingContainers(pod, names));
  if (pick.to_allocate.size() != requesting.size()) {
    return InvalidArgumentError(
        std::string(kVolcanoDevicesToAllocateAnnotation) + " has " +
        Plural(pick.to_allocate.size(), "entry", "entries") + " but the pod has " +
        Plural(requesting.size(), "app container") + " with a " + names.count + " or " +
        names.memory + " limit");
  }
  const Requesting* next = nullptr;
  for (size_t k = 0; k < requesting.size(); ++k) {
    if (requesting[k].count > 0 && !pick.to_allocate[k].empty()) {
      next = &requesting[k];
      pick.entry = k;
      break;
    }
  }
  if (next == nullptr) return NotFoundError("every container is served already");
  pick.container = next->container;
  pick.devices = pick.to_allocate[pick.entry];
  const std::string& name = pod.resources.containers[next->container].name;
  if (pick.devices.size() != static_cast<size_t>(next->count)) {
    return InvalidArgumentError(std::string(kVolcanoDevicesToAllocateAnnotation) + " entry " +
                                std::to_string(pick.entry) + " lists " +
                                Plural(pick.devices.size(), "device") + " but container " +
                                text::Quote(name) + " asks for " + std::to_string(next->count));
  }
  if (request_count != 0 && request_count != static_cast<size_t>(next->count)) {
    return NotFoundError("its next container " + text::Quote(name) + " asks for " +
                         Plural(static_cast<size_t>(next->count), "device") + ", not " +
                         std::to_string(request_count));
  }
  pick.last = true;
  for (size_t k = 0; k < pick.to_allocate.size(); ++k) {
    if (k == pick.entry || pick.to_allocate[k].empty()) continue;
    if (requesting[k].count > 0) {
      pick.last = false;
    } else {
      pick.memory_only.push_back(requesting[k].container);
    }
  }
  return pick;
}

bool AsksForCount(const VolcanoPod& pod, const VolcanoResourceNames& names) {
  auto has = [&](const std::vector<ContainerResources>& cs) {
    return std::any_of(cs.begin(), cs.end(), [&](const ContainerResources& c) {
      return c.limits.find(names.count) != c.limits.end();
    });
  };
  return has(pod.resources.init_containers) || has(pod.resources.containers);
}

// Why step 1 passes `pod` over; empty when it is a candidate or unrelated to this node's vGPUs
// (then nothing is worth saying about it).
std::string Unfit(const VolcanoPod& pod, std::string_view node,
                  const VolcanoResourceNames& names, bool* unrelated) {
  *unrelated = false;
  const std::string assigned = AnnotationOf(pod, kVolcanoVgpuNodeAnnotation);
  const bool bound_here = pod.node_name == node;
  if (!bound_here && assigned != node) {
    *unrelated = true;
    return "";
  }
  if (assigned != node) {
    if (!assigned.empty()) {
      return "Volcano assigned it to node " + text::Quote(assigned) + " but it is bound here";
    }
    if (pod.phase == "Pending" && !pod.deleting && AsksForCount(pod, names)) {
      return "it asks for " + names.count + " but has no " +
             std::string(kVolcanoVgpuNodeAnnotation) +
             " (not placed by Volcano's deviceshare plugin in vGPU mode?)";
    }
    *unrelated = true;
    return "";
  }
  if (!bound_here) {
    return pod.node_name.empty() ? "not bound to a node yet"
                                 : "bound to node " + text::Quote(pod.node_name);
  }
  if (pod.deleting) return "being deleted";
  if (pod.phase != "Pending") return "phase " + text::Quote(pod.phase) + ", not Pending";
  auto phase = pod.annotations.find(kVolcanoBindPhaseAnnotation);
  if (phase == pod.annotations.end()) {
    return "no " + std::string(kVolcanoBindPhaseAnnotation) + " annotation";
  }
  if (phase->second != kVolcanoBindPhaseAllocating) {
    return std::string(kVolcanoBindPhaseAnnotation) + " is " + text::Quote(phase->second);
  }
  return "";
}

struct Candidate {
  size_t index = 0;
  uint64_t time = 0;
  Result<VolcanoPick> pick;
};

// Why a pod of the node was passed over; pods still Pending come first in a message, as the
// likeliest to be the one kubelet is admitting.
struct Reason {
  bool pending = false;
  std::string text;
};

std::string JoinReasons(std::vector<Reason> reasons) {
  std::stable_partition(reasons.begin(), reasons.end(), [](const Reason& r) { return r.pending; });
  std::string out;
  for (size_t i = 0; i < reasons.size() && i < kMaxReasons; ++i) {
    out += (i == 0 ? ": " : "; ") + reasons[i].text;
  }
  if (reasons.size() > kMaxReasons) {
    out += "; and " + std::to_string(reasons.size() - kMaxReasons) + " more";
  }
  return out;
}

}  // namespace

Result<VolcanoPick> NextVolcanoContainer(const VolcanoPod& pod, size_t request_count,
                                         const VolcanoResourceNames& names) {
  Result<VolcanoPick> pick = NextContainer(pod, request_count, names);
  if (!pick.ok()) return pick.status().WithContext("pod " + pod.Key());
  return pick;
}

Result<VolcanoPick> SelectVolcanoPod(std::span<const VolcanoPod> pods, std::string_view node,
                                     size_t request_count, const VolcanoResourceNames& names,
                                     size_t* defective) {
  const std::string wanted = "a " + names.count + " allocation of " +
                             Plural(request_count, "device") + " on node " + text::Quote(node);
  if (request_count == 0) {
    return InvalidArgumentError("kubelet asked for " + wanted + ": no device IDs in the request");
  }
  if (node.empty()) return InvalidArgumentError("no node name to select pods for");
  std::vector<Reason> reasons;
  std::vector<Candidate> candidates;
  for (size_t i = 0; i < pods.size(); ++i) {
    const VolcanoPod& pod = pods[i];
    bool unrelated = false;
    std::string why = Unfit(pod, node, names, &unrelated);
    if (unrelated) continue;
    const bool pending = pod.phase == "Pending" && !pod.deleting;
    if (!why.empty()) {
      reasons.push_back({pending, pod.Key() + ": " + why});
      continue;
    }
    Result<VolcanoPick> pick = NextContainer(pod, request_count, names);
    if (!pick.ok() && pick.status().code() == StatusCode::kNotFound) {
      reasons.push_back({pending, pod.Key() + ": " + pick.status().message()});
      continue;
    }
    const uint64_t time =
        ParseVolcanoTime(AnnotationOf(pod, kVolcanoVgpuTimeAnnotation)).value_or(UINT64_MAX);
    candidates.push_back({i, time, std::move(pick)});
  }
  if (candidates.empty()) {
    return NotFoundError("no pod waits for " + wanted + JoinReasons(std::move(reasons)));
  }
  const std::vector<const Candidate*> winners = OldestCandidates(candidates);
  const uint64_t oldest = winners.front()->time;
  if (winners.size() > 1) {
    std::string names_list;
    for (size_t k = 0; k < winners.size(); ++k) {
      names_list += (k == 0 ? "" : ", ") + pods[winners[k]->index].Key();
    }
    const std::string when = oldest == UINT64_MAX
                                 ? "without a readable " + std::string(kVolcanoVgpuTimeAnnotation)
                                 : "at " + std::string(kVolcanoVgpuTimeAnnotation) + " " +
                                       FormatVolcanoTime(oldest);
    return FailedPreconditionError(
        "cannot tell which pod kubelet is admitting for " + wanted + ": " + names_list +
        " were all scheduled " + when +
        " (deviceshare.NodeLockEnable lets Volcano place one vGPU pod per node at a time)");
  }
  const Candidate& winner = *winners.front();
  if (!winner.pick.ok()) {
    if (defective != nullptr) *defective = winner.index;
    return winner.pick.status().WithContext("pod " + pods[winner.index].Key());
  }
  VolcanoPick pick = *winner.pick;
  pick.pod = winner.index;
  return pick;
}

std::string VolcanoToAllocateAfter(const VolcanoPick& pick) {
  PodSingleDevice after = pick.to_allocate;
  if (pick.entry < after.size()) after[pick.entry].clear();
  return EncodeVolcanoPodDevices(after);
}

}  // namespace hami::device
