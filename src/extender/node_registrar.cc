// NodeRegistrar (see node_registrar.h).
#include "extender/node_registrar.h"

#include <optional>

#include "common/log.h"
#include "device/handshake.h"
#include "extender/k8s_objects.h"
#include "extender/service_internal.h"
#include "k8s/object.h"
#include "k8s/typed.h"

namespace hami::extender {

using scheduler::AssumeCache;
using service_internal::LocalOffsetSeconds;

NodeRegistrar::NodeRegistrar(k8s::RestClient& client, const Clock& clock,
                             const device::VendorRegistry& vendors, AssumeCache& cache,
                             NodeRegistrarOptions options, std::function<bool()> is_leader,
                             std::function<void()> on_pass)
    : client_(client),
      clock_(clock),
      vendors_(vendors),
      cache_(cache),
      options_(options),
      is_leader_(std::move(is_leader)),
      on_pass_(std::move(on_pass)),
      queue_(clock) {}

NodeRegistrar::~NodeRegistrar() { Stop(); }

void NodeRegistrar::Start(k8s::Informer& nodes) {
  if (worker_.joinable()) return;
  nodes_ = &nodes;
  queue_.Add("resync");
  worker_ = std::thread([this] { Run(); });
}

void NodeRegistrar::Stop() {
  stop_.Cancel();
  queue_.ShutDown();
  if (worker_.joinable()) worker_.join();
}

void NodeRegistrar::NodeChanged(const std::string& name) { queue_.Add("node/" + name); }

void NodeRegistrar::NodeDeleted(const std::string& name) {
  cache_.RemoveNode(name);
  {
    MutexLock l(state_mu_);
    state_.erase(name);
  }
  HAMI_LOG(Info) << "node " << name << ": deleted, no longer scheduled";
  if (on_pass_) on_pass_();
}

void NodeRegistrar::LeaderChanged(bool leader) {
  if (leader) {
    queue_.Add("resync");
  } else {
    registered_once_.store(false);
  }
}

void NodeRegistrar::Run() {
  // Nodes are judged against the node list: nothing runs before it is complete.
  if (!nodes_->WaitForSync(&stop_)) return;
  queue_.Serve([this](const std::string& key) { Process(key); });
}

void NodeRegistrar::Process(const std::string& key) {
  if (key == "resync") return Resync();
  if (key.rfind("node/", 0) == 0) {
    // Until the first full pass (and while following), the next full pass sees the node.
    if (!is_leader_() || !registered_once_.load()) return;
    if (k8s::ObjectPtr n = nodes_->Get(key.substr(5))) ReconcileNode(*n);
    if (on_pass_) on_pass_();
    return;
  }
  HAMI_LOG(Error) << "node registrar: unknown key " << key;
}

// A full registration pass, then again every register_interval while leading.
void NodeRegistrar::Resync() {
  if (!is_leader_()) {
    registered_once_.store(false);  // becoming leader queues the next pass
    return;
  }
  if (!nodes_->HasSynced()) {
    queue_.AddAfter("resync", std::chrono::milliseconds(100));
    return;
  }
  ReconcileNodes();
  if (!registered_once_.exchange(true)) HAMI_LOG(Info) << "registration pass done: scheduler ready";
  if (on_pass_) on_pass_();
  queue_.AddAfter("resync", options_.register_interval);
}

void NodeRegistrar::ReconcileNodes() {
  if (nodes_ == nullptr) return;
  for (const k8s::ObjectPtr& n : nodes_->List()) ReconcileNode(*n);
  const size_t expired = cache_.ExpireReservations();
  if (expired > 0) HAMI_LOG(Info) << expired << " reservations expired (pods never bound)";
}

bool NodeRegistrar::JudgeVendor(const device::Vendor& vendor, const NodeReading& at,
                                VendorNodeState& vs, NodeVerdict& verdict) {
  const device::VendorAnnotationKeys& keys = vendor.annotation_keys();
  const std::string count_res(vendor.registration_capacity().empty()
                                  ? std::string_view(vendor.resource_names().count)
                                  : vendor.registration_capacity());
  const int64_t alloc = NodeAllocatable(at.node, count_res);
  std::string hs_value;
  if (auto h = at.annos.find(keys.node_handshake); h != at.annos.end()) hs_value = h->second;
  bool healthy = true;
  std::string vendor_why;
  device::Handshake hs = device::DecodeHandshake(hs_value);
  if (keys.node_handshake.empty()) {
    // No handshake protocol (capacity vendors): allocatable alone tells.
  } else if (hs.state == device::HandshakeState::kRequesting) {
    int64_t age = 0;
    if (hs.time) age = at.now - device::CivilToUnix(*hs.time, LocalOffsetSeconds(at.now));
    if (age > options_.handshake_grace.count() && alloc <= 0) {
      healthy = false;
      vendor_why = "handshake " + hs_value + " unanswered for " + std::to_string(age) +
                   " s and allocatable " + count_res + " is 0";
    }
  } else {
    verdict.writes[keys.node_handshake] = device::EncodeHandshakeRequesting(
        device::UnixToCivil(at.now, LocalOffsetSeconds(at.now)));
  }
  // Allocatable tracking: a device plugin that went away zeroes the count.
  const bool lost = alloc <= 0 && (vs.allocatable > 0 || vs.plugin_lost);
  if (lost) {
    healthy = false;
    vendor_why = "allocatable " + count_res + " dropped to 0 (device plugin gone?)";
  }
  vs.allocatable = alloc;
  vs.plugin_lost = lost;
  if (healthy) return true;
  verdict.why = vendor_why;
  // Its devices leave the ledger.
  if (std::string_view res = vendor.registration_capacity(); !res.empty()) {
    verdict.obj.capacity.erase(std::string(res));
  } else {
    verdict.obj.annotations.erase(keys.node_register);
  }
  verdict.writes.erase(keys.node_handshake);
  if (vs.in_ledger) {
    HAMI_LOG(Warning) << "node " << k8s::Name(at.node) << ": " << vendor.Key()
                      << " devices removed from scheduling: " << vendor_why;
    // Ask its device plugin to register again.
    if (!keys.node_handshake.empty()) verdict.writes[keys.node_handshake] = std::nullopt;
  }
  vs.in_ledger = false;
  return false;
}

void NodeRegistrar::ReconcileNode(const k8s::Object& node) {
  const std::string name = k8s::Name(node);
  const device::Annotations annos = AnnotationsOf(node);
  const NodeReading at{node, annos, clock_.NowUnixSeconds()};
  // Only the worker writes a node's state (NodeDeleted erases it): read it once, write it back
  // once.
  NodeState state;
  {
    MutexLock l(state_mu_);
    state = state_[name];
  }
  // Each vendor of the node is judged on its own (registration, handshake, allocatable): one
  // whose device plugin is gone leaves the ledger, the node's other vendors stay.
  NodeVerdict verdict{NodeObjectOf(node), {}, {}};
  bool healthy_any = false;
  for (const auto& vendor : vendors_.vendors()) {
    const std::string key(vendor->Key());
    if (!device::VendorPresentOn(*vendor, device::NodeView{name, annos, verdict.obj.capacity})) {
      state.vendors.erase(key);
      continue;
    }
    healthy_any |= JudgeVendor(*vendor, at, state.vendors[key], verdict);
  }
  Apply(name, healthy_any, state, verdict);
  {
    MutexLock l(state_mu_);
    state_[name] = state;
  }
  if (verdict.writes.empty()) return;
  Result<k8s::WriteAck> r = k8s::PatchNodeAnnotations(client_, name, verdict.writes);
  if (!r.ok()) {
    HAMI_LOG(Warning) << "node " << name << ": handshake not written: " << r.status().ToString();
  }
}

void NodeRegistrar::Apply(const std::string& name, bool healthy_any, NodeState& state,
                          NodeVerdict& verdict) {
  if (healthy_any) {
    bool registered;  // some vendor's devices are in (a broken one leaves only its own out)
    Status s = cache_.UpsertNode(verdict.obj, &registered);
    if (!s.ok()) {
      HAMI_LOG(Warning) << "node " << name << ": registration not usable: " << s.message();
    }
    if (registered && !state.in_ledger) {
      HAMI_LOG(Info) << "node " << name << ": registered for scheduling";
    }
    state.in_ledger = registered;
    const device::NodeView view{name, verdict.obj.annotations, verdict.obj.capacity};
    for (auto& [key, vs] : state.vendors) {
      vs.in_ledger = registered && device::VendorPresentOn(*vendors_.Find(key), view);
    }
  } else if (state.in_ledger || !verdict.why.empty()) {
    cache_.RemoveNode(name);
    if (state.in_ledger) {
      HAMI_LOG(Warning) << "node " << name << ": removed from scheduling: "
                        << (verdict.why.empty() ? "no device registration" : verdict.why);
      for (const auto& vendor : vendors_.vendors()) {  // ask the device plugins to register again
        const std::string& hs_key = vendor->annotation_keys().node_handshake;
        if (!hs_key.empty()) verdict.writes[hs_key] = std::nullopt;
      }
    }
    state.in_ledger = false;
  }
}

}  // namespace hami::extender
