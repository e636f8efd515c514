#include "device/vendors/annotated_vendor.h"

#include <limits>

#include "device/request.h"
#include "device/text_util.h"

namespace hami::device {

AnnotatedVendor::AnnotatedVendor(AnnotatedVendorSpec spec) : spec_(std::move(spec)) {
  if (spec_.names.memory_factor < 1) spec_.names.memory_factor = 1;
}

Result<std::optional<ContainerRequest>> AnnotatedVendor::ParseRequest(
    const ContainerResources& c) const {
  constexpr int64_t kMax32 = std::numeric_limits<int32_t>::max();
  const ResourceNames& n = spec_.names;
  HAMI_ASSIGN_OR_RETURN(std::optional<int64_t> count, ReadIntegerResource(c, n.count, 0, kMax32));
  std::optional<int64_t> mem, cores;
  if (!n.memory.empty()) {
    HAMI_ASSIGN_OR_RETURN(mem, ReadIntegerResource(c, n.memory, 0, kMax32));
  }
  if (!n.core.empty()) {
    HAMI_ASSIGN_OR_RETURN(cores, ReadIntegerResource(c, n.core, 0, 100));
  }
  if (!count || *count == 0) return std::optional<ContainerRequest>();

  ContainerRequest r;
  r.vendor = spec_.key;
  r.count = static_cast<int32_t>(*count);
  if (mem && *mem > 0) {
    int64_t scaled = *mem * n.memory_factor;
    if (scaled > kMax32) {
      return InvalidArgumentError("container " + text::Quote(c.name) + ": " + n.memory + "=" +
                                  std::to_string(*mem) + " x memoryFactor " +
                                  std::to_string(n.memory_factor) + " exceeds " +
                                  std::to_string(kMax32) + " MiB");
    }
    r.mem_mib = static_cast<int32_t>(scaled);
  } else if (spec_.default_memory_mib > 0) {
    r.mem_mib = spec_.default_memory_mib;
  } else {
    r.mem_percent = 100;
  }
  r.cores = cores ? static_cast<int32_t>(*cores) : spec_.default_cores;
  return std::optional<ContainerRequest>(std::move(r));
}

std::unique_ptr<Vendor> MakeHygonDcuVendor(const VendorResources& config) {
  AnnotatedVendorSpec s;
  s.key = std::string(kHygonVendorKey);
  s.names.count = config.count;
  s.names.memory = config.memory;
  s.names.core = config.core;
  s.names.memory_factor = config.memory_factor;
  s.keys.node_register = std::string(kHygonRegisterAnnotation);
  s.keys.node_handshake = std::string(kHygonHandshakeAnnotation);
  s.keys.to_allocate = std::string(kHygonToAllocateAnnotation);
  s.keys.allocated = std::string(kHygonAllocatedAnnotation);
  s.keys.use_type = "hygon.com/use-dcutype";
  s.keys.nouse_type = "hygon.com/nouse-dcutype";
  s.keys.use_uuid = "hygon.com/use-gpuuuid";
  s.keys.nouse_uuid = "hygon.com/nouse-gpuuuid";
  s.default_memory_mib = config.default_memory_mib;
  s.default_cores = config.default_cores;
  return std::make_unique<AnnotatedVendor>(std::move(s));
}

}  // namespace hami::device
