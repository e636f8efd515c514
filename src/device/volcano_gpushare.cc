#include "device/volcano_gpushare.h"

#include <algorithm>
#include <limits>
#include <optional>
#include <set>

#include "device/oldest_candidates.h"
#include "device/resource_quantity.h"
#include "device/text_util.h"
#include "device/volcano_vgpu.h"

namespace hami::device {

namespace {

constexpr size_t kMaxReasons = 4;  // reasons listed in a NotFound message before "and N more"

std::string Annotation(const VolcanoPod& pod, std::string_view key) {
  auto it = pod.annotations.find(key);
  return it == pod.annotations.end() ? std::string() : it->second;
}

bool HasLimit(const std::vector<ContainerResources>& cs, std::string_view resource) {
  return std::any_of(cs.begin(), cs.end(), [&](const ContainerResources& c) {
    return c.limits.find(std::string(resource)) != c.limits.end();
  });
}

// A container with a limit of the resource, in kubelet's order (init containers first).
struct Requesting {
  bool init = false;
  size_t container = 0;
  int64_t limit = 0;
};

Result<std::vector<Requesting>> RequestingContainers(const VolcanoPod& pod,
                                                     std::string_view resource) {
  std::vector<Requesting> out;
  for (bool init : {true, false}) {
    const auto& cs = init ? pod.resources.init_containers : pod.resources.containers;
    for (size_t i = 0; i < cs.size(); ++i) {
      auto it = cs[i].limits.find(std::string(resource));
      if (it == cs[i].limits.end()) continue;
      Result<int64_t> v = ParseIntegerQuantity(it->second);
      if (!v.ok() || *v < 0 || *v > std::numeric_limits<int32_t>::max()) {
        return InvalidArgumentError(std::string(init ? "init container " : "container ") +
                                    text::Quote(cs[i].name) + ": limit " + std::string(resource) +
                                    " " + text::Quote(it->second) + " is not a whole number");
      }
      if (*v > 0) out.push_back({init, i, *v});
    }
  }
  return out;
}

// The count of the pod's requesting containers already served (hami-cpp's annotation).
Result<size_t> ServedCount(const VolcanoPod& pod, size_t requesting) {
  const std::string text = Annotation(pod, kVolcanoGpuContainersServedAnnotation);
  if (text.empty()) return size_t{0};
  std::optional<uint64_t> served = ParseVolcanoTime(text);  // decimal digits, as Go reads them
  if (!served || *served > requesting) {
    return InvalidArgumentError(std::string(kVolcanoGpuContainersServedAnnotation) + " " +
                                text::Quote(text) + " is not a count of its " +
                                std::to_string(requesting) + " requesting container(s)");
  }
  return static_cast<size_t>(*served);
}

// GPU number: `next`'s part of the pod's GPUs. Init containers take the start of the list, app
// containers consecutive slices in spec order.
Status SliceOfTheGpus(const std::vector<Requesting>& requesting, const Requesting& next,
                      const std::vector<uint32_t>& gpus, std::vector<uint32_t>* out) {
  int64_t app_total = 0, offset = 0, init_max = 0;
  for (const Requesting& r : requesting) {
    if (r.init) {
      init_max = std::max(init_max, r.limit);
      continue;
    }
    if (!next.init && r.container < next.container) offset += r.limit;
    app_total += r.limit;
  }
  const int64_t needed = std::max(app_total, init_max);
  if (static_cast<int64_t>(gpus.size()) != needed) {
    return InvalidArgumentError("names " + std::to_string(gpus.size()) +
                                " GPU(s) but the pod asks for " + std::to_string(needed));
  }
  if (next.init) offset = 0;
  out->assign(gpus.begin() + offset, gpus.begin() + offset + next.limit);
  return OkStatus();
}

// The outcome of steps 2 and the mode's checks for one bound, pending, unassigned pod.
struct Next {
  bool drops_out = false;  // NotFound: not the pod kubelet asks for (why in `status`)
  Status status;           // InvalidArgument: defective
  VolcanoSharePick pick;
};

Next NextContainer(const VolcanoPod& pod, VolcanoShareMode mode, size_t request_count) {
  Next n;
  const std::string_view resource = VolcanoShareResource(mode);
  Result<std::vector<Requesting>> requesting = RequestingContainers(pod, resource);
  if (!requesting.ok()) {
    n.status = requesting.status();
    return n;
  }
  if (requesting->empty()) {
    n.drops_out = true;
    n.status = NotFoundError("no container asks for more than 0 " + std::string(resource));
    return n;
  }
  Result<size_t> served = ServedCount(pod, requesting->size());
  if (!served.ok()) {
    n.status = served.status();
    return n;
  }
  if (*served == requesting->size()) {
    n.drops_out = true;
    n.status = NotFoundError("every container is served already");
    return n;
  }
  const Requesting& next = (*requesting)[*served];
  const auto& cs = next.init ? pod.resources.init_containers : pod.resources.containers;
  const std::string name = text::Quote(cs[next.container].name);
  if (request_count != static_cast<size_t>(next.limit)) {
    n.drops_out = true;
    n.status = NotFoundError("its next container " + name + " asks for " +
                             std::to_string(next.limit) + " " + std::string(resource) + ", not " +
                             std::to_string(request_count));
    return n;
  }
  const std::string index_text = Annotation(pod, kVolcanoGpuIndexAnnotation);
  if (index_text.empty()) {
    n.status = InvalidArgumentError(
        "no " + std::string(kVolcanoGpuIndexAnnotation) +
        ": Volcano's scheduler did not assign it GPUs (is deviceshare." +
        (mode == VolcanoShareMode::kMemory ? "GPUSharingEnable" : "GPUNumberEnable") +
        " on, with the predicates plugin in the tiers?)");
    return n;
  }
  Result<std::vector<uint32_t>> gpus = ParseVolcanoGpuIndices(index_text);
  if (!gpus.ok()) {
    n.status = gpus.status().WithContext(kVolcanoGpuIndexAnnotation);
    return n;
  }
  VolcanoSharePick& p = n.pick;
  p.init = next.init;
  p.container = next.container;
  p.request = next.limit;
  p.served = *served;
  p.last = *served + 1 == requesting->size();
  if (mode == VolcanoShareMode::kMemory) {
    if (gpus->size() != 1) {
      n.status = InvalidArgumentError(std::string(kVolcanoGpuIndexAnnotation) + " " +
                                      text::Quote(index_text) +
                                      " names several GPUs; GPU sharing places a pod on one");
      return n;
    }
    p.gpus = *gpus;
    return n;
  }
  n.status = SliceOfTheGpus(*requesting, next, *gpus, &p.gpus)
                 .WithContext(std::string(kVolcanoGpuIndexAnnotation) + " " +
                              text::Quote(index_text));
  return n;
}

// Why step 1 passes `pod` over; empty for a candidate. `*unrelated`: nothing worth saying.
std::string Unfit(const VolcanoPod& pod, std::string_view node, std::string_view resource,
                  bool* unrelated) {
  *unrelated = pod.node_name != node ||
               !(HasLimit(pod.resources.containers, resource) ||
                 HasLimit(pod.resources.init_containers, resource));
  if (*unrelated) return "";
  if (pod.deleting) return "being deleted";
  if (pod.phase != "Pending") return "phase " + text::Quote(pod.phase) + ", not Pending";
  if (Annotation(pod, kVolcanoGpuAssignedAnnotation) == "true") {
    return std::string(kVolcanoGpuAssignedAnnotation) + " is \"true\"";
  }
  if (auto f = pod.annotations.find(kVolcanoGpuAllocationFailedAnnotation);
      f != pod.annotations.end()) {
    return "its allocation failed before (" + f->second + ")";
  }
  return "";
}

struct Candidate {
  size_t index = 0;
  uint64_t time = 0;
  Next next;
};

}  // namespace

std::string_view VolcanoShareResource(VolcanoShareMode mode) {
  return mode == VolcanoShareMode::kMemory ? kVolcanoGpuMemoryResource
                                           : kVolcanoGpuNumberResource;
}

Result<std::vector<uint32_t>> ParseVolcanoGpuIndices(std::string_view text) {
  std::vector<uint32_t> out;
  std::set<uint32_t> seen;
  size_t at = 0;
  for (;;) {
    const size_t comma = text.find(',', at);
    const std::string_view part =
        text.substr(at, comma == std::string_view::npos ? std::string_view::npos : comma - at);
    std::optional<uint64_t> v = ParseVolcanoTime(part);
    if (!v || *v > 1023) {
      return InvalidArgumentError(text::Quote(text) + ": " + text::Quote(part) +
                                  " is not a GPU index");
    }
    if (!seen.insert(static_cast<uint32_t>(*v)).second) {
      return InvalidArgumentError(text::Quote(text) + ": GPU " + std::string(part) +
                                  " is named twice");
    }
    out.push_back(static_cast<uint32_t>(*v));
    if (comma == std::string_view::npos) return out;
    at = comma + 1;
  }
}

std::string EncodeVolcanoGpuIndices(const std::vector<uint32_t>& indices) {
  std::string out;
  for (uint32_t i : indices) out += (out.empty() ? "" : ",") + std::to_string(i);
  return out;
}

Result<VolcanoSharePick> SelectVolcanoSharePod(std::span<const VolcanoPod> pods,
                                               std::string_view node, VolcanoShareMode mode,
                                               size_t request_count, size_t* defective) {
  const std::string_view resource = VolcanoShareResource(mode);
  const std::string wanted = "an allocation of " + std::to_string(request_count) + " " +
                             std::string(resource) + " on node " + text::Quote(node);
  if (request_count == 0) {
    return InvalidArgumentError("kubelet asked for " + wanted + ": no device IDs in the request");
  }
  if (node.empty()) return InvalidArgumentError("no node name to select pods for");
  std::vector<std::string> reasons;
  std::vector<Candidate> candidates;
  for (size_t i = 0; i < pods.size(); ++i) {
    const VolcanoPod& pod = pods[i];
    bool unrelated = false;
    std::string why = Unfit(pod, node, resource, &unrelated);
    if (unrelated) continue;
    if (!why.empty()) {
      reasons.push_back(pod.Key() + ": " + why);
      continue;
    }
    Next next = NextContainer(pod, mode, request_count);
    if (next.drops_out) {
      reasons.push_back(pod.Key() + ": " + next.status.message());
      continue;
    }
    const uint64_t time =
        ParseVolcanoTime(Annotation(pod, kVolcanoPredicateTimeAnnotation)).value_or(UINT64_MAX);
    candidates.push_back({i, time, std::move(next)});
  }
  if (candidates.empty()) {
    std::string list;
    for (size_t i = 0; i < reasons.size() && i < kMaxReasons; ++i) {
      list += (i == 0 ? ": " : "; ") + reasons[i];
    }
    if (reasons.size() > kMaxReasons) {
      list += "; and " + std::to_string(reasons.size() - kMaxReasons) + " more";
    }
    return NotFoundError("no pod waits for " + wanted + list);
  }
  const std::vector<const Candidate*> winners = OldestCandidates(candidates);
  const uint64_t oldest = winners.front()->time;
  if (winners.size() > 1) {
    std::string list;
    for (const Candidate* w : winners) list += (list.empty() ? "" : ", ") + pods[w->index].Key();
    return FailedPreconditionError(
        "cannot tell which pod kubelet is admitting for " + wanted + ": " + list +
        " were all placed " +
        (oldest == UINT64_MAX ? "without a readable " + std::string(kVolcanoPredicateTimeAnnotation)
                              : "at " + std::string(kVolcanoPredicateTimeAnnotation) + " " +
                                    std::to_string(oldest)));
  }
  const Candidate& winner = *winners.front();
  if (!winner.next.status.ok()) {
    if (defective != nullptr) *defective = winner.index;
    return winner.next.status.WithContext("pod " + pods[winner.index].Key());
  }
  VolcanoSharePick pick = winner.next.pick;
  pick.pod = winner.index;
  return pick;
}

}  // namespace hami::device
