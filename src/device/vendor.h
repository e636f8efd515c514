// The vendor seam: what each accelerator family (NVIDIA, Hygon, Ascend, Cambricon, ...)
// contributes to scheduling, and the registry of enabled vendors.
//
// A Vendor knows its key (upstream's CommonWord, e.g. "NVIDIA"), its resource names, its
// annotation keys, how to read a container's request, and how to read and write its node
// registration and pod device lists. Vendors whose node plugin uses HAMi-style annotations
// (JSON or colon text registration, `:`/`;` device lists) only implement Key(),
// resource_names(), annotation_keys() and ParseRequest(); the codec methods have default
// implementations built on those keys. The other hooks have neutral defaults and are overridden
// where a vendor differs: devices from node capacity (registration_capacity, DecodeNodeDevices),
// the webhook's edits (MutateContainer), annotations beyond the device lists (EncodePodExtras),
// the node lock its plugin expects (node_lock), compute counted in the device's own units
// (cores_in_device_units), board topology (ChooseDevices) and partition rules
// (equal_partitions). The modules live in device/vendors/ and device/nvidia/.
//
//   Result<VendorRegistry> reg = VendorRegistry::FromConfig(config, {.enable_ascend = true});
//   Result<PodRequests> reqs = ParsePodRequests(*reg, pod);
//
// Thread safety: Vendor implementations are immutable after construction and safe to call
// concurrently. VendorRegistry is built once, then read-only (concurrent reads are safe).
#pragma once

#include <array>
#include <map>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"
#include "device/config.h"
#include "device/device.h"

