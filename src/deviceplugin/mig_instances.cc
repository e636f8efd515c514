#include "deviceplugin/mig_instances.h"

#include <algorithm>
#include <filesystem>
#include <nlohmann/json.hpp>

#include "common/file_util.h"
#include "common/log.h"

namespace hami::deviceplugin {

namespace {

using Json = nlohmann::json;

std::string Describe(const MigInstance& i) {
  return i.device.uuid + " (" + i.profile + " at " + std::to_string(i.placement.start) + "+" +
         std::to_string(i.placement.size) + " on " + i.gpu_uuid + ", pod " + i.pod + ")";
}

bool SameReservation(const MigInstance& i, const std::string& gpu, const std::string& profile,
                     device::MigPlacement placement) {
  return i.gpu_uuid == gpu && i.profile == profile && i.placement == placement;
}

// The MIG device of `gpu` in `inv` with this UUID and instance ids, or null.
const MigDeviceInfo* FindDevice(const Inventory& inv, const std::string& gpu,
                                const CreatedMigDevice& d) {
  for (const GpuInfo& g : inv.gpus) {
    if (g.uuid != gpu) continue;
    for (const MigDeviceInfo& m : g.mig_devices) {
      if (m.uuid == d.uuid && m.gi_id == d.gi_id && m.ci_id == d.ci_id) return &m;
    }
  }
  return nullptr;
}

Json ToJson(const MigInstance& i) {
  return {{"podUID", i.owner.pod_uid},
          {"containerIndex", i.owner.container_index},
          {"deviceIndex", i.owner.device_index},
          {"pod", i.pod},
          {"gpuUUID", i.gpu_uuid},
          {"profile", i.profile},
          {"placement", {{"start", i.placement.start}, {"size", i.placement.size}}},
          {"migUUID", i.device.uuid},
          {"gpuInstanceID", i.device.gi_id},
          {"computeInstanceID", i.device.ci_id}};
}

Result<MigInstance> FromJson(const Json& j, size_t n) {
  const std::string where = "instances[" + std::to_string(n) + "]";
  if (!j.is_object()) return InvalidArgumentError(where + ": expected an object");
  MigInstance i;
  try {
    i.owner.pod_uid = j.at("podUID").get<std::string>();
    i.owner.container_index = j.at("containerIndex").get<int32_t>();
    i.owner.device_index = j.at("deviceIndex").get<int32_t>();
    i.pod = j.value("pod", "");
    i.gpu_uuid = j.at("gpuUUID").get<std::string>();
    i.profile = j.at("profile").get<std::string>();
    i.placement.start = j.at("placement").at("start").get<uint32_t>();
    i.placement.size = j.at("placement").at("size").get<uint32_t>();
    i.device.uuid = j.at("migUUID").get<std::string>();
    i.device.gi_id = j.at("gpuInstanceID").get<uint32_t>();
    i.device.ci_id = j.at("computeInstanceID").get<uint32_t>();
  } catch (const Json::exception& e) {
    return InvalidArgumentError(where + ": " + e.what());
  }
  if (i.owner.pod_uid.empty() || i.gpu_uuid.empty() || i.device.uuid.empty() ||
      i.placement.size == 0) {
    return InvalidArgumentError(where + ": incomplete");
  }
  return i;
}

}  // namespace

std::string EncodeMigInstances(const std::vector<MigInstance>& instances) {
  Json list = Json::array();
  for (const MigInstance& i : instances) list.push_back(ToJson(i));
  return Json{{"instances", list}}.dump(1, ' ', false, Json::error_handler_t::replace) + "\n";
}

Result<std::vector<MigInstance>> DecodeMigInstances(const std::string& text) {
  Json doc = Json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (!doc.is_object() || !doc.contains("instances") || !doc["instances"].is_array()) {
    return InvalidArgumentError("expected {\"instances\":[...]}");
  }
  std::vector<MigInstance> out;
  std::set<MigOwner> owners;
  for (size_t n = 0; n < doc["instances"].size(); ++n) {
    HAMI_ASSIGN_OR_RETURN(MigInstance i, FromJson(doc["instances"][n], n));
    if (!owners.insert(i.owner).second) {
      return InvalidArgumentError("instances[" + std::to_string(n) + "]: owner repeated");
    }
    out.push_back(std::move(i));
  }
  return out;
}

MigInstances::MigInstances(MigDriver& driver, std::string state_file)
    : driver_(driver), state_file_(std::move(state_file)) {}

Status MigInstances::Load(const Inventory& inventory) {
  MutexLock l(mu_);
  table_.clear();
  if (state_file_.empty() || !std::filesystem::exists(state_file_)) {
    if (on_change_) on_change_({});
    return OkStatus();
  }
  Result<std::string> text = ReadFileToString(state_file_);
  if (!text.ok()) return InvalidArgumentError(state_file_ + ": " + text.status().message());
  Result<std::vector<MigInstance>> list = DecodeMigInstances(*text);
  if (!list.ok()) return InvalidArgumentError(state_file_ + ": " + list.status().message());
  for (MigInstance& i : *list) {
    if (FindDevice(inventory, i.gpu_uuid, i.device) == nullptr) {
      HAMI_LOG(Info) << "MIG device " << Describe(i) << " is gone; forgotten";
      continue;
    }
    table_[i.owner] = std::move(i);
  }
  HAMI_LOG(Info) << "dynamic MIG: " << table_.size() << " instance(s) known from " << state_file_;
  Save();
  return OkStatus();
}

int MigInstances::Adopt(const std::vector<MigInstance>& wanted, const Inventory& inventory) {
  MutexLock l(mu_);
  int adopted = 0;
  for (const MigInstance& w : wanted) {
    if (table_.count(w.owner)) continue;
    bool taken = std::any_of(table_.begin(), table_.end(),
                             [&](const auto& e) { return e.second.device.uuid == w.device.uuid; });
    if (taken || FindDevice(inventory, w.gpu_uuid, w.device) == nullptr) {
      HAMI_LOG(Warning) << "MIG device " << Describe(w) << " named by its pod "
                        << (taken ? "is another owner's" : "does not exist") << "; not adopted";
      continue;
    }
    table_[w.owner] = w;
    ++adopted;
    HAMI_LOG(Info) << "adopted MIG device " << Describe(w);
  }
  if (adopted > 0) Save();
  return adopted;
}

Result<const std::vector<MigProfileSpec>*> MigInstances::CachedProfiles(
    const std::string& gpu_uuid) {
  auto cached = profiles_.find(gpu_uuid);
  if (cached == profiles_.end()) {
    HAMI_ASSIGN_OR_RETURN(std::vector<MigProfileSpec> specs, driver_.MigProfiles(gpu_uuid));
    cached = profiles_.emplace(gpu_uuid, std::move(specs)).first;
  }
  return &cached->second;
}

Result<std::vector<MigProfileSpec>> MigInstances::Profiles(const std::string& gpu_uuid) {
  MutexLock l(mu_);
  HAMI_ASSIGN_OR_RETURN(const std::vector<MigProfileSpec>* specs, CachedProfiles(gpu_uuid));
  return *specs;
}

Result<uint32_t> MigInstances::ProfileId(const std::string& gpu_uuid, const std::string& profile,
                                         device::MigPlacement placement) {
  HAMI_ASSIGN_OR_RETURN(const std::vector<MigProfileSpec>* specs, CachedProfiles(gpu_uuid));
  for (const MigProfileSpec& p : *specs) {
    if (p.name != profile) continue;
    if (std::find(p.placements.begin(), p.placements.end(), placement) == p.placements.end()) {
      return FailedPreconditionError("profile " + profile + " cannot start at memory slice " +
                                     std::to_string(placement.start) + " (size " +
                                     std::to_string(placement.size) + ") on GPU " + gpu_uuid);
    }
    return p.profile_id;
  }
  return NotFoundError("GPU " + gpu_uuid + " has no MIG profile " + profile);
}

Result<MigInstance> MigInstances::Ensure(const MigOwner& owner, const std::string& pod,
                                         const std::string& gpu_uuid, const std::string& profile,
                                         device::MigPlacement placement, bool* created,
                                         const FinishedPod& finished) {
  MutexLock l(mu_);
  if (created != nullptr) *created = false;
  if (auto it = table_.find(owner); it != table_.end()) {
    if (SameReservation(it->second, gpu_uuid, profile, placement)) return it->second;
    return FailedPreconditionError("pod " + pod + " already holds MIG device " +
                                   Describe(it->second) + " for this container and device");
  }
  for (auto it = table_.begin(); it != table_.end();) {
    const MigInstance& inst = it->second;
    if (inst.gpu_uuid != gpu_uuid || !inst.placement.Overlaps(placement)) {
      ++it;
      continue;
    }
    if (!finished || !finished(inst)) {
      return FailedPreconditionError("the placement is still held by MIG device " +
                                     Describe(inst) + " of a running pod");
    }
    if (Status s = Destroy(inst); !s.ok()) {
      return FailedPreconditionError("the placement is still held by MIG device " +
                                     Describe(inst) + " of a finished pod: " + s.message());
    }
    made_at_.erase(it->first);
    it = table_.erase(it);
    Save();
  }
  HAMI_ASSIGN_OR_RETURN(MigModeState mode, driver_.GetMigMode(gpu_uuid));
  if (!mode.current) {
    return FailedPreconditionError("MIG is not enabled on GPU " + gpu_uuid +
                                   (mode.pending ? " (enabled after a GPU reset)" : ""));
  }
  HAMI_ASSIGN_OR_RETURN(uint32_t id, ProfileId(gpu_uuid, profile, placement));
  HAMI_ASSIGN_OR_RETURN(CreatedMigDevice made, driver_.CreateMigDevice(gpu_uuid, id, placement));
  MigInstance inst{owner, pod, gpu_uuid, profile, placement, made};
  table_[owner] = inst;
  made_at_[owner] = ++generation_;
  if (created != nullptr) *created = true;
  Save();
  HAMI_LOG(Info) << "created MIG device " << Describe(inst) << ", GPU instance " << made.gi_id
                 << ", compute instance " << made.ci_id;
  return inst;
}

Status MigInstances::Destroy(const MigInstance& inst) {
  Status s = driver_.DestroyMigDevice(inst.gpu_uuid, inst.device.gi_id, inst.device.ci_id);
  if (s.ok() || s.code() == StatusCode::kNotFound) {
    if (destroyed_.size() >= 4096) destroyed_.clear();
    destroyed_.insert(inst.device.uuid);
    HAMI_LOG(Info) << "destroyed MIG device " << Describe(inst)
                   << (s.ok() ? "" : " (it was already gone)");
    return OkStatus();
  }
  return s;
}

Status MigInstances::Release(const MigOwner& owner) {
  MutexLock l(mu_);
  auto it = table_.find(owner);
  if (it == table_.end()) return OkStatus();
  HAMI_RETURN_IF_ERROR(Destroy(it->second));
  made_at_.erase(it->first);
  table_.erase(it);
  Save();
  return OkStatus();
}

uint64_t MigInstances::Generation() const {
  MutexLock l(mu_);
  return generation_;
}

MigInstances::ReconcileResult MigInstances::Reconcile(const std::set<std::string>& active,
                                                      uint64_t as_of) {
  MutexLock l(mu_);
  ReconcileResult r;
  bool changed = false;
  for (auto it = table_.begin(); it != table_.end();) {
    const MigInstance& inst = it->second;
    auto made = made_at_.find(it->first);
    if (active.count(inst.owner.pod_uid) || (made != made_at_.end() && made->second > as_of)) {
      ++it;
      continue;
    }
    Status s = Destroy(inst);
    if (s.ok()) {
      reported_.erase(inst.device.uuid);
      made_at_.erase(it->first);
      it = table_.erase(it);
      ++r.destroyed;
      changed = true;
      continue;
    }
    bool in_use = s.message().find("in use") != std::string::npos;
    (in_use ? r.in_use : r.failed)
        .push_back(in_use ? inst.device.uuid : inst.device.uuid + ": " + s.message());
    if (reported_.insert(inst.device.uuid).second) {
      ::hami::log::Line(in_use ? log::Level::kInfo : log::Level::kWarning, __FILE__, __LINE__)
              .stream()
          << "MIG device " << Describe(inst) << " of a finished pod stays for now: "
          << s.message() << "; tried again at the next pass";
    }
    ++it;
  }
  if (changed) Save();
  return r;
}

std::vector<MigInstance> MigInstances::Snapshot() const {
  MutexLock l(mu_);
  std::vector<MigInstance> out;
  for (const auto& [o, inst] : table_) out.push_back(inst);
  return out;
}

std::vector<ForeignMig> MigInstances::Foreign(const Inventory& inventory) const {
  MutexLock l(mu_);
  std::set<std::string> owned;
  for (const auto& [o, inst] : table_) owned.insert(inst.device.uuid);
  std::vector<ForeignMig> out;
  for (const GpuInfo& g : inventory.gpus) {
    for (const MigDeviceInfo& m : g.mig_devices) {
      if (!owned.count(m.uuid) && !destroyed_.count(m.uuid)) out.push_back({g.uuid, m});
    }
  }
  return out;
}

void MigInstances::SetChangeListener(ChangeListener listener) { on_change_ = std::move(listener); }

void MigInstances::Save() {
  std::vector<MigInstance> list;
  for (const auto& [o, inst] : table_) list.push_back(inst);
  if (on_change_) on_change_(list);
  if (state_file_.empty()) return;
  if (Status s = WriteFileAtomically(state_file_, EncodeMigInstances(list)); !s.ok()) {
    HAMI_LOG(Error) << "cannot record the MIG devices in " << state_file_ << ": " << s.message()
                    << "; a restarted plugin will not know them";
  }
}

}  // namespace hami::deviceplugin
