#include "device/mig_allocation.h"

#include <set>
#include <utility>

#include "device/json_util.h"

namespace hami::device {

using json_util::Json;

std::string EncodeMigAllocations(const std::vector<MigAllocation>& allocations) {
  std::string out = "[";
  for (size_t i = 0; i < allocations.size(); ++i) {
    const MigAllocation& a = allocations[i];
    if (i > 0) out.push_back(',');
    out += "{\"containerIndex\":" + std::to_string(a.container_index);
    out += ",\"deviceIndex\":" + std::to_string(a.device_index);
    out += ",\"gpuUUID\":";
    json_util::AppendGoString(&out, a.gpu_uuid);
    out += ",\"profile\":";
    json_util::AppendGoString(&out, a.profile);
    out += ",\"placement\":{\"start\":" + std::to_string(a.placement.start) +
           ",\"size\":" + std::to_string(a.placement.size) + "}";
    if (a.runtime) {
      if (!a.runtime->mig_uuid.empty()) {
        out += ",\"migUUID\":";
        json_util::AppendGoString(&out, a.runtime->mig_uuid);
      }
      out += ",\"gpuInstanceID\":" + std::to_string(a.runtime->gpu_instance_id);
      out += ",\"computeInstanceID\":" + std::to_string(a.runtime->compute_instance_id);
    }
    out.push_back('}');
  }
  out.push_back(']');
  return out;
}

Status ValidateMigAllocations(const std::vector<MigAllocation>& allocations) {
  std::set<std::pair<int32_t, int32_t>> seen;
  for (size_t i = 0; i < allocations.size(); ++i) {
    const MigAllocation& a = allocations[i];
    std::string where = "MIG allocation " + std::to_string(i);
    if (a.container_index < 0 || a.device_index < 0 || a.gpu_uuid.empty() || a.profile.empty() ||
        a.placement.size == 0) {
      return InvalidArgumentError(where +
                                  " is incomplete (needs containerIndex >= 0, deviceIndex >= 0, "
                                  "gpuUUID, profile and a placement of non-zero size)");
    }
    if (a.runtime && a.runtime->mig_uuid.empty()) {
      return InvalidArgumentError(where + " has a partial runtime identity");
    }
    if (!seen.insert({a.container_index, a.device_index}).second) {
      return InvalidArgumentError(where + ": duplicate entry for container " +
                                  std::to_string(a.container_index) + " device " +
                                  std::to_string(a.device_index));
    }
  }
  return OkStatus();
}

Result<std::vector<MigAllocation>> DecodeMigAllocations(std::string_view text) {
  std::vector<MigAllocation> out;
  if (text.empty()) return out;
  HAMI_ASSIGN_OR_RETURN(Json j, json_util::Parse(text, "MIG allocations"));
  if (j.is_null()) return out;
  if (!j.is_array()) return InvalidArgumentError("MIG allocations: expected a JSON array");
  for (size_t i = 0; i < j.size(); ++i) {
    const Json& e = j[i];
    std::string path = json_util::Indexed("allocations", i);
    if (!e.is_object()) return InvalidArgumentError(path + ": expected an object");
    MigAllocation a;
    HAMI_RETURN_IF_ERROR(json_util::ReadOptional(e, "containerIndex", path, &a.container_index));
    HAMI_RETURN_IF_ERROR(json_util::ReadOptional(e, "deviceIndex", path, &a.device_index));
    HAMI_RETURN_IF_ERROR(json_util::ReadOptional(e, "gpuUUID", path, &a.gpu_uuid));
    HAMI_RETURN_IF_ERROR(json_util::ReadOptional(e, "profile", path, &a.profile));
    if (const Json* p = json_util::Member(e, "placement")) {
      std::string p_path = json_util::Field(path, "placement");
      if (!p->is_object()) return InvalidArgumentError(p_path + ": expected an object");
      HAMI_RETURN_IF_ERROR(json_util::ReadOptional(*p, "start", p_path, &a.placement.start));
      HAMI_RETURN_IF_ERROR(json_util::ReadOptional(*p, "size", p_path, &a.placement.size));
    }
    std::string mig_uuid;
    HAMI_RETURN_IF_ERROR(json_util::ReadOptional(e, "migUUID", path, &mig_uuid));
    const Json* gi = json_util::Member(e, "gpuInstanceID");
    const Json* ci = json_util::Member(e, "computeInstanceID");
    int present = (mig_uuid.empty() ? 0 : 1) + (gi ? 1 : 0) + (ci ? 1 : 0);
    if (present != 0 && present != 3) {
      return InvalidArgumentError("MIG allocation " + std::to_string(i) +
                                  " has a partial runtime identity (migUUID, gpuInstanceID and "
                                  "computeInstanceID go together)");
    }
    if (present == 3) {
      MigRuntimeIdentity r;
      r.mig_uuid = std::move(mig_uuid);
      HAMI_RETURN_IF_ERROR(
          json_util::ReadUint32(*gi, json_util::Field(path, "gpuInstanceID"), &r.gpu_instance_id));
      HAMI_RETURN_IF_ERROR(json_util::ReadUint32(*ci, json_util::Field(path, "computeInstanceID"),
                                                 &r.compute_instance_id));
      a.runtime = std::move(r);
    }
    out.push_back(std::move(a));
  }
  HAMI_RETURN_IF_ERROR(ValidateMigAllocations(out));
  return out;
}

}  // namespace hami::device