namespace hami::device {

// Node annotation: comma list of device UUIDs (any vendor's) that take no new pods.
inline constexpr std::string_view kDeviceCordonAnnotation = "hami.io/device-cordon";

// Resource names a vendor reads from container specs (empty when the vendor has no such
// resource) and its memory factor (quota checks scale memory limits by it).
struct ResourceNames {
  std::string count;
  std::string memory;
  std::string memory_percentage;
  std::string core;
  std::string priority;
  int32_t memory_factor = 1;
};

// Node and pod annotation keys a vendor uses.
struct VendorAnnotationKeys {
  std::string node_register;   // e.g. hami.io/node-nvidia-register
  std::string node_handshake;  // e.g. hami.io/node-handshake
  std::string to_allocate;     // e.g. hami.io/vgpu-devices-to-allocate (consumed by Allocate)
  std::string allocated;       // e.g. hami.io/vgpu-devices-allocated (immutable after Filter)
  // Pod annotations that narrow which devices a pod may get; empty when the vendor has none.
  std::string use_type;            // comma list, case-insensitive substring of the device type
  std::string nouse_type;          // comma list, case-insensitive substring of the device type
  std::string use_uuid;            // comma list of exact UUIDs
  std::string nouse_uuid;          // comma list of exact UUIDs
  std::string numa_bind;           // bool: all devices of a container on one NUMA node
  std::string mode_select;         // the device mode must be a substring of this value
  bool mode_select_exact = false;  // ... must equal it (Enflame: the slices per card)
  // Another node annotation the vendor's devices depend on (Ascend: hami-vnpu-core); a change
  // of it re-reads the node's devices.
  std::string node_setting;
};

// Which of a pod's two device lists.
enum class PodDeviceList { kToAllocate, kAllocated };

// How a bind serialises allocations on a node for a vendor's pods.
enum class NodeLockKind {
  kShared,  // HAMi's hami.io/mutex.lock: the vendor's plugin reports bind-phase and clears it
  kNone,    // no lock: the vendor's plugin knows nothing of HAMi (Mthreads, whole-card vendors)
  kOwn,     // the vendor's own node annotation, an RFC 3339 time its plugin removes (Cambricon)
};

// A device that passed every check for one request, as a vendor's topology rule sees it.
struct DeviceCandidate {
  uint32_t index = 0;     // the device's index on the node
  bool idle = false;      // nothing allocated on it
  std::string_view mode;  // the device's registered mode (AWS Neuron: the instance type)
  uint32_t group = 0;     // the device's topology group (DeviceInfo::group); 0 = none
};

// A topology rule's answer: positions into the candidates, or none with the reason's kind.
struct TopologyChoice {
  std::vector<size_t> picked;
  bool topology_mismatch = true;  // NumaNotFit; else AllocatedCardsInsufficientRequest
};

// The rule for vendors whose devices come in groups better used together (Ascend's networks,
// a Vastai card's dies): when every candidate has a group, the smallest group that holds `need`
// (keeping bigger ones whole), else the biggest groups first (spanning the fewest); without
// groups, the candidates' order. Within a group, the candidates' order.
TopologyChoice ChooseByGroup(std::span<const DeviceCandidate> candidates, int32_t need);

// Per-device tallies of the task classes a vendor tells its tasks apart by (MetaX sGPU: app
// class and QoS policy), kept by the ledger for vendors with uses_task_classes(): entry c counts
// the tasks of class c on the device.
inline constexpr size_t kTaskClassCount = 16;
using TaskClassCounts = std::array<uint16_t, kTaskClassCount>;

// A vendor's verdict on a task joining a device that others use.
enum class ShareVerdict : uint8_t { kOk, kAppClassMismatch, kQosPolicyMismatch };

// Node preferences a vendor reads from its node's annotations (MetaX whole cards: the topology
// losses and scores MetaX's plugin publishes per card count): a pod taking n of the vendor's
// devices on the node adds binpack[n] (node policy binpack) or spread[n] (spread) to the node's
// preference; counts without an entry add nothing.
struct NodePreferenceTable {
  std::map<int32_t, double> binpack;
  std::map<int32_t, double> spread;
  bool empty() const { return binpack.empty() && spread.empty(); }
  friend bool operator==(const NodePreferenceTable&, const NodePreferenceTable&) = default;
};

// What the admission webhook does to one container for a vendor. The webhook owns the pod's
// JSON and applies the edits; vendors only say what they are.
struct ContainerMutation {
  bool found = false;  // the container asks for this vendor's devices (after the edits)
  std::map<std::string, std::string> set_limits;    // resource -> quantity text
  std::map<std::string, std::string> set_requests;  // resource -> quantity text
  std::map<std::string, std::string> default_env;   // set when the container has no such name
  std::string runtime_class;                        // set on the pod when it names none
  std::map<std::string, std::string> set_pod_annotations;  // key -> value, set on the pod
};

// What the scheduler knows of its nodes, for admission rules that depend on them (Enflame's
// vGCU slices per card). The service implements it from its node informer.
class NodeCapacityFacts {
 public:
  virtual ~NodeCapacityFacts() = default;
  // Over the nodes whose status.capacity has both resources above 0: the integer ratio
  // capacity[numerator] / capacity[denominator] -> how many nodes have it. May be called from
  // request threads concurrently.
  virtual std::map<int64_t, int32_t> CapacityRatios(std::string_view numerator,
                                                    std::string_view denominator) const = 0;
};

// What a vendor's admission rule sees besides the container: the pod's annotations and, in the
// scheduler, what it knows of the nodes (null in tools and tests without a cluster). Converts
// from the pod's annotations alone.
struct AdmissionContext {
  AdmissionContext(const Annotations& pod_annotations,  // NOLINT: implicit on purpose
                   const NodeCapacityFacts* node_facts = nullptr)
      : pod(pod_annotations), nodes(node_facts) {}
  const Annotations& pod;
  const NodeCapacityFacts* nodes;
};

// What a vendor may put into the annotations it writes next to its device list.
struct PodRequests;
struct PodWriteContext {
  std::string_view node;                         // the chosen node
  int64_t unix_seconds = 0;                      // the decision's time
  const Annotations* pod_annotations = nullptr;  // the pod's own (may be null)
  const PodRequests* requests = nullptr;         // what the pod asked for (may be null)
};

class Vendor {
 public:
  virtual ~Vendor() = default;

  // Vendor key, used in requests, device lists (TYPE field) and PodDevices maps.
  virtual std::string_view Key() const = 0;
  virtual const ResourceNames& resource_names() const = 0;
  virtual const VendorAnnotationKeys& annotation_keys() const = 0;

  // This vendor's request in container `c`: nullopt when the container asks for none of its
  // devices; InvalidArgument (naming resource and reason) for an invalid value.
  virtual Result<std::optional<ContainerRequest>> ParseRequest(
      const ContainerResources& c) const = 0;

