// Fuzzes every vendor module beyond NVIDIA with what a cluster hands it: node registrations and
// node capacities (what device plugins write), container quantities and pod annotations (what
// users write). Errors, never crashes. Invariants: decoded devices carry their vendor's key and
// non-negative amounts, capacity never makes more than 4096 devices, a parsed request asks for
// at least one device with memory and cores in range, the webhook's edits parse again and are
// stable (mutating the edited container asks for no different values), and writing a pod's
// annotations for the devices decoded never fails, node preference tables hold finite values
// for counts of at least one.
//
// Input: lines. Line 1 picks the vendor (by index); line 2 is the registration annotation's
// value; line 3 two capacity numbers; then `resource=quantity` lines for the container and
// `@key=value` lines for pod annotations.
#include <stddef.h>
#include <stdint.h>

#include <cmath>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "device/config.h"
#include "device/resource_quantity.h"
#include "device/vendor.h"

using namespace hami::device;

namespace {

const VendorRegistry& Registry() {
  static const VendorRegistry* reg = [] {
    DeviceConfig cfg =
        ParseDeviceConfigYaml(
            "hygon: {}\ncambricon: {}\nenflame: {}\nkunlun: {}\nmthreads: {}\nbiren: {}\n"
            "vastai: {}\nmetax: {}\namd: {}\nawsneuron: {}\nvnpus: {}\niluvatars: ~\n")
            .value();
    return new VendorRegistry(
        VendorRegistry::FromConfig(cfg, {.enable_ascend = true, .enable_iluvatar = true}).value());
  }();
  return *reg;
}

std::vector<std::string_view> Lines(std::string_view s) {
  std::vector<std::string_view> out;
  while (!s.empty()) {
    size_t nl = s.find('\n');
    out.push_back(s.substr(0, nl));
    if (nl == std::string_view::npos) break;
    s.remove_prefix(nl + 1);
  }
  return out;
}

int64_t Number(std::string_view s) {
  hami::Result<int64_t> v = ParseIntegerQuantity(s);
  return v.ok() ? *v : 0;
}

// The cluster as the webhook sees it: one node whose capacity ratio is the input's number.
class FuzzFacts final : public NodeCapacityFacts {
 public:
  explicit FuzzFacts(int64_t ratio) : ratio_(ratio) {}
  std::map<int64_t, int32_t> CapacityRatios(std::string_view, std::string_view) const override {
    return {{ratio_, 1}};
  }

 private:
  int64_t ratio_;
};

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size > 8192) return 0;
  std::vector<std::string_view> lines =
      Lines(std::string_view(reinterpret_cast<const char*>(data), size));
  if (lines.size() < 3) return 0;
  const auto& vendors = Registry().vendors();
  const Vendor& v = *vendors[static_cast<size_t>(Number(lines[0]) & 0xffff) % vendors.size()];

  // The node as its device plugin shows it.
  Annotations node_annos;
  if (!v.annotation_keys().node_register.empty()) {
    node_annos[v.annotation_keys().node_register] = std::string(lines[1]);
  }
  NodeCapacity capacity;
  std::string_view caps = lines[2];
  size_t sp = caps.find(' ');
  const ResourceNames& n = v.resource_names();
  if (!v.registration_capacity().empty()) {
    capacity[std::string(v.registration_capacity())] = Number(caps.substr(0, sp));
  }
  const int64_t second = sp == std::string_view::npos ? 0 : Number(caps.substr(sp + 1));
  if (!n.memory.empty()) capacity[n.memory] = second;
  if (!n.core.empty() && v.registration_capacity() != n.core) capacity[n.core] = second;
  Annotations labels = {{std::string(kInstanceTypeLabel), std::string(lines[1])}};
  hami::Result<std::vector<DeviceInfo>> devices =
      v.DecodeNodeDevices(NodeView{"fuzz-node", node_annos, capacity, &labels});
  if (devices.ok()) {
    if (devices->size() > 4096 && !v.registration_capacity().empty()) __builtin_trap();
    for (const DeviceInfo& d : *devices) {
      if (d.vendor != v.Key()) __builtin_trap();
      if (!v.registration_capacity().empty() && (d.devmem < 0 || d.count < 1)) __builtin_trap();
    }
  }

  // Node preferences (MetaX's topology tables) from the same text.
  for (const std::string& key : v.node_preference_annotations()) {
    node_annos[key] = std::string(lines[1]);
  }
  NodePreferenceTable prefs =
      v.DecodeNodePreferences(NodeView{"fuzz-node", node_annos, capacity, &labels});
  for (const auto* m : {&prefs.binpack, &prefs.spread}) {
    for (const auto& [n, value] : *m) {
      if (n < 1 || !std::isfinite(value)) __builtin_trap();
    }
  }

  // The container and pod as a user writes them.
  ContainerResources c;
  c.name = "app";
  Annotations pod;
  for (size_t i = 3; i < lines.size(); ++i) {
    std::string_view l = lines[i];
    size_t eq = l.find('=');
    if (eq == std::string_view::npos) continue;
    if (!l.empty() && l[0] == '@') {
      pod[std::string(l.substr(1, eq - 1))] = std::string(l.substr(eq + 1));
    } else {
      c.limits[std::string(l.substr(0, eq))] = std::string(l.substr(eq + 1));
    }
  }
  hami::Result<std::optional<ContainerRequest>> r = v.ParseRequest(c);
  if (r.ok() && r->has_value()) {
    const ContainerRequest& q = **r;
    if (q.vendor != v.Key() || q.count < 1 || q.mem_mib < 0 || q.cores < 0 || q.cores > 100) {
      __builtin_trap();
    }
  }
  FuzzFacts facts(second);
  const AdmissionContext actx(pod, &facts);
  hami::Result<ContainerMutation> m = v.MutateContainer(c, actx);
  if (m.ok() && m->found) {
    ContainerResources edited = c;
    for (const auto& [k, q] : m->set_limits) edited.limits[k] = q;
    for (const auto& [k, q] : m->set_requests) edited.requests[k] = q;
    if (!v.ParseRequest(edited).ok()) __builtin_trap();
    hami::Result<ContainerMutation> again = v.MutateContainer(edited, actx);
    if (!again.ok()) __builtin_trap();
    for (const auto& [k, q] : again->set_limits) {
      if (edited.limits.at(k) != q) __builtin_trap();  // a second pass changes nothing
    }
  }

  // The pod's annotations for one device of each decoded kind.
  if (devices.ok() && !devices->empty() && r.ok() && r->has_value()) {
    PodDevices pd;
    ContainerDevice cd;
    cd.uuid = (*devices)[0].id;
    cd.type = std::string(v.Key());
    cd.mem_mib = (**r).mem_mib;
    cd.cores = (**r).cores;
    cd.index = static_cast<int32_t>((*devices)[0].index);
    cd.devcore = (*devices)[0].devcore;
    pd[std::string(v.Key())] = {{cd}};
    PodRequests asked;
    asked.containers.push_back({**r});
    Annotations out;
    if (!EncodePodDevices(Registry(), pd, 1, &out, PodWriteContext{"fuzz-node", 1, &pod, &asked})
             .ok()) {
      __builtin_trap();
    }
  }
  return 0;
}
