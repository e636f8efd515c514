// Test and benchmark support for the scheduling core: build registered nodes, pods and the
// objects the scheduler service would see after writing a placement's annotations.
//
//   SchedulerWorld w;                                   // default device-config, fake clock
//   w.AddNode("node-a", {Gpu("GPU-a", 0, 16384)});
//   PodSpec pod = w.Pod("p1", {Limits({{"nvidia.com/gpu", "1"}})});
//   Result<Decision> d = w.Schedule(pod);               // place + reserve + annotate + bind
//
// Not for production code. Thread safety: single-threaded use.
#pragma once

#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "common/clock.h"
#include "device/config.h"
#include "device/mig_allocation.h"
#include "device/node_registration.h"
#include "device/nvidia/nvidia_vendor.h"
#include "device/vendor.h"
#include "scheduler/ledger.h"
#include "scheduler/objects.h"
#include "scheduler/placement.h"

namespace hami::scheduler::testing {

inline device::DeviceInfo Gpu(std::string uuid, uint32_t index, int32_t mem_mib,
                              std::string type = "NVIDIA-Tesla V100-PCIE-32GB", int32_t numa = 0,
                              int32_t count = 10, int32_t core = 100) {
  device::DeviceInfo d;
  d.id = std::move(uuid);
  d.index = index;
  d.count = count;
  d.devmem = mem_mib;
  d.devcore = core;
  d.type = std::move(type);
  d.numa = numa;
  d.mode = std::string(device::kModeHamiCore);
  d.health = true;
  return d;
}

inline NodeObject MakeNode(std::string name, const std::vector<device::DeviceInfo>& gpus,
                           device::Annotations extra = {}) {
  NodeObject n;
  n.name = std::move(name);
  n.annotations = std::move(extra);
  n.annotations[std::string(device::kNvidiaRegisterAnnotation)] =
      device::EncodeNodeDevicesJson(gpus);
  return n;
}

using Quantities = std::map<std::string, std::string, std::less<>>;

inline device::ContainerResources Limits(Quantities limits, std::string name = "main") {
  device::ContainerResources c;
  c.name = std::move(name);
  c.limits = std::move(limits);
  return c;
}

// The pod object the service would see once it wrote `d`'s annotations at `now`.
inline PodObject AnnotatedPod(const device::VendorRegistry& vendors, const PodSpec& pod,
                              const Decision& d, int64_t now, bool bound) {
  PodObject o;
  o.uid = pod.uid;
  o.name_space = pod.name_space;
  o.name = pod.name;
  o.annotations = pod.annotations;
  o.init_container_count = d.init_container_count;
  o.annotations[std::string(kAssignedNodeAnnotation)] = d.node;
  o.annotations[std::string(kAssignedTimeAnnotation)] = std::to_string(now);
  Status s = device::EncodePodDevices(
      vendors, d.devices, d.container_count, &o.annotations,
      device::PodWriteContext{d.node, now, &pod.annotations, &pod.requests});
  (void)s;
  if (!d.mig.empty()) {
    o.annotations[std::string(device::kMigAllocationsAnnotation)] =
        device::EncodeMigAllocations(d.mig);
  }
  if (bound) {
    o.node_name = d.node;
    o.phase = PodPhase::kRunning;
  }
  return o;
}

class SchedulerWorld {
 public:
  explicit SchedulerWorld(EngineOptions options = {},
                          device::DeviceConfig config = device::DefaultDeviceConfig(),
                          device::VendorRegistry::Options vendor_options = {})
      : config_(std::move(config)),
        vendors_(std::move(device::VendorRegistry::FromConfig(config_, vendor_options)).value()),
        ledger_(std::make_unique<Ledger>(vendors_, clock_)),
        engine_(std::move(options)) {}
  SchedulerWorld(const SchedulerWorld&) = delete;
  SchedulerWorld& operator=(const SchedulerWorld&) = delete;

