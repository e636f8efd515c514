// Fuzzes Volcano's GPU sharing and GPU number pod choice (volcano_gpushare.h): the gpu-index
// codec and SelectVolcanoSharePod. Never crash; an index list that decodes re-encodes to the
// same text; an error always has a message; a pick is one the pods' annotations and limits back.
//
// The whole input goes to the index decoder. For the pod choice it is also cut at '\n' into: the
// gpu-index value, predicate-time, the served count, gpu-assigned, an init container's limit, two
// app containers' limits, a second pod's gpu-index and predicate-time, and the mode and request
// size (first and second byte of the last piece).
#include <stddef.h>
#include <stdint.h>

#include <string>
#include <string_view>
#include <vector>

#include "device/volcano_gpushare.h"

using namespace hami::device;

namespace {

std::vector<std::string> Pieces(std::string_view text, size_t n) {
  std::vector<std::string> out(n);
  size_t i = 0;
  for (char c : text) {
    if (c == '\n' && i + 1 < n) {
      ++i;
    } else {
      out[i] += c;
    }
  }
  return out;
}

void CheckIndices(std::string_view text) {
  hami::Result<std::vector<uint32_t>> gpus = ParseVolcanoGpuIndices(text);
  if (!gpus.ok()) {
    if (gpus.status().message().empty()) __builtin_trap();
    return;
  }
  if (gpus->empty()) __builtin_trap();
  hami::Result<std::vector<uint32_t>> again =
      ParseVolcanoGpuIndices(EncodeVolcanoGpuIndices(*gpus));
  if (!again.ok() || *again != *gpus) __builtin_trap();
}

void CheckSelection(std::string_view text) {
  std::vector<std::string> p = Pieces(text, 10);
  const VolcanoShareMode mode =
      !p[9].empty() && (p[9][0] & 1) ? VolcanoShareMode::kNumber : VolcanoShareMode::kMemory;
  const std::string resource(VolcanoShareResource(mode));
  VolcanoPod a;
  a.name = "a";
  a.ns = "ns";
  a.node_name = "node";
  a.phase = "Pending";
  a.annotations = {{std::string(kVolcanoGpuIndexAnnotation), p[0]},
                   {std::string(kVolcanoPredicateTimeAnnotation), p[1]},
                   {std::string(kVolcanoGpuContainersServedAnnotation), p[2]},
                   {std::string(kVolcanoGpuAssignedAnnotation), p[3]}};
  if (!p[4].empty()) {
    ContainerResources init;
    init.name = "init";
    init.limits[resource] = p[4];
    a.resources.init_containers.push_back(std::move(init));
  }
  for (int k = 0; k < 2; ++k) {
    ContainerResources c;
    c.name = "c" + std::to_string(k);
    if (!p[5 + k].empty()) c.limits[resource] = p[5 + k];
    a.resources.containers.push_back(std::move(c));
  }
  VolcanoPod b = a;
  b.name = "b";
  b.annotations[std::string(kVolcanoGpuIndexAnnotation)] = p[7];
  b.annotations[std::string(kVolcanoPredicateTimeAnnotation)] = p[8];
  const size_t request = p[9].size() < 2 ? 1 : static_cast<unsigned char>(p[9][1]) % 8;
  const std::vector<VolcanoPod> pods = {a, b};

  size_t defective = SIZE_MAX;
  hami::Result<VolcanoSharePick> pick =
      SelectVolcanoSharePod(pods, "node", mode, request, &defective);
  if (!pick.ok()) {
    if (pick.status().message().empty()) __builtin_trap();
    if (defective != SIZE_MAX &&
        (defective >= pods.size() || pick.status().code() != hami::StatusCode::kInvalidArgument)) {
      __builtin_trap();
    }
    return;
  }
  if (defective != SIZE_MAX || pick->pod >= pods.size()) __builtin_trap();
  const VolcanoPod& chosen = pods[pick->pod];
  const auto& containers =
      pick->init ? chosen.resources.init_containers : chosen.resources.containers;
  if (pick->container >= containers.size()) __builtin_trap();
  if (pick->request <= 0 || static_cast<size_t>(pick->request) != request) __builtin_trap();
  hami::Result<std::vector<uint32_t>> gpus =
      ParseVolcanoGpuIndices(chosen.annotations.find(kVolcanoGpuIndexAnnotation)->second);
  if (!gpus.ok() || pick->gpus.empty()) __builtin_trap();
  if (mode == VolcanoShareMode::kMemory && pick->gpus != *gpus) __builtin_trap();
  if (mode == VolcanoShareMode::kNumber &&
      static_cast<int64_t>(pick->gpus.size()) != pick->request) {
    __builtin_trap();
  }
  for (uint32_t g : pick->gpus) {
    bool listed = false;
    for (uint32_t h : *gpus) listed |= g == h;
    if (!listed) __builtin_trap();
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view text(reinterpret_cast<const char*>(data), size);
  CheckIndices(text);
  CheckSelection(text);
  return 0;
}
