#include "k8s/leader_election.h"

#include "k8s/api_error.h"
#include "k8s/object.h"

namespace hami::k8s {

LeaderElector::LeaderElector(RestClient& client, LeaderElectionConfig config,
                             LeaderCallbacks callbacks)
    : client_(client), config_(std::move(config)), callbacks_(std::move(callbacks)) {}

std::string LeaderElector::Holder() const {
  MutexLock lock(mu_);
  return observed_holder_;
}

void LeaderElector::Observe(const std::string& holder, const std::string& renew_time) {
  bool holder_changed;
  {
    MutexLock lock(mu_);
    holder_changed = holder != observed_holder_;
    if (holder_changed || renew_time != observed_renew_ || observed_at_ == MonoTime{}) {
      observed_holder_ = holder;
      observed_renew_ = renew_time;
      observed_at_ = client_.clock().Now();
    }
  }
  if (holder_changed && !holder.empty() && callbacks_.on_new_leader)
    callbacks_.on_new_leader(holder);
}

Result<LeaderElector::Observation> LeaderElector::Follow() {
  HAMI_ASSIGN_OR_RETURN(Object lease, client_.Get(kLeases, config_.ns, config_.name));
  Observation out;
  out.holder = GetString(lease, "/spec/holderIdentity");
  Observe(out.holder, GetString(lease, "/spec/renewTime"));
  const int64_t duration =
      GetInt(lease, "/spec/leaseDurationSeconds", config_.lease_duration.count());
  MonoTime observed_at;
  {
    MutexLock lock(mu_);
    observed_at = observed_at_;
  }
  out.fresh = client_.clock().Now() - observed_at <= std::chrono::seconds(duration);
  return out;
}

Result<bool> LeaderElector::TryAcquireOrRenew() {
  Clock& clock = client_.clock();
  std::string now = FormatMicroTime(clock.WallNow());
  const int64_t duration = config_.lease_duration.count();

  Result<Object> got = client_.Get(kLeases, config_.ns, config_.name);
  if (!got.ok() && !IsNotFound(got.status())) return got.status();
  if (!got.ok()) {
    Object lease = {{"apiVersion", "coordination.k8s.io/v1"},
                    {"kind", "Lease"},
                    {"metadata", {{"name", config_.name}, {"namespace", config_.ns}}},
                    {"spec",
                     {{"holderIdentity", config_.identity},
                      {"leaseDurationSeconds", duration},
                      {"acquireTime", now},
                      {"renewTime", now},
                      {"leaseTransitions", 0}}}};
    Result<Object> created = client_.Create(kLeases, config_.ns, lease);
    if (!created.ok()) {
      if (IsAlreadyExists(created.status()) || IsConflict(created.status())) return false;
      return created.status();
    }
    Observe(config_.identity, now);
    return true;
  }

  Object lease = std::move(*got);
  std::string holder = GetString(lease, "/spec/holderIdentity");
  std::string renew = GetString(lease, "/spec/renewTime");
  Observe(holder, renew);
  int64_t their_duration = GetInt(lease, "/spec/leaseDurationSeconds", duration);
  if (!holder.empty() && holder != config_.identity) {
    MonoTime observed_at;
    {
      MutexLock lock(mu_);
      observed_at = observed_at_;
    }
    if (clock.Now() < observed_at + std::chrono::seconds(their_duration)) return false;
  }
  if (!lease["spec"].is_object()) lease["spec"] = Object::object();
  Object& spec = lease["spec"];
  if (holder != config_.identity) {
    spec["acquireTime"] = now;
    spec["leaseTransitions"] =
        GetInt(lease, "/spec/leaseTransitions", 0) + (holder.empty() ? 0 : 1);
  }
  spec["holderIdentity"] = config_.identity;
  spec["leaseDurationSeconds"] = duration;
  spec["renewTime"] = now;
  Result<Object> updated = client_.Update(kLeases, config_.ns, lease);
  if (!updated.ok()) {
    if (IsConflict(updated.status())) return false;
    return updated.status();
  }
  Observe(config_.identity, now);
  return true;
}

Status LeaderElector::Release() {
  if (!leader_.load()) return OkStatus();
  Result<Object> got = client_.Get(kLeases, config_.ns, config_.name);
  if (!got.ok()) return got.status();
  Object lease = std::move(*got);
  if (GetString(lease, "/spec/holderIdentity") != config_.identity) {
    leader_ = false;
    return OkStatus();
  }
  std::string now = FormatMicroTime(client_.clock().WallNow());
  lease["spec"]["holderIdentity"] = "";
  lease["spec"]["leaseDurationSeconds"] = 1;
  lease["spec"]["renewTime"] = now;
  Result<Object> updated = client_.Update(kLeases, config_.ns, lease);
  if (!updated.ok()) return updated.status();
  leader_ = false;
  return OkStatus();
}

void LeaderElector::Run(const Cancellation& cancel) {
  Clock& clock = client_.clock();
  // Acquire.
  while (!cancel.cancelled()) {
    Result<bool> r = TryAcquireOrRenew();
    if (r.ok() && *r) break;
    if (clock.Sleep(config_.retry_period, &cancel)) return;
  }
  if (cancel.cancelled()) return;
  leader_ = true;
  if (callbacks_.on_started_leading) callbacks_.on_started_leading();
  // Renew until a renewal has failed for renew_deadline, or cancellation.
  MonoTime last_renew = clock.Now();
  while (true) {
    if (clock.Sleep(config_.retry_period, &cancel)) break;
    Result<bool> r = TryAcquireOrRenew();
    if (r.ok() && *r) {
      last_renew = clock.Now();
      continue;
    }
    if (clock.Now() - last_renew >= config_.renew_deadline) break;
  }
  if (cancel.cancelled() && config_.release_on_cancel) {
    (void)Release();
  }
  leader_ = false;
  if (callbacks_.on_stopped_leading) callbacks_.on_stopped_leading();
}

}  // namespace hami::k8s
