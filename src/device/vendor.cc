#include "device/vendor.h"

#include <algorithm>
#include <map>

#include "device/node_registration.h"
#include "device/nvidia/nvidia_vendor.h"
#include "device/pod_devices.h"
#include "device/text_util.h"
#include "device/vendors/annotated_vendor.h"
#include "device/vendors/ascend_vendor.h"
#include "device/vendors/capacity_vendor.h"
#include "device/vendors/metax_vendor.h"
#include "device/vendors/neuron_vendor.h"

namespace hami::device {

Result<std::vector<DeviceInfo>> Vendor::DecodeNodeDevices(const NodeView& node) const {
  const std::string& key = annotation_keys().node_register;
  auto it = node.annotations.find(key);
  if (it == node.annotations.end()) return NotFoundError("node has no " + key + " annotation");
  Result<std::vector<DeviceInfo>> devices = device::DecodeNodeDevices(it->second);
  if (!devices.ok()) return devices.status().WithContext(key);
  for (DeviceInfo& d : *devices) d.vendor = std::string(Key());
  return devices;
}

void Vendor::EncodeNodeDevices(const std::vector<DeviceInfo>& devices, Annotations* node) const {
  (*node)[annotation_keys().node_register] = EncodeNodeDevicesJson(devices);
}

Result<ContainerMutation> Vendor::MutateContainer(const ContainerResources& c,
                                                  const AdmissionContext& /*ctx*/) const {
  ContainerMutation m;
  HAMI_ASSIGN_OR_RETURN(std::optional<ContainerRequest> r, ParseRequest(c));
  m.found = r.has_value();
  return m;
}

TopologyChoice Vendor::ChooseDevices(std::span<const DeviceCandidate> candidates,
                                     int32_t need) const {
  TopologyChoice c;
  for (size_t i = 0; i < candidates.size() && static_cast<int32_t>(c.picked.size()) < need; ++i) {
    c.picked.push_back(i);
  }
  return c;
}

void Vendor::EncodePodExtras(const PodSingleDevice& /*devices*/, const PodWriteContext& /*ctx*/,
                             Annotations* /*pod*/) const {}

Result<std::vector<DeviceInfo>> DecodeAnnotatedNode(const Vendor& vendor, const Annotations& node) {
  static const NodeCapacity kNone;
  return vendor.DecodeNodeDevices(NodeView{"", node, kNone});
}

bool VendorPresentOn(const Vendor& vendor, const NodeView& node) {
  if (std::string_view res = vendor.registration_capacity(); !res.empty()) {
    auto it = node.capacity.find(res);
    return it != node.capacity.end() && it->second > 0;
  }
  return node.annotations.count(vendor.annotation_keys().node_register) > 0;
}

Result<std::optional<PodSingleDevice>> Vendor::DecodePodDevices(const Annotations& pod,
                                                                PodDeviceList which) const {
  const std::string& key = which == PodDeviceList::kAllocated ? annotation_keys().allocated
                                                              : annotation_keys().to_allocate;
  if (key.empty()) return std::optional<PodSingleDevice>();  // the vendor writes no such list
  auto it = pod.find(key);
  if (it == pod.end()) return std::optional<PodSingleDevice>();
  Result<PodSingleDevice> list = DecodePodSingleDevice(it->second);
  if (!list.ok()) return list.status().WithContext(key);
  return std::optional<PodSingleDevice>(std::move(list).value());
}

void Vendor::EncodePodDevices(const PodSingleDevice& devices, Annotations* pod) const {
  std::string value = EncodePodSingleDevice(devices);
  if (!annotation_keys().to_allocate.empty()) (*pod)[annotation_keys().to_allocate] = value;
  (*pod)[annotation_keys().allocated] = std::move(value);
}

namespace {

using VendorFactory = std::unique_ptr<Vendor> (*)(const VendorResources&);

// The modules each flat section turns on.
const std::map<std::string_view, std::vector<VendorFactory>>& FlatSectionModules() {
  static const auto* m = new std::map<std::string_view, std::vector<VendorFactory>>{
      {"amd", {&MakeAmdVendor}},
      {"biren", {&MakeBirenVendor}},
      {"cambricon", {&MakeCambriconMluVendor}},
      {"awsneuron", {&MakeAwsNeuronVendor}},
      {"enflame", {&MakeEnflameGcuVendor, &MakeEnflameVgcuVendor}},
      {"hygon", {&MakeHygonDcuVendor}},
      {"kunlun", {&MakeKunlunVendor, &MakeKunlunVxpuVendor}},
      {"metax", {&MakeMetaxGpuVendor, &MakeMetaxSgpuVendor}},
      {"mthreads", {&MakeMthreadsVendor}},
      {"vastai", {&MakeVastaiVendor}},
  };
  return *m;
}

bool AscendEnabled(const DeviceConfig& c, const VendorRegistry::Options& o) {
  return c.ascend && (o.enable_ascend || c.ascend->flat_form);
}

}  // namespace

TopologyChoice ChooseByGroup(std::span<const DeviceCandidate> candidates, int32_t need) {
  TopologyChoice c;
  c.topology_mismatch = false;  // too few devices is the only way to fail
  if (need <= 0 || static_cast<size_t>(need) > candidates.size()) return c;
  std::map<uint32_t, std::vector<size_t>> groups;  // group -> positions, in candidate order
  bool all = true;
  for (size_t i = 0; i < candidates.size(); ++i) {
    all = all && candidates[i].group != 0;
    groups[candidates[i].group].push_back(i);
  }
  if (!all) {
    for (size_t i = 0; i < static_cast<size_t>(need); ++i) c.picked.push_back(i);
    return c;
  }
  std::vector<const std::vector<size_t>*> order;
  for (const auto& [g, members] : groups) order.push_back(&members);
  // Biggest first; equal sizes by the candidates' order (their first member).
  std::stable_sort(order.begin(), order.end(), [](const auto* a, const auto* b) {
    if (a->size() != b->size()) return a->size() > b->size();
    return a->front() < b->front();
  });
  const std::vector<size_t>* fit = nullptr;
  for (const std::vector<size_t>* g : order) {
    if (g->size() >= static_cast<size_t>(need)) fit = g;  // the last one holding it: smallest
  }
  if (fit != nullptr) {
    c.picked.assign(fit->begin(), fit->begin() + need);
    return c;
  }
  for (const std::vector<size_t>* g : order) {
    for (size_t i : *g) {
      if (c.picked.size() < static_cast<size_t>(need)) c.picked.push_back(i);
    }
  }
  return c;
}

Result<VendorRegistry> VendorRegistry::FromConfig(const DeviceConfig& config,
                                                  const Options& options) {
  VendorRegistry reg;
  if (config.nvidia) {
    HAMI_RETURN_IF_ERROR(ValidateNvidiaConfig(*config.nvidia));
    HAMI_RETURN_IF_ERROR(reg.Add(std::make_unique<NvidiaVendor>(*config.nvidia)));
  }
  for (const auto& [section, resources] : config.vendors) {
    auto it = FlatSectionModules().find(section);
    if (it == FlatSectionModules().end()) continue;
    for (VendorFactory make : it->second) {
      std::unique_ptr<Vendor> v = make(resources);
      if (v) HAMI_RETURN_IF_ERROR(reg.Add(std::move(v)).WithContext(section));
    }
  }
  if (AscendEnabled(config, options)) {
    for (const AscendChipConfig& chip : config.ascend->chips) {
      HAMI_RETURN_IF_ERROR(
          reg.Add(std::make_unique<AscendVendor>(chip, config.ascend->hami_vnpu_core))
              .WithContext("vnpus"));
    }
  }
  if (config.iluvatars && options.enable_iluvatar) {
    for (const IluvatarChipConfig& chip : *config.iluvatars) {
      HAMI_RETURN_IF_ERROR(reg.Add(MakeIluvatarVendor(chip)).WithContext("iluvatars"));
    }
  }
  return reg;
}

std::vector<std::string> UnscheduledVendorSections(const DeviceConfig& config,
                                                   const VendorRegistry::Options& options) {
  std::vector<std::string> out;
  for (const auto& [section, resources] : config.vendors) {
    if (FlatSectionModules().count(section) == 0) {
      out.push_back(section + ": not scheduled by hami-cpp yet");
    }
  }
  if (config.vendors.count("enflame") > 0) {
    out.push_back(
        "enflame: DRS-shared GCUs (drs-gcu, gcu-memory, gcu-core) are not scheduled by hami-cpp "
        "yet; whole GCUs and vGCUs are");
  }
  if (config.ascend && !AscendEnabled(config, options)) {
    out.push_back("vnpus: Ascend is scheduled only with --enable-ascend");
  }
  if (config.iluvatars && !options.enable_iluvatar) {
    out.push_back("iluvatars: Iluvatar is scheduled only with --enable-iluvatar");
  }
  return out;
}

Status VendorRegistry::Add(std::unique_ptr<Vendor> vendor) {
  if (Find(vendor->Key()) != nullptr) {
    return AlreadyExistsError("vendor " + std::string(vendor->Key()) + " registered twice");
  }
  auto pos = std::lower_bound(
      vendors_.begin(), vendors_.end(), vendor->Key(),
      [](const std::unique_ptr<Vendor>& v, std::string_view k) { return v->Key() < k; });
  vendors_.insert(pos, std::move(vendor));
  readers_.clear();
  for (size_t i = 0; i < vendors_.size(); ++i) {
    const ResourceNames& n = vendors_[i]->resource_names();
    for (const std::string* name :
         {&n.count, &n.memory, &n.memory_percentage, &n.core, &n.priority}) {
      if (name->empty()) continue;
      std::vector<size_t>& v = readers_[*name];
      if (v.empty() || v.back() != i) v.push_back(i);
    }
  }
  return OkStatus();
}

const Vendor* VendorRegistry::Find(std::string_view key) const {
  for (const auto& v : vendors_) {
    if (v->Key() == key) return v.get();
  }
  return nullptr;
}

Result<PodRequests> ParsePodRequests(const VendorRegistry& vendors, const PodResources& pod) {
  PodRequests out;
  out.init_count = pod.init_containers.size();
  out.containers.reserve(pod.ContainerCount());
  // Only the vendors that read one of the container's resources are asked (a cluster may enable
  // two dozen; a container names a few resources).
  std::vector<uint8_t> touched(vendors.vendors().size());
  auto parse = [&](const ContainerResources& c) -> Status {
    std::fill(touched.begin(), touched.end(), 0);
    for (const auto* list : {&c.limits, &c.requests}) {
      for (const auto& [name, quantity] : *list) {
        if (const std::vector<size_t>* readers = vendors.ReadersOf(name)) {
          for (size_t i : *readers) touched[i] = 1;
        }
      }
    }
    ContainerRequests reqs;
    for (size_t i = 0; i < vendors.vendors().size(); ++i) {
      if (!touched[i]) continue;
      HAMI_ASSIGN_OR_RETURN(std::optional<ContainerRequest> r,
                            vendors.vendors()[i]->ParseRequest(c));
      if (r) reqs.push_back(std::move(*r));
    }
    out.containers.push_back(std::move(reqs));
    return OkStatus();
  };
  for (const ContainerResources& c : pod.init_containers) HAMI_RETURN_IF_ERROR(parse(c));
  for (const ContainerResources& c : pod.containers) HAMI_RETURN_IF_ERROR(parse(c));
  return out;
}

Result<PodDevices> DecodePodDevices(const VendorRegistry& vendors, const Annotations& pod,
                                    PodDeviceList which) {
  PodDevices out;
  for (const auto& v : vendors.vendors()) {
    HAMI_ASSIGN_OR_RETURN(std::optional<PodSingleDevice> list, v->DecodePodDevices(pod, which));
    if (list) out.emplace(std::string(v->Key()), std::move(*list));
  }
  return out;
}

Status EncodePodDevices(const VendorRegistry& vendors, const PodDevices& devices,
                        size_t container_count, Annotations* pod, const PodWriteContext& ctx) {
  for (const auto& [key, list] : devices) {
    const Vendor* v = vendors.Find(key);
    if (v == nullptr) return FailedPreconditionError("unknown vendor " + text::Quote(key));
    if (list.size() > container_count) {
      return FailedPreconditionError(key + " device list has " + std::to_string(list.size()) +
                                     " entries for a pod of " + std::to_string(container_count) +
                                     " containers");
    }
  }
  for (const auto& [key, list] : devices) {
    PodSingleDevice padded = list;
    PadToContainers(&padded, container_count);
    const Vendor* v = vendors.Find(key);
    v->EncodePodDevices(padded, pod);
    v->EncodePodExtras(padded, ctx, pod);
  }
  return OkStatus();
}

}  // namespace hami::device
