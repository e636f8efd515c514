// InformerPodDirectory: the monitor's PodDirectory backed by a pod informer restricted to this
// node (field selector spec.nodeName=<node>), indexed by UID, keeping only names and the MIG
// allocations annotation.
//
// Thread safety: Synced/Find/MigPods from any thread; Start/Stop from the owning thread.
#pragma once

#include <map>
#include <memory>
#include <mutex>
#include <string>

#include "common/thread_annotations.h"
#include "k8s/informer.h"
#include "monitor/monitor.h"

namespace hami::monitor {

class InformerPodDirectory : public PodDirectory {
 public:
  InformerPodDirectory(k8s::RestClient& client, const std::string& node);
  ~InformerPodDirectory() override;
  void Start() { informer_->Start(); }
  void Stop() { informer_->Stop(); }

  bool Synced() const override { return informer_->HasSynced(); }
  std::optional<PodRef> Find(const std::string& uid) const override;
  std::map<std::string, PodRef> MigPods() const override;

 private:
  void Put(const k8s::ObjectPtr& pod);
  void Drop(const k8s::ObjectPtr& pod);

  std::unique_ptr<k8s::Informer> informer_;
  mutable Mutex mu_;
  std::map<std::string, PodRef> by_uid_ GUARDED_BY(mu_);
};

// The pod reduced to what the monitor reads (name, namespace, uid, the names of its containers
// and init containers, hami.io/vgpu-mig-allocations).
k8s::Object TrimPodForMonitor(const k8s::Object& pod);
// What the monitor keeps of a pod; malformed fields read as absent.
PodRef PodRefOf(const k8s::Object& pod);

}  // namespace hami::monitor