  Ledger& ledger() { return *ledger_; }
  const Ledger& ledger() const { return *ledger_; }
  FakeClock& clock() { return clock_; }
  const device::VendorRegistry& vendors() const { return vendors_; }
  const PlacementEngine& engine() const { return engine_; }
  void SetEngine(EngineOptions o) { engine_ = PlacementEngine(std::move(o)); }

  Status AddNode(const std::string& name, const std::vector<device::DeviceInfo>& gpus,
                 device::Annotations extra = {}, device::NodeCapacity capacity = {},
                 device::Annotations labels = {}) {
    NodeObject n = MakeNode(name, gpus, std::move(extra));
    n.capacity = std::move(capacity);
    n.labels = std::move(labels);
    if (nodes_.find(name) == nodes_.end()) order_.push_back(name);
    nodes_[name] = n;
    return ledger_->UpsertNode(n);
  }

  PodSpec Pod(const std::string& name, std::vector<device::ContainerResources> containers,
              device::Annotations annotations = {},
              std::vector<device::ContainerResources> init_containers = {}) {
    PodSpec p;
    p.uid = "uid-" + name;
    p.name_space = "default";
    p.name = name;
    p.annotations = std::move(annotations);
    device::PodResources res;
    res.containers = std::move(containers);
    res.init_containers = std::move(init_containers);
    Result<device::PodRequests> r = device::ParsePodRequests(vendors_, res);
    if (r.ok()) p.requests = std::move(r).value();
    return p;
  }

  std::vector<std::string_view> NodeNames() const {
    return std::vector<std::string_view>(order_.begin(), order_.end());
  }

  Result<Decision> Place(const PodSpec& pod, TraceLevel trace = TraceLevel::kNodes) {
    std::vector<std::string_view> names = NodeNames();
    return engine_.Place(*ledger_, pod, names, trace);
  }

  // The full Filter + annotate + Bind cycle; the pod ends bound in the ledger.
  Result<Decision> Schedule(const PodSpec& pod, TraceLevel trace = TraceLevel::kNodes) {
    std::vector<std::string_view> names = NodeNames();
    HAMI_ASSIGN_OR_RETURN(Decision d, PlaceAndReserve(*ledger_, engine_, pod, names, trace));
    if (d.fit()) {
      PodObject o = AnnotatedPod(vendors_, pod, d, clock_.NowUnixSeconds(), /*bound=*/true);
      HAMI_RETURN_IF_ERROR(ledger_->UpsertPod(o));
      pods_[o.uid] = o;
    }
    return d;
  }

  void DeletePod(const std::string& uid) {
    ledger_->RemovePod(uid);
    pods_.erase(uid);
  }

  // A fresh ledger built from the current objects (what a restarted scheduler would see).
  std::unique_ptr<Ledger> Rebuild() const {
    auto l = std::make_unique<Ledger>(vendors_, clock_);
    for (const auto& [name, n] : nodes_) (void)l->UpsertNode(n);
    for (const auto& [uid, p] : pods_) (void)l->UpsertPod(p);
    return l;
  }

  std::map<std::string, NodeObject>& node_objects() { return nodes_; }
  std::map<std::string, PodObject>& pod_objects() { return pods_; }

 private:
  device::DeviceConfig config_;
  device::VendorRegistry vendors_;
  FakeClock clock_;
  std::unique_ptr<Ledger> ledger_;
  PlacementEngine engine_;
  std::map<std::string, NodeObject> nodes_;
  std::vector<std::string> order_;
  std::map<std::string, PodObject> pods_;
};

// The UUIDs of container `c`'s NVIDIA devices in a decision.
inline std::vector<std::string> Uuids(const Decision& d, size_t c = 0) {
  std::vector<std::string> out;
  auto it = d.devices.find("NVIDIA");
  if (it == d.devices.end() || c >= it->second.size()) return out;
  for (const device::ContainerDevice& cd : it->second[c]) out.push_back(cd.uuid);
  return out;
}

}  // namespace hami::scheduler::testing
