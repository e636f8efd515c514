// Extender: kube-scheduler's HTTP client for one configured scheduler extender (the filter and
// bind verbs of the kube-scheduler/extender/v1 wire protocol).
//
//   HAMI_ASSIGN_OR_RETURN(auto ext, Extender::Create(config.extenders[0]));
//   if (ext->IsFilter() && ext->IsInterested(pod)) {
//     HAMI_ASSIGN_OR_RETURN(ExtenderFilterResult r, ext->Filter(pod, candidate_nodes));
//   }
//
// Wire behaviour, as kube-scheduler's extender client:
//   - Filter POSTs ExtenderArgs {"pod", "nodenames"} when nodeCacheCapable, else {"pod",
//     "nodes": {"items": [...]}}; the passing nodes are read from "nodenames" (nodeCacheCapable
//     and present) or "nodes.items". A returned name that was not offered is an error.
//   - Bind POSTs ExtenderBindingArgs {"podName", "podNamespace", "podUID", "node"}.
//   - A non-empty "error" in a result becomes an error whose message is exactly that text (it
//     ends up verbatim in the FailedScheduling event); HTTP statuses other than 200, transport
//     failures and undecodable bodies are errors too. Every call is bounded by httpTimeout.
//   - TLS: tlsConfig's CA/client certificate (files or data) are loaded at Create(). With
//     enableHTTPS and no CA, the server certificate is not verified (kube-scheduler does the
//     same). tlsConfig.serverName replaces the URL's host for verification and SNI.
//
// Thread safety: all methods may be called concurrently (the transport allows concurrent calls).
#pragma once

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "common/status.h"
#include "k8s/object_fwd.h"
#include "k8s/transport.h"
#include "sim/kubescheduler/config.h"

namespace hami::sim {

struct ExtenderFilterResult {
  std::vector<std::string> node_names;  // nodes that passed, in the extender's order
  std::map<std::string, std::string> failed_nodes;
  std::map<std::string, std::string> failed_and_unresolvable_nodes;
};

struct ExtenderBindingArgs {
  std::string pod_name;
  std::string pod_namespace;
  std::string pod_uid;
  std::string node;
};

class Extender {
 public:
  // Production extender on k8s::NewTransportFor (socket transport unless a proxy applies),
  // configured from `config`'s TLS settings (serverName included).
  static Result<std::unique_ptr<Extender>> Create(const ExtenderConfig& config);
  // Any transport (tests).
  Extender(ExtenderConfig config, std::unique_ptr<k8s::Transport> transport);
  Extender(const Extender&) = delete;
  Extender& operator=(const Extender&) = delete;

  const ExtenderConfig& config() const { return config_; }
  // The urlPrefix, used to name the extender in logs and errors.
  const std::string& name() const { return config_.url_prefix; }
  bool IsFilter() const { return !config_.filter_verb.empty(); }
  bool IsBinder() const { return !config_.bind_verb.empty(); }
  bool IsIgnorable() const { return config_.ignorable; }
  // True when the extender manages no resources, or when some container or init container of
  // `pod` requests or limits one of its managed resources.
  bool IsInterested(const k8s::Object& pod) const;

  // `nodes` are the candidate Node objects (non-null).
  Result<ExtenderFilterResult> Filter(const k8s::Object& pod,
                                      const std::vector<k8s::ObjectPtr>& nodes);
  Status Bind(const ExtenderBindingArgs& args);

 private:
  // POSTs `body` to <urlPrefix>/<verb> and returns the decoded JSON object of a 200 answer.
  Result<k8s::Object> Post(const std::string& verb, std::string body);

  const ExtenderConfig config_;
  const std::unique_ptr<k8s::Transport> transport_;
};

}  // namespace hami::sim