  // Devices the node offers, each with `vendor` set to Key(): by default its registration
  // annotation (JSON or legacy text); capacity vendors synthesise them from node capacity.
  // NotFound when the node shows none of this vendor's devices.
  virtual Result<std::vector<DeviceInfo>> DecodeNodeDevices(const NodeView& node) const;
  // The node capacity resource whose presence means this vendor is on the node (vendors that
  // register no annotation); empty for vendors that register with annotation_keys().node_register.
  virtual std::string_view registration_capacity() const { return {}; }
  // Whether a registration's devcore counts the device's own compute units (AMD: CUs) rather
  // than percent: a request's cores (percent of a device) then take floor(devcore x cores / 100)
  // units of each device, at least 1 (0 % takes all of a device whose whole memory it takes,
  // else none), and device lists record those units.
  virtual bool cores_in_device_units() const { return false; }
  // Whether a registration's devcore is a bitmask of the device's cores and device lists record
  // the mask of the cores a task got (AWS Neuron): a request of n cores takes the n lowest free
  // bits (all of them when n is at least the device's core count), so usage (the sum of
  // disjoint masks) names the cores in use.
  virtual bool cores_as_bitmask() const { return false; }
  // Vendors whose multi-device requests must follow the board's links (Kunlunxin's two groups
  // of four, Ascend 910C's two-NPU modules) choose among the passing devices themselves.
  virtual bool has_topology_rule() const { return false; }
  // `need` devices among `candidates` (in the engine's order of preference); fewer picked means
  // the node does not fit. Called only when has_topology_rule().
  virtual TopologyChoice ChooseDevices(std::span<const DeviceCandidate> candidates,
                                       int32_t need) const;
  // Whether a device is shared only by tasks of one memory size (Kunlunxin vXPU partitions): a
  // used device then takes only requests of the size already on it.
  virtual bool equal_partitions() const { return false; }
  // Whether all containers of a pod asking for this vendor share one device (MetaX whole cards,
  // Moore Threads): a later container may only use the device an earlier one got.
  virtual bool one_device_per_pod() const { return false; }
  // Task classes: who may share a device with whom (MetaX sGPU's app classes and QoS policies).
  // TaskClass() reads a pod's annotations (a value below kTaskClassCount); ChargeClass() is what
  // the pod's charge on one device counts as (`exclusive`: it takes all of the device's
  // compute); CanShare() says whether a task of `task_class` may join a device holding
  // `on_device` (registered mode `device_mode`); TaskTakesNoCores() marks classes whose tasks
  // are given no compute (neither checked nor charged).
  virtual bool uses_task_classes() const { return false; }
  virtual uint8_t TaskClass(const Annotations& /*pod*/) const { return 0; }
  virtual uint8_t ChargeClass(uint8_t task_class, bool /*exclusive*/) const { return task_class; }
  virtual ShareVerdict CanShare(uint8_t /*task_class*/, const TaskClassCounts& /*on_device*/,
                                std::string_view /*device_mode*/, bool /*exclusive*/) const {
    return ShareVerdict::kOk;
  }
  virtual bool TaskTakesNoCores(uint8_t /*task_class*/) const { return false; }
  // How much a task of `task_class` would rather have a device holding `on_device` (higher is
  // better; 0 = indifferent): it orders the devices that fit, ahead of the GPU policy, and the
  // sum over the devices taken is added to a node's preference whatever the node policy.
  virtual double DevicePreference(uint8_t /*task_class*/,
                                  const TaskClassCounts& /*on_device*/) const {
    return 0;
  }
  // The node annotations DecodeNodePreferences reads (a change of them is a change of the
  // node's devices) and the table they give; a malformed annotation gives no entries.
  virtual std::vector<std::string> node_preference_annotations() const { return {}; }
  virtual NodePreferenceTable DecodeNodePreferences(const NodeView& /*node*/) const { return {}; }
  // Whether the pod's whole-device requests (gpucores 100) of this vendor are scored by the links
  // they keep and break (MetaX sGPU topology-aware, off unless the vendor's config or the pod
  // says so): a link is a pair of devices of one topology group, worth 10; a node's preference
  // gains 10 x the links among the devices such requests take, less the links between those
  // devices and the node's other idle devices of this vendor (the pod's cohesion term then
  // leaves these requests out).
  virtual bool scores_links(const Annotations& /*pod*/) const { return false; }
  // Whether a pod under the `mutex` GPU policy needs every device of a topology group idle to
  // take any of them (Vastai in die mode: a card's dies).
  virtual bool mutex_takes_group() const { return false; }
  // The node lock a bind of this vendor's pods takes; kOwn names its annotation.
  virtual NodeLockKind node_lock() const { return NodeLockKind::kShared; }
  virtual std::string_view own_node_lock() const { return {}; }
  // Whether pod device lists carry each device's registered type (AMD: the product name)
  // instead of the vendor key.
  virtual bool lists_device_type() const { return false; }
  // The admission webhook's rules for one container. Default: no edits; found when ParseRequest
  // finds a request. Errors refuse the pod with their message.
  virtual Result<ContainerMutation> MutateContainer(const ContainerResources& c,
                                                    const AdmissionContext& ctx) const;
  // Vendor-specific pod annotations written with the device lists (Ascend's template list,
  // Cambricon's profile, ...); `devices` is this vendor's index-aligned list. Default: none.
  virtual void EncodePodExtras(const PodSingleDevice& devices, const PodWriteContext& ctx,
                               Annotations* pod) const;
  // Writes the JSON registration annotation.
  virtual void EncodeNodeDevices(const std::vector<DeviceInfo>& devices, Annotations* node) const;

