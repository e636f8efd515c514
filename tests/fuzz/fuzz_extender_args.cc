// Fuzzes what the extender reads from kube-scheduler's ExtenderArgs on the full-nodes
// (simulation) path: the pod's resources and annotations, the nodes' registrations, then a
// placement on a scratch ledger. Nothing may crash; a placement never exceeds a device. The
// filter's one-pass ExtenderArgs reader must agree with the parsed document (differential).
#include <stddef.h>
#include <stdint.h>

#include <string_view>
#include <vector>

#include "device/config.h"
#include "device/vendor.h"
#include "extender/extender_args.h"
#include "extender/k8s_objects.h"
#include "k8s/object.h"
#include "scheduler/ledger.h"
#include "scheduler/placement.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const hami::device::VendorRegistry* vendors = new hami::device::VendorRegistry(
      hami::device::VendorRegistry::FromConfig(hami::device::DefaultDeviceConfig()).value());
  static const hami::FakeClock clock;
  static const hami::scheduler::PlacementEngine engine;
  const std::string_view body(reinterpret_cast<const char*>(data), size);
  hami::Result<hami::k8s::Object> args = hami::k8s::ParseObject(body);
  {
    // The one-pass reader the filter uses agrees with the parsed document.
    hami::Result<hami::extender::ExtenderArgs> fast = hami::extender::ParseExtenderArgs(body);
    if (fast.ok() != args.ok()) __builtin_trap();
    if (args.ok()) {
      if (fast->pod != args->value("pod", hami::k8s::Object())) __builtin_trap();
      if (fast->nodes != args->value("nodes", hami::k8s::Object())) __builtin_trap();
      auto nn = args->find("nodenames");
      size_t strings = 0;
      if (nn != args->end() && nn->is_array()) {
        for (const auto& n : *nn) {
          if (!n.is_string()) continue;
          if (strings >= fast->names.size() || fast->names[strings] != n.get<std::string>()) {
            __builtin_trap();
          }
          ++strings;
        }
      }
      if (strings != fast->names.size()) __builtin_trap();
    }
  }
  if (!args.ok()) return 0;
  hami::scheduler::Ledger ledger(*vendors, clock);
  std::vector<std::string> names;
  if (args->contains("nodes") && (*args)["nodes"].is_object() &&
      (*args)["nodes"].contains("items") && (*args)["nodes"]["items"].is_array()) {
    for (const auto& n : (*args)["nodes"]["items"]) {
      (void)ledger.UpsertNode(hami::extender::NodeObjectOf(n));
      names.push_back(hami::k8s::Name(n));
    }
  }
  const hami::k8s::Object pod =
      args->contains("pod") ? (*args)["pod"] : hami::k8s::Object::object();
  (void)ledger.UpsertPod(hami::extender::PodObjectOf(pod));
  hami::scheduler::PodSpec spec;
  spec.uid = "fuzz";
  spec.annotations = hami::extender::AnnotationsOf(pod);
  hami::Result<hami::device::PodRequests> req =
      hami::device::ParsePodRequests(*vendors, hami::extender::PodResourcesOf(pod));
  if (!req.ok()) return 0;
  spec.requests = std::move(*req);
  std::vector<std::string_view> views(names.begin(), names.end());
  hami::Result<hami::scheduler::Decision> d = engine.Place(ledger, spec, views);
  if (d.ok() && d->fit()) {
    if (!ledger.Reserve(d->ToReservation(spec)).ok()) return 0;
    if (!ledger.CheckConsistency().ok()) __builtin_trap();
  }
  return 0;
}
