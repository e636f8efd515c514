#include "device/volcano_vgpu.h"

#include <limits>

#include "device/node_registration.h"
#include "device/pod_devices.h"
#include "device/text_util.h"

namespace hami::device {

namespace {

bool HasRegisterSeparator(std::string_view s) {
  return s.find(',') != std::string_view::npos || s.find(':') != std::string_view::npos;
}

// The checks both register directions share, beyond ValidateNodeDevices.
Status CheckRegisterText(const DeviceInfo& d, const std::string& where) {
  if (d.type.empty()) return InvalidArgumentError(where + ": empty device type");
  if (d.mode.empty()) {
    return InvalidArgumentError(where + ": empty mode (hami-core or mig)");
  }
  if (HasRegisterSeparator(d.type) || HasRegisterSeparator(d.mode)) {
    return InvalidArgumentError(where + ": type and mode must not contain ',' or ':'");
  }
  return OkStatus();
}

std::string DeviceWhere(size_t i, const std::string& id) {
  return "device " + std::to_string(i) + (id.empty() ? "" : " (" + text::Quote(id) + ")");
}

Result<std::optional<PodSingleDevice>> DecodeListAnnotation(const Annotations& annotations,
                                                            std::string_view key) {
  auto it = annotations.find(key);
  if (it == annotations.end()) return std::optional<PodSingleDevice>();
  Result<PodSingleDevice> pod = DecodeVolcanoPodDevices(it->second);
  if (!pod.ok()) return pod.status().WithContext(key);
  return std::optional<PodSingleDevice>(std::move(pod).value());
}

}  // namespace

Result<std::string> EncodeVolcanoNodeDevices(const std::vector<DeviceInfo>& devices) {
  if (devices.empty()) {
    return InvalidArgumentError("volcano node registration: no devices to register");
  }
  HAMI_RETURN_IF_ERROR(ValidateNodeDevices(devices));
  std::string out;
  for (size_t i = 0; i < devices.size(); ++i) {
    const DeviceInfo& d = devices[i];
    HAMI_RETURN_IF_ERROR(CheckRegisterText(d, DeviceWhere(i, d.id)));
    out += d.id;
    out += ',' + std::to_string(d.count);
    out += ',' + std::to_string(d.devmem);
    out += ',' + d.type;
    out += d.health ? ",true," : ",false,";
    out += d.mode;
    out += ':';
  }
  return out;
}

Result<std::vector<DeviceInfo>> DecodeVolcanoNodeDevices(std::string_view text) {
  if (text.find(':') == std::string_view::npos) {
    return InvalidArgumentError("volcano node registration: missing ':' device terminator in " +
                                text::Quote(text));
  }
  std::vector<DeviceInfo> devices;
  for (std::string_view segment : text::Split(text, ':')) {
    if (segment.find(',') == std::string_view::npos) continue;  // upstream skips these
    const size_t position = devices.size();
    std::vector<std::string_view> f = text::Split(segment, ',');
    std::string where = DeviceWhere(position, std::string(f[0]));
    if (f.size() < 6) {
      std::string why = where + ": expected UUID,COUNT,DEVMEM,TYPE,HEALTH,MODE, got " +
                        std::to_string(f.size()) + " fields in " + text::Quote(segment);
      if (f.size() == 5) {
        why += " (the five-field form of agents up to v1.9.x, which Volcano's scheduler refuses "
               "for the whole node: upgrade the vGPU device plugin)";
      }
      return InvalidArgumentError(why);
    }
    DeviceInfo d;
    d.id = std::string(f[0]);
    d.index = static_cast<uint32_t>(position);
    constexpr int64_t kMax32 = std::numeric_limits<int32_t>::max();
    int64_t count = 0, devmem = 0;
    if (const char* why = text::ParseInt(f[1], 0, kMax32, &count)) {
      return InvalidArgumentError(where + ": count " + text::Quote(f[1]) + ": " + why);
    }
    if (const char* why = text::ParseInt(f[2], 0, kMax32, &devmem)) {
      return InvalidArgumentError(where + ": devmem " + text::Quote(f[2]) + ": " + why);
    }
    d.count = static_cast<int32_t>(count);
    d.devmem = static_cast<int32_t>(devmem);
    d.type = std::string(f[3]);
    if (!text::ParseBool(f[4], &d.health)) {
      return InvalidArgumentError(where + ": health " + text::Quote(f[4]) + ": not a boolean");
    }
    d.mode = std::string(f[5]);
    HAMI_RETURN_IF_ERROR(CheckRegisterText(d, where));
    devices.push_back(std::move(d));
  }
  if (devices.empty()) {
    return InvalidArgumentError("volcano node registration: no device record in " +
                                text::Quote(text));
  }
  Status valid = ValidateNodeDevices(devices);
  if (!valid.ok()) return valid.WithContext("volcano node registration");
  return devices;
}

std::string_view VolcanoNodeMode(const std::vector<DeviceInfo>& devices) {
  if (!devices.empty() && devices.back().mode == kModeMig) return kModeMig;
  return kModeHamiCore;
}

std::string EncodeVolcanoHandshakeReported(const CivilTime& utc) {
  return "Reported " + FormatDateTime(utc) + " +0000 UTC";
}

bool VolcanoHandshakeAwaitsReport(std::string_view value) {
  return value.find("Requesting") != std::string_view::npos ||
         value.find("Deleted") != std::string_view::npos;
}

std::string EncodeVolcanoNodeLock(const Timestamp& t) { return FormatRfc3339(t); }

Result<Timestamp> DecodeVolcanoNodeLock(std::string_view text) {
  Result<Timestamp> t = ParseRfc3339(text);
  if (!t.ok()) {
    return t.status().WithContext("volcano node lock " + std::string(kVolcanoNodeLockAnnotation));
  }
  return t;
}

bool VolcanoNodeLockExpired(const Timestamp& lock, int64_t now_unix_seconds) {
  // Compared as a difference so extreme stamps cannot overflow the addition.
  return now_unix_seconds > lock.unix_seconds &&
         static_cast<uint64_t>(now_unix_seconds) - static_cast<uint64_t>(lock.unix_seconds) >
             static_cast<uint64_t>(kVolcanoNodeLockExpirySeconds);
}

std::optional<uint64_t> ParseVolcanoTime(std::string_view text) {
  if (text.empty()) return std::nullopt;
  uint64_t value = 0;
  for (char c : text) {
    if (c < '0' || c > '9') return std::nullopt;
    const uint64_t digit = static_cast<uint64_t>(c - '0');
    if (value > (UINT64_MAX - digit) / 10) return std::nullopt;
    value = value * 10 + digit;
  }
  return value;
}

std::string FormatVolcanoTime(uint64_t seconds) { return std::to_string(seconds); }

std::string EncodeVolcanoPodDevices(const PodSingleDevice& pod) {
  std::string out;
  for (size_t i = 0; i < pod.size(); ++i) {
    if (i > 0) out += ';';
    out += EncodeContainerDevices(pod[i]);
  }
  return out;
}

Result<PodSingleDevice> DecodeVolcanoPodDevices(std::string_view text) {
  PodSingleDevice pod;
  std::vector<std::string_view> entries = text::Split(text, ';');
  pod.reserve(entries.size());
  for (size_t i = 0; i < entries.size(); ++i) {
    Result<ContainerDevices> c = DecodeContainerDevices(entries[i]);
    if (!c.ok()) return c.status().WithContext("entry " + std::to_string(i));
    pod.push_back(std::move(c).value());
  }
  return pod;
}

Result<VolcanoAssignment> DecodeVolcanoAssignment(const Annotations& annotations) {
  VolcanoAssignment a;
  auto value = [&](std::string_view key) -> std::string {
    auto it = annotations.find(key);
    return it == annotations.end() ? std::string() : it->second;
  };
  a.node = value(kVolcanoVgpuNodeAnnotation);
  a.bind_phase = value(kVolcanoBindPhaseAnnotation);
  a.time = ParseVolcanoTime(value(kVolcanoVgpuTimeAnnotation));
  HAMI_ASSIGN_OR_RETURN(a.to_allocate,
                        DecodeListAnnotation(annotations, kVolcanoDevicesToAllocateAnnotation));
  HAMI_ASSIGN_OR_RETURN(a.ids, DecodeListAnnotation(annotations, kVolcanoVgpuIdsAnnotation));
  return a;
}

}  // namespace hami::device
