#include "device/pod_devices.h"

#include <limits>

#include "device/text_util.h"

namespace hami::device {

std::string EncodeContainerDevices(const ContainerDevices& devices) {
  std::string out;
  for (const ContainerDevice& d : devices) {
    out += d.uuid;
    out += ',';
    out += d.type;
    out += ',';
    out += std::to_string(d.mem_mib);
    out += ',';
    out += std::to_string(d.cores);
    out += ':';
  }
  return out;
}

std::string EncodePodSingleDevice(const PodSingleDevice& pod) {
  std::string out;
  for (const ContainerDevices& c : pod) {
    out += EncodeContainerDevices(c);
    out += ';';
  }
  return out;
}

Result<ContainerDevices> DecodeContainerDevices(std::string_view text) {
  ContainerDevices devices;
  for (std::string_view segment : text::Split(text, ':')) {
    if (segment.find(',') == std::string_view::npos) continue;
    std::string where = "device " + std::to_string(devices.size());
    std::vector<std::string_view> f = text::Split(segment, ',');
    if (f.size() < 4) {
      return InvalidArgumentError(where + ": expected UUID,TYPE,MEM,CORES, got " +
                                  text::Quote(segment));
    }
    if (f[0].empty()) return InvalidArgumentError(where + ": empty device UUID");
    if (f[1].empty()) return InvalidArgumentError(where + ": empty device type");
    ContainerDevice d;
    d.uuid = std::string(f[0]);
    d.type = std::string(f[1]);
    int64_t mem = 0, cores = 0;
    constexpr int64_t kMax = std::numeric_limits<int32_t>::max();
    if (const char* why = text::ParseInt(f[2], 0, kMax, &mem)) {
      return InvalidArgumentError(where + ": memory " + text::Quote(f[2]) + ": " + why +
                                  " (want 0.." + std::to_string(kMax) + " MiB)");
    }
    if (const char* why = text::ParseInt(f[3], 0, kMax, &cores)) {
      return InvalidArgumentError(where + ": cores " + text::Quote(f[3]) + ": " + why);
    }
    d.mem_mib = static_cast<int32_t>(mem);
    d.cores = static_cast<int32_t>(cores);
    devices.push_back(std::move(d));
  }
  return devices;
}

Result<PodSingleDevice> DecodePodSingleDevice(std::string_view text) {
  PodSingleDevice pod;
  std::vector<std::string_view> entries = text::Split(text, ';');
  // The element after the final ';' is only a container when it is non-empty.
  if (entries.back().empty()) entries.pop_back();
  pod.reserve(entries.size());
  for (size_t i = 0; i < entries.size(); ++i) {
    Result<ContainerDevices> c = DecodeContainerDevices(entries[i]);
    if (!c.ok()) return c.status().WithContext("container " + std::to_string(i));
    pod.push_back(std::move(c).value());
  }
  return pod;
}

void PadToContainers(PodSingleDevice* pod, size_t container_count) {
  if (pod->size() < container_count) pod->resize(container_count);
}

Status CheckAligned(const PodSingleDevice& pod, size_t container_count) {
  if (pod.size() == container_count) return OkStatus();
  return FailedPreconditionError("device list has " + std::to_string(pod.size()) +
                                 " container entries, the pod has " +
                                 std::to_string(container_count) + " containers");
}

}  // namespace hami::device
