// Kubelet::Impl's pods: the informer's callbacks for the pods bound to the node, the admission
// queue, and the stop of deleted and terminating pods (with the reapers that clean up after).
#include "sim/kubelet/kubelet_internal.h"

#include <filesystem>

#include "k8s/api_error.h"

namespace hami::sim {

using kubelet_internal::Json;

void Kubelet::Impl::OnPod(const k8s::ObjectPtr& pod) {
  std::string phase = k8s::GetString(*pod, "/status/phase");
  std::string uid = k8s::Uid(*pod);
  if (!k8s::GetString(*pod, "/metadata/deletionTimestamp").empty()) return OnTerminating(pod);
  {
    MutexLock l(mu_);
    if (workers_.count(uid) || phase == "Succeeded" || phase == "Failed") return;
  }
  if (phase == "Running") {
    // Admitted by an earlier run of this kubelet, whose containers ended with it: a simulated
    // node keeps no container state across its own restarts.
    Json st;
    st["status"] = {{"phase", "Failed"},
                    {"reason", "NodeRestarted"},
                    {"message", "the simulated kubelet restarted and its containers stopped"}};
    (void)client_.PatchAck(k8s::kPods, k8s::Namespace(*pod), k8s::Name(*pod),
                           k8s::PatchType::kMerge, st.dump(), "status");
    return;
  }
  MutexLock l(mu_);
  if (stopping_ || workers_.count(uid)) return;
  auto w = std::make_shared<PodWorker>(*this, pod);
  workers_[uid] = w;
  uid_of_[k8s::ObjectKey(*pod)] = uid;
  admit_queue_.push_back(pod);
  cv_.notify_all();
}

void Kubelet::Impl::OnTerminating(const k8s::ObjectPtr& pod) {
  // Graceful deletion, as the API server does it: the pod stays, with a deletionTimestamp, until
  // its node says its containers are gone by deleting it with no grace period. Until then its
  // devices stay its own.
  std::string uid = k8s::Uid(*pod);
  std::shared_ptr<PodWorker> w;
  {
    MutexLock l(mu_);
    if (stopping_ || terminating_.count(uid)) return;
    terminating_.insert(uid);
    auto it = workers_.find(uid);
    if (it != workers_.end()) {
      w = it->second;
      workers_.erase(it);
      uid_of_.erase(k8s::ObjectKey(*pod));
    }
  }
  std::string ns = k8s::Namespace(*pod), name = k8s::Name(*pod);
  int64_t grace = k8s::GetInt(*pod, "/metadata/deletionGracePeriodSeconds", -1);
  HAMI_LOG(Info) << "kubelet " << options_.node_name << ": pod " << ns << "/" << name
                 << " is terminating: stopping its containers"
                 << (grace >= 0 ? " (grace " + std::to_string(grace) + " s)" : "");
  if (w) w->Kill(grace);
  MutexLock l(mu_);
  reapers_.emplace_back([this, w, uid, ns, name, dir = options_.root_dir + "/pods/" + uid] {
    if (w) w->Join();
    std::error_code ec;
    std::filesystem::remove_all(dir, ec);
    k8s::DeleteOptions gone;
    gone.grace_period_seconds = 0;
    gone.precondition_uid = uid;
    Status s = client_.Delete(k8s::kPods, ns, name, gone);
    if (!s.ok() && s.code() != StatusCode::kNotFound && !k8s::IsConflict(s)) {
      HAMI_LOG(Warning) << "kubelet " << options_.node_name << ": removing terminated pod " << ns
                        << "/" << name << ": " << s.message();
    } else {
      HAMI_LOG(Info) << "kubelet " << options_.node_name << ": pod " << ns << "/" << name
                     << " terminated: its containers are gone";
    }
  });
}

void Kubelet::Impl::OnDelete(const k8s::ObjectPtr& pod) {
  std::shared_ptr<PodWorker> w;
  {
    MutexLock l(mu_);
    terminating_.erase(k8s::Uid(*pod));
    auto it = workers_.find(k8s::Uid(*pod));
    if (it == workers_.end()) return;
    w = it->second;
    workers_.erase(it);
    uid_of_.erase(k8s::ObjectKey(*pod));
  }
  HAMI_LOG(Info) << "kubelet " << options_.node_name << ": pod " << w->Key()
                 << " deleted: stopping its containers";
  w->Kill();
  // The worker finishes on its own thread; a reaper joins it so the informer is not held.
  MutexLock l(mu_);
  reapers_.emplace_back([w, dir = options_.root_dir + "/pods/" + w->uid()] {
    w->Join();
    std::error_code ec;
    std::filesystem::remove_all(dir, ec);
  });
}

void Kubelet::Impl::AdmitLoop() {
  for (;;) {
    k8s::ObjectPtr pod;
    std::shared_ptr<PodWorker> w;
    {
      UniqueLock l(mu_);
      cv_.wait(l.native(), [&]() REQUIRES(mu_) { return stopping_ || !admit_queue_.empty(); });
      if (stopping_) return;
      pod = admit_queue_.front();
      admit_queue_.pop_front();
      auto it = workers_.find(k8s::Uid(*pod));
      if (it == workers_.end()) continue;  // deleted before admission
      w = it->second;
    }
    w->Admit();
  }
}

std::shared_ptr<PodWorker> Kubelet::Impl::WorkerOf(const std::string& ns,
                                                   const std::string& name) {
  MutexLock l(mu_);
  auto uid = uid_of_.find(ns + "/" + name);
  if (uid == uid_of_.end()) return nullptr;
  auto it = workers_.find(uid->second);
  return it == workers_.end() ? nullptr : it->second;
}

}  // namespace hami::sim
