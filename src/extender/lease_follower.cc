// LeaseFollower (see lease_follower.h).
#include "extender/lease_follower.h"

#include <nlohmann/json.hpp>

#include "common/log.h"
#include "k8s/api_error.h"

namespace hami::extender {

LeaseFollower::LeaseFollower(k8s::RestClient& client, const Clock& clock,
                             LeaseFollowerOptions options, std::function<void(bool)> on_change)
    : client_(client),
      options_(std::move(options)),
      on_change_(std::move(on_change)),
      leader_(!options_.enabled),
      queue_(clock) {
  if (!options_.enabled) return;
  k8s::LeaderElectionConfig lease;
  lease.ns = options_.lease_namespace;
  lease.name = options_.lease_name;
  lease.identity = options_.identity;
  lease_ = std::make_unique<k8s::LeaderElector>(client_, lease);
}

LeaseFollower::~LeaseFollower() { Stop(); }

void LeaseFollower::Start() {
  if (!lease_ || worker_.joinable()) return;
  queue_.Add("lease");
  worker_ = std::thread([this] { Run(); });
}

void LeaseFollower::Stop() {
  queue_.ShutDown();
  if (worker_.joinable()) worker_.join();
}

void LeaseFollower::Run() {
  queue_.Serve([this](const std::string&) { FollowOnce(); });
}

void LeaseFollower::FollowOnce() {
  if (!lease_) return;
  // The next read is due `poll` after this one began (queued before acting on this one, so
  // whoever sees the outcome also finds the next read already on the queue).
  queue_.AddAfter("lease", options_.poll);
  Result<k8s::LeaderElector::Observation> seen = lease_->Follow();
  if (!seen.ok()) {
    if (!k8s::IsNotFound(seen.status())) {
      HAMI_VLOG(2) << "lease read failed: " << seen.status().ToString();
    }
    SetLeader(false);
    return;
  }
  const bool ours = !options_.identity.empty() && seen->holder.rfind(options_.identity, 0) == 0;
  SetLeader(ours && seen->fresh);
}

void LeaseFollower::SetLeader(bool leader) {
  if (leader_.exchange(leader) == leader) return;
  HAMI_LOG(Info) << (leader ? "became leader" : "lost leadership") << " (lease "
                 << options_.lease_namespace << "/" << options_.lease_name << ")";
  if (on_change_) on_change_(leader);
  if (options_.pod_name.empty() || options_.pod_namespace.empty()) return;
  nlohmann::json patch;
  patch["metadata"]["labels"]["hami.io/scheduler-role"] = leader ? "leader" : "follower";
  Result<k8s::Object> r = client_.Patch(k8s::kPods, options_.pod_namespace, options_.pod_name,
                                        k8s::PatchType::kMerge, patch.dump());
  if (!r.ok()) HAMI_LOG(Warning) << "scheduler-role label: " << r.status().ToString();
}

}  // namespace hami::extender
