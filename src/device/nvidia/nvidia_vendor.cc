#include "device/nvidia/nvidia_vendor.h"

#include <limits>
#include <string>

#include "device/request.h"
#include "device/text_util.h"

namespace hami::device {

NvidiaVendor::NvidiaVendor(NvidiaConfig config) : config_(std::move(config)) {
  names_.count = config_.resource_count_name;
  names_.memory = config_.resource_memory_name;
  names_.memory_percentage = config_.resource_memory_percentage_name;
  names_.core = config_.resource_core_name;
  names_.priority = config_.resource_priority_name;
  names_.memory_factor = config_.EffectiveMemoryFactor();
  keys_.node_register = std::string(kNvidiaRegisterAnnotation);
  keys_.node_handshake = std::string(kNvidiaHandshakeAnnotation);
  keys_.to_allocate = std::string(kNvidiaToAllocateAnnotation);
  keys_.allocated = std::string(kNvidiaAllocatedAnnotation);
  keys_.use_type = std::string(kNvidiaUseGpuType);
  keys_.nouse_type = std::string(kNvidiaNoUseGpuType);
  keys_.use_uuid = std::string(kNvidiaUseGpuUuid);
  keys_.nouse_uuid = std::string(kNvidiaNoUseGpuUuid);
  keys_.numa_bind = std::string(kNvidiaNumaBind);
  keys_.mode_select = std::string(kNvidiaVgpuMode);
}

Result<std::optional<ContainerRequest>> NvidiaVendor::ParseRequest(
    const ContainerResources& c) const {
  constexpr int64_t kMax32 = std::numeric_limits<int32_t>::max();
  HAMI_ASSIGN_OR_RETURN(std::optional<int64_t> count,
                        ReadIntegerResource(c, names_.count, 0, kMax32));
  HAMI_ASSIGN_OR_RETURN(std::optional<int64_t> mem,
                        ReadMemoryResource(c, names_.memory, kMax32, names_.memory_factor));
  HAMI_ASSIGN_OR_RETURN(std::optional<int64_t> pct,
                        ReadIntegerResource(c, names_.memory_percentage, 0, 100));
  HAMI_ASSIGN_OR_RETURN(std::optional<int64_t> cores, ReadIntegerResource(c, names_.core, 0, 100));
  HAMI_ASSIGN_OR_RETURN(std::optional<int64_t> priority,
                        ReadIntegerResource(c, names_.priority, 0, kMax32));

  if (!count) {
    if ((mem || pct || cores) && config_.default_gpu_num > 0) {
      count = config_.default_gpu_num;
    } else {
      return std::optional<ContainerRequest>();
    }
  }
  if (*count == 0) return std::optional<ContainerRequest>();

  ContainerRequest r;
  r.vendor = std::string(kNvidiaVendorKey);
  r.count = static_cast<int32_t>(*count);
  if (mem) {
    int64_t scaled = *mem * names_.memory_factor;
    if (scaled > kMax32) {
      return InvalidArgumentError(
          "container " + text::Quote(c.name) + ": " + names_.memory + "=" + std::to_string(*mem) +
          " MiB x memoryFactor " + std::to_string(names_.memory_factor) +
          " exceeds the largest device memory HAMi can record (" + std::to_string(kMax32) +
          " MiB); gpumem is in MiB, e.g. 4096 for 4 GiB");
    }
    r.mem_mib = static_cast<int32_t>(scaled);
  }
  if (pct && *pct > 0) r.mem_percent = static_cast<int32_t>(*pct);
  if (r.mem_mib == 0 && r.mem_percent == kMemPercentUnset) {
    if (config_.default_memory_mib != 0) {
      r.mem_mib = config_.default_memory_mib;
    } else {
      r.mem_percent = 100;
    }
  }
  r.cores = cores ? static_cast<int32_t>(*cores) : config_.default_cores;
  if (priority) r.priority = static_cast<int32_t>(*priority);
  return std::optional<ContainerRequest>(std::move(r));
}

}  // namespace hami::device