  // The pod's device list for this vendor; nullopt when the pod carries no such annotation.
  virtual Result<std::optional<PodSingleDevice>> DecodePodDevices(const Annotations& pod,
                                                                  PodDeviceList which) const;
  // Writes both the to-allocate and the allocated annotation.
  virtual void EncodePodDevices(const PodSingleDevice& devices, Annotations* pod) const;

 protected:
  Vendor() = default;
  Vendor(const Vendor&) = delete;
  Vendor& operator=(const Vendor&) = delete;
};

// The enabled vendors, iterated in key order (the order node locks are taken in).
class VendorRegistry {
 public:
  VendorRegistry() = default;
  VendorRegistry(VendorRegistry&&) = default;
  VendorRegistry& operator=(VendorRegistry&&) = default;
  VendorRegistry(const VendorRegistry&) = delete;
  VendorRegistry& operator=(const VendorRegistry&) = delete;

  // Vendors enabled by `config`, one or more per section (VendorSectionModules): NVIDIA by
  // `nvidia:`, Hygon DCU by `hygon:`, Cambricon MLU by `cambricon:`, Enflame GCU by `enflame:`,
  // Kunlunxin whole cards and vXPU by `kunlun:`, MetaX whole cards and sGPU by `metax:`, Moore
  // Threads by `mthreads:`, Biren and Vastai by theirs; Ascend chips by `ascend:` (the flat form),
  // or by `vnpus` with options.enable_ascend (upstream's chart always ships `vnpus`, its flag turns
  // it on); Iluvatar chips by `iluvatars` with options.enable_iluvatar.
  struct Options {
    bool enable_ascend = false;
    bool enable_iluvatar = false;
  };
  static Result<VendorRegistry> FromConfig(const DeviceConfig& config, const Options& options);
  static Result<VendorRegistry> FromConfig(const DeviceConfig& config) {
    return FromConfig(config, Options{});
  }

  // AlreadyExists when a vendor with the same key is registered.
  Status Add(std::unique_ptr<Vendor> vendor);
  const Vendor* Find(std::string_view key) const;
  // Sorted by Key().
  const std::vector<std::unique_ptr<Vendor>>& vendors() const { return vendors_; }
  // Positions in vendors() of the vendors that read `resource` (any of their resource names).
  const std::vector<size_t>* ReadersOf(std::string_view resource) const {
    auto it = readers_.find(resource);
    return it == readers_.end() ? nullptr : &it->second;
  }

 private:
  std::vector<std::unique_ptr<Vendor>> vendors_;
  std::map<std::string, std::vector<size_t>, std::less<>> readers_;
};

// The vendor sections of `config` that are read and checked but not scheduled, each with the
// reason ("metax: not scheduled by hami-cpp yet", "vnpus: needs --enable-ascend").
std::vector<std::string> UnscheduledVendorSections(const DeviceConfig& config,
                                                   const VendorRegistry::Options& options = {});

// Requests of a whole pod: one entry per container, init containers first (spec order); each
// entry lists the vendors that container asks for, in vendor-key order.
struct PodRequests {
  std::vector<ContainerRequests> containers;
  size_t init_count = 0;

  bool Empty() const {
    for (const ContainerRequests& c : containers) {
      if (!c.empty()) return false;
    }
    return true;
  }
};

// Parses every container against every vendor. Errors name the container and resource.
Result<PodRequests> ParsePodRequests(const VendorRegistry& vendors, const PodResources& pod);

// All vendors' device lists of a pod (vendors without the annotation are absent).
Result<PodDevices> DecodePodDevices(const VendorRegistry& vendors, const Annotations& pod,
                                    PodDeviceList which);

// Writes every vendor's annotations for `devices` (device lists and the vendor's extras), each
// list padded to `container_count` entries so index k is container k for every vendor (our fix of
// upstream's padding). FailedPrecondition when a vendor is unknown or a list is longer than the
// pod.
Status EncodePodDevices(const VendorRegistry& vendors, const PodDevices& devices,
                        size_t container_count, Annotations* pod, const PodWriteContext& ctx = {});

// `vendor`'s devices on a node known only by its annotations (no name, no capacity): for tools
// and tests of annotation-registered vendors.
Result<std::vector<DeviceInfo>> DecodeAnnotatedNode(const Vendor& vendor, const Annotations& node);

// Whether `node` shows `vendor`'s devices at all (its registration annotation, or its
// registration capacity above 0).
bool VendorPresentOn(const Vendor& vendor, const NodeView& node);

}  // namespace hami::device
