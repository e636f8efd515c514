#include "deviceplugin/mig_controller.h"

#include "common/log.h"
#include "common/thread_name.h"
#include "device/mig_allocation.h"
#include "k8s/object.h"
#include "k8s/typed.h"

namespace hami::deviceplugin {

namespace {

constexpr const char* kPassKey = "reconcile";

// A pod whose MIG devices may still be in use: not finished and not being deleted.
bool NeedsItsDevices(const k8s::Object& pod) {
  std::string phase = k8s::GetString(pod, "/status/phase");
  if (phase == "Succeeded" || phase == "Failed") return false;
  return k8s::GetString(pod, "/metadata/deletionTimestamp").empty();
}

}  // namespace

MigController::MigController(k8s::RestClient& client, GpuDriver& driver, MigInstances& instances,
                             MigControllerOptions options, hami::Clock& clock)
    : client_(client), driver_(driver), instances_(instances), options_(std::move(options)),
      queue_(clock) {}

MigController::~MigController() { Stop(); }

Result<std::set<std::string>> MigController::ActivePods(std::vector<MigInstance>* named) {
  k8s::ListOptions opts;
  opts.field_selector = "spec.nodeName=" + options_.node_name;
  Result<k8s::Object> list = k8s::ListPods(client_, "", opts);
  if (!list.ok()) return list.status();
  std::set<std::string> active;
  auto items = list->find("items");
  if (items == list->end() || !items->is_array()) return active;
  for (const k8s::Object& pod : *items) {
    if (!NeedsItsDevices(pod)) continue;
    const std::string uid = k8s::Uid(pod);
    active.insert(uid);
    std::string text = k8s::GetString(
        pod, "/metadata/annotations/" + std::string("hami.io~1vgpu-mig-allocations"));
    if (named == nullptr || text.empty()) continue;
    const std::string key = k8s::Namespace(pod) + "/" + k8s::Name(pod);
    Result<std::vector<device::MigAllocation>> allocs = device::DecodeMigAllocations(text);
    if (!allocs.ok()) {
      HAMI_LOG(Warning) << "pod " << key << ": " << device::kMigAllocationsAnnotation
                        << " cannot be read (" << allocs.status().message()
                        << "); its MIG devices are not adopted";
      continue;
    }
    for (const device::MigAllocation& a : *allocs) {
      if (!a.runtime) continue;  // not made yet: Allocate will
      named->push_back({{uid, a.container_index, a.device_index},
                        key,
                        a.gpu_uuid,
                        a.profile,
                        a.placement,
                        {a.runtime->mig_uuid, a.runtime->gpu_instance_id,
                         a.runtime->compute_instance_id}});
    }
  }
  return active;
}

Status MigController::Prepare() {
  Result<Inventory> inv = driver_.Discover();
  if (!inv.ok()) return Status(inv.status().code(), "GPU discovery: " + inv.status().message());
  if (Status s = instances_.Load(*inv); !s.ok()) {
    HAMI_LOG(Error) << s.message() << "; starting with no MIG device known to be ours";
  }
  std::vector<MigInstance> named;
  Result<std::set<std::string>> active = ActivePods(&named);
  if (!active.ok()) {
    HAMI_LOG(Warning) << "cannot list the pods of node " << options_.node_name << " ("
                      << active.status().message() << "); no MIG device adopted";
    return OkStatus();
  }
  int adopted = instances_.Adopt(named, *inv);
  HAMI_LOG(Info) << "dynamic MIG on node " << options_.node_name << ": "
                 << instances_.Snapshot().size() << " MIG device(s) owned by pods (" << adopted
                 << " adopted from pod annotations)";
  return OkStatus();
}

void MigController::Start(Drive drive) {
  queue_.Add(kPassKey);
  if (drive == Drive::kSteps) return;
  worker_ = std::thread([this] {
    SetCurrentThreadName("mig-reconcile");
    std::string key;
    while (queue_.Get(&key)) {
      Pass();
      queue_.Done(key);
      queue_.AddAfter(kPassKey, options_.interval);
    }
  });
}

void MigController::Stop() {
  queue_.ShutDown();
  if (worker_.joinable()) worker_.join();
}

bool MigController::Step() {
  std::string key;
  if (!queue_.TryGet(&key)) return false;
  Pass();
  queue_.Done(key);
  queue_.AddAfter(kPassKey, options_.interval);
  return true;
}

void MigController::Poke() { queue_.Add(kPassKey); }

void MigController::Pass() {
  const uint64_t as_of = instances_.Generation();  // before the list: see Reconcile
  Result<std::set<std::string>> active = ActivePods(nullptr);
  if (!active.ok()) {
    HAMI_VLOG(2) << "MIG reconcile skipped: cannot list the pods of node " << options_.node_name
                 << ": " << active.status().message();
    MutexLock l(mu_);
    ++stats_.failed_lists;
    return;
  }
  MigInstances::ReconcileResult r = instances_.Reconcile(*active, as_of);
  MutexLock l(mu_);
  ++stats_.passes;
  stats_.destroyed += static_cast<uint64_t>(r.destroyed);
}

MigController::Stats MigController::stats() const {
  MutexLock l(mu_);
  return stats_;
}

}  // namespace hami::deviceplugin
