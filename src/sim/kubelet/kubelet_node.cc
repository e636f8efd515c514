// Kubelet::Impl's node: registration (labels, capacity, addresses, the kubelet port), the node
// status with the device plugins' resources, and the Lease the heartbeat renews.
#include "sim/kubelet/kubelet_internal.h"

#include "k8s/api_error.h"

namespace hami::sim {

using kubelet_internal::Json;
using kubelet_internal::Now;

Status Kubelet::Impl::RegisterNode() {
  Json labels = {{"kubernetes.io/hostname", options_.node_name},
                 {"kubernetes.io/os", "linux"},
                 {"kubernetes.io/arch", "amd64"}};
  for (const auto& [k, v] : options_.labels) labels[k] = v;
  Json node = {{"apiVersion", "v1"},
               {"kind", "Node"},
               {"metadata", {{"name", options_.node_name}, {"labels", labels}}}};
  Result<Json> created = client_.Create(k8s::kNodes, "", node);
  if (!created.ok() && created.status().code() != StatusCode::kAlreadyExists) {
    return Status(created.status().code(),
                  "registering node " + options_.node_name + ": " + created.status().message());
  }
  if (!created.ok()) {
    Json patch = {{"metadata", {{"labels", labels}}}};
    Result<k8s::WriteAck> r =
        client_.PatchAck(k8s::kNodes, "", options_.node_name, k8s::PatchType::kMerge, patch.dump());
    if (!r.ok()) return r.status();
    // Device plugin resources an earlier run reported count 0 until their plugin registers
    // with this run, as kubelet does after a restart: no pod is admitted against them meanwhile.
    Result<Json> existing = k8s::GetNode(client_, options_.node_name);
    if (existing.ok() && existing->contains("status") &&
        (*existing)["status"].contains("capacity")) {
      for (const auto& [res, q] : (*existing)["status"]["capacity"].items()) {
        if (res.find('/') != std::string::npos && !options_.capacity.count(res)) {
          plugin_resources_.insert(res);
        }
      }
    }
  }
  return UpdateNodeStatus();
}

Status Kubelet::Impl::UpdateNodeStatus() {
  Json capacity = Json::object(), allocatable = Json::object();
  for (const auto& [k, v] : options_.capacity) capacity[k] = allocatable[k] = v;
  for (const std::string& res : plugin_resources_) capacity[res] = allocatable[res] = "0";
  for (const auto& [res, st] : devices_->Resources()) {
    capacity[res] = std::to_string(st.Capacity());
    allocatable[res] = std::to_string(st.Allocatable());
  }
  std::string now = Now();
  Json st;
  Json& s = st["status"];
  s["capacity"] = capacity;
  s["allocatable"] = allocatable;
  s["conditions"] = Json::array({{{"type", "Ready"},
                                  {"status", "True"},
                                  {"reason", "KubeletReady"},
                                  {"message", "hami-sim-kubelet is posting ready status"},
                                  {"lastHeartbeatTime", now},
                                  {"lastTransitionTime", start_time_}}});
  s["addresses"] = Json::array({{{"type", "InternalIP"}, {"address", options_.address}},
                                {{"type", "Hostname"}, {"address", options_.node_name}}});
  s["daemonEndpoints"]["kubeletEndpoint"]["Port"] = port_;
  s["nodeInfo"] = {{"kubeletVersion", "v1.32.0-hami-sim"},
                   {"operatingSystem", "linux"},
                   {"architecture", "amd64"},
                   {"containerRuntimeVersion", "hami-sim://1"}};
  Result<k8s::WriteAck> r = client_.PatchAck(k8s::kNodes, "", options_.node_name,
                                             k8s::PatchType::kMerge, st.dump(), "status");
  return r.status();
}

Status Kubelet::Impl::RenewLease() {
  const std::string ns = "kube-node-lease";
  Json lease = {{"apiVersion", "coordination.k8s.io/v1"},
                {"kind", "Lease"},
                {"metadata", {{"name", options_.node_name}, {"namespace", ns}}},
                {"spec",
                 {{"holderIdentity", options_.node_name},
                  {"leaseDurationSeconds", options_.lease_seconds},
                  {"renewTime", k8s::FormatMicroTime(std::chrono::system_clock::now())}}}};
  Result<Json> current = k8s::GetLease(client_, ns, options_.node_name);
  if (current.ok()) {
    (*current)["spec"] = lease["spec"];
    return k8s::UpdateLease(client_, ns, *current).status();
  }
  if (!k8s::IsNotFound(current.status())) return current.status();
  Json nsobj = {{"apiVersion", "v1"}, {"kind", "Namespace"}, {"metadata", {{"name", ns}}}};
  (void)client_.Create(k8s::kNamespaces, "", nsobj);
  return k8s::CreateLease(client_, ns, lease).status();
}

void Kubelet::Impl::HeartbeatLoop() {
  auto next = std::chrono::steady_clock::now() + options_.heartbeat;
  UniqueLock l(mu_);
  while (!stopping_) {
    cv_.wait_until(l.native(), next, [&]() REQUIRES(mu_) { return stopping_ || status_dirty_; });
    if (stopping_) break;
    bool beat = std::chrono::steady_clock::now() >= next;
    status_dirty_ = false;
    l.Unlock();
    if (Status s = UpdateNodeStatus(); !s.ok()) {
      HAMI_LOG(Warning) << "kubelet " << options_.node_name << ": node status: " << s.message();
      MutexLock g(mu_);
      status_dirty_ = true;  // try again at the next beat
    }
    if (beat) {
      if (Status s = RenewLease(); !s.ok()) {
        HAMI_LOG(Warning) << "kubelet " << options_.node_name << ": lease: " << s.message();
      }
    }
    l.Lock();
    if (beat) next = std::chrono::steady_clock::now() + options_.heartbeat;
    if (status_dirty_ && !beat) {
      // A failed write: wait for the beat instead of spinning.
      cv_.wait_until(l.native(), next, [&]() REQUIRES(mu_) { return stopping_; });
    }
  }
}

}  // namespace hami::sim
