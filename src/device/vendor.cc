#include "device/vendor.h"

#include <algorithm>

#include "device/node_registration.h"
#include "device/nvidia/nvidia_vendor.h"
#include "device/pod_devices.h"
#include "device/text_util.h"
#include "device/vendors/annotated_vendor.h"

namespace hami::device {

Result<std::vector<DeviceInfo>> Vendor::DecodeNodeDevices(const Annotations& node) const {
  const std::string& key = annotation_keys().node_register;
  auto it = node.find(key);
  if (it == node.end()) return NotFoundError("node has no " + key + " annotation");
  Result<std::vector<DeviceInfo>> devices = device::DecodeNodeDevices(it->second);
  if (!devices.ok()) return devices.status().WithContext(key);
  for (DeviceInfo& d : *devices) d.vendor = std::string(Key());
  return devices;
}

void Vendor::EncodeNodeDevices(const std::vector<DeviceInfo>& devices, Annotations* node) const {
  (*node)[annotation_keys().node_register] = EncodeNodeDevicesJson(devices);
}

Result<std::optional<PodSingleDevice>> Vendor::DecodePodDevices(const Annotations& pod,
                                                                PodDeviceList which) const {
  const std::string& key = which == PodDeviceList::kAllocated ? annotation_keys().allocated
                                                              : annotation_keys().to_allocate;
  auto it = pod.find(key);
  if (it == pod.end()) return std::optional<PodSingleDevice>();
  Result<PodSingleDevice> list = DecodePodSingleDevice(it->second);
  if (!list.ok()) return list.status().WithContext(key);
  return std::optional<PodSingleDevice>(std::move(list).value());
}

void Vendor::EncodePodDevices(const PodSingleDevice& devices, Annotations* pod) const {
  std::string value = EncodePodSingleDevice(devices);
  (*pod)[annotation_keys().to_allocate] = value;
  (*pod)[annotation_keys().allocated] = std::move(value);
}

Result<VendorRegistry> VendorRegistry::FromConfig(const DeviceConfig& config) {
  VendorRegistry reg;
  if (config.nvidia) {
    HAMI_RETURN_IF_ERROR(ValidateNvidiaConfig(*config.nvidia));
    HAMI_RETURN_IF_ERROR(reg.Add(std::make_unique<NvidiaVendor>(*config.nvidia)));
  }
  if (auto it = config.vendors.find("hygon"); it != config.vendors.end()) {
    HAMI_RETURN_IF_ERROR(reg.Add(MakeHygonDcuVendor(it->second)));
  }
  return reg;
}

std::vector<std::string> UnscheduledVendorSections(const DeviceConfig& config) {
  std::vector<std::string> out;
  for (const auto& [section, resources] : config.vendors) {
    if (section != "hygon") out.push_back(section);
  }
  if (config.ascend) out.push_back("ascend/vnpus");
  if (config.iluvatars) out.push_back("iluvatars");
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
  auto parse = [&](const ContainerResources& c) -> Status {
    ContainerRequests reqs;
    for (const auto& v : vendors.vendors()) {
      HAMI_ASSIGN_OR_RETURN(std::optional<ContainerRequest> r, v->ParseRequest(c));
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
                        size_t container_count, Annotations* pod) {
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
    vendors.Find(key)->EncodePodDevices(padded, pod);
  }
  return OkStatus();
}

}  // namespace hami::device
