#include "sim/kubescheduler/extender.h"

#include <strings.h>

#include <set>

#include "common/file_util.h"
#include "k8s/config.h"
#include "k8s/object.h"
#include "k8s/socket_transport.h"

namespace hami::sim {
namespace {

using k8s::Object;

// Reads a {"name": "reason"} map; anything else (null, missing) yields an empty map.
// A member of an extender's answer by its Go field name, matched without regard to ASCII case
// as kube-scheduler's Go decoder matches it ("nodenames" and "NodeNames" alike); end() if none.
Object::const_iterator Member(const Object& result, std::string_view name) {
  for (auto it = result.begin(); it != result.end(); ++it) {
    const std::string& key = it.key();
    if (key.size() == name.size() && ::strncasecmp(key.data(), name.data(), key.size()) == 0) {
      return it;
    }
  }
  return result.end();
}

std::string MemberString(const Object& result, std::string_view name) {
  auto it = Member(result, name);
  return it != result.end() && it->is_string() ? it->get<std::string>() : std::string();
}

Result<std::map<std::string, std::string>> ReasonMap(const Object& result, const char* key) {
  std::map<std::string, std::string> out;
  auto it = Member(result, key);
  if (it == result.end() || it->is_null()) return out;
  if (!it->is_object()) return DataLossError(std::string(key) + " is not an object");
  for (const auto& [node, reason] : it->items()) {
    out[node] = reason.is_string() ? reason.get<std::string>() : reason.dump();
  }
  return out;
}

bool RequestsAny(const Object& containers, const std::set<std::string>& names) {
  if (!containers.is_array()) return false;
  for (const Object& c : containers) {
    if (!c.is_object()) continue;
    auto res = c.find("resources");
    if (res == c.end() || !res->is_object()) continue;
    for (const char* part : {"requests", "limits"}) {
      auto list = res->find(part);
      if (list == res->end() || !list->is_object()) continue;
      for (const auto& [name, qty] : list->items()) {
        if (names.count(name) > 0) return true;
      }
    }
  }
  return false;
}

}  // namespace

Result<std::unique_ptr<Extender>> Extender::Create(const ExtenderConfig& config) {
  k8s::TlsConfig client;
  const ExtenderTlsConfig& tls = config.tls;
  client.insecure_skip_verify = tls.insecure;
  client.ca_pem = tls.ca_data;
  if (client.ca_pem.empty() && !tls.ca_file.empty()) {
    HAMI_ASSIGN_OR_RETURN(client.ca_pem, hami::ReadFileToString(tls.ca_file));
  }
  client.client_cert_pem = tls.cert_data;
  if (client.client_cert_pem.empty() && !tls.cert_file.empty()) {
    HAMI_ASSIGN_OR_RETURN(client.client_cert_pem, hami::ReadFileToString(tls.cert_file));
  }
  client.client_key_pem = tls.key_data;
  if (client.client_key_pem.empty() && !tls.key_file.empty()) {
    HAMI_ASSIGN_OR_RETURN(client.client_key_pem, hami::ReadFileToString(tls.key_file));
  }
  if (config.enable_https && client.ca_pem.empty()) client.insecure_skip_verify = true;
  // Verified against and sent as SNI instead of the URL's host.
  client.server_name = tls.server_name;
  // Connecting is part of the call budget, as with Go's http.Client timeout.
  HAMI_ASSIGN_OR_RETURN(std::unique_ptr<k8s::Transport> transport,
                        k8s::NewTransportFor(config.url_prefix, client, config.http_timeout));
  return std::make_unique<Extender>(config, std::move(transport));
}

Extender::Extender(ExtenderConfig config, std::unique_ptr<k8s::Transport> transport)
    : config_(std::move(config)), transport_(std::move(transport)) {}

bool Extender::IsInterested(const Object& pod) const {
  if (config_.managed_resources.empty()) return true;
  std::set<std::string> names;
  for (const ManagedResource& r : config_.managed_resources) names.insert(r.name);
  auto spec = pod.find("spec");
  if (spec == pod.end() || !spec->is_object()) return false;
  for (const char* list : {"containers", "initContainers"}) {
    auto it = spec->find(list);
    if (it != spec->end() && RequestsAny(*it, names)) return true;
  }
  return false;
}

Result<Object> Extender::Post(const std::string& verb, std::string body) {
  k8s::HttpRequest req;
  req.method = "POST";
  req.url = config_.url_prefix + "/" + verb;
  req.headers = {{"Content-Type", "application/json"}, {"Accept", "application/json"}};
  req.body = std::move(body);
  req.timeout = config_.http_timeout;
  Result<k8s::HttpResponse> resp = transport_->Do(req);
  if (!resp.ok()) {
    return Status(resp.status().code(), "extender " + req.url + ": " + resp.status().message());
  }
  if (resp->status != 200) {
    return UnavailableError("extender " + req.url + " answered HTTP " +
                            std::to_string(resp->status));
  }
  Result<Object> decoded = k8s::ParseObject(resp->body);
  if (!decoded.ok()) {
    return DataLossError("extender " + req.url +
                         ": undecodable answer: " + decoded.status().message());
  }
  return decoded;
}

Result<ExtenderFilterResult> Extender::Filter(const Object& pod,
                                              const std::vector<k8s::ObjectPtr>& nodes) {
  // The Go field names kube-scheduler writes (its ExtenderArgs has no JSON tags).
  Object args = {{"Pod", pod}};
  std::set<std::string> offered;
  if (config_.node_cache_capable) {
    Object names = Object::array();
    for (const k8s::ObjectPtr& n : nodes) {
      names.push_back(k8s::Name(*n));
      offered.insert(k8s::Name(*n));
    }
    args["NodeNames"] = std::move(names);
  } else {
    Object items = Object::array();
    for (const k8s::ObjectPtr& n : nodes) {
      items.push_back(*n);
      offered.insert(k8s::Name(*n));
    }
    args["Nodes"] = {{"metadata", Object::object()}, {"items", std::move(items)}};
  }
  HAMI_ASSIGN_OR_RETURN(Object result, Post(config_.filter_verb, args.dump()));

  std::string error = MemberString(result, "Error");
  if (!error.empty()) return UnavailableError(error);

  ExtenderFilterResult out;
  const std::string where = "extender " + config_.url_prefix + " filter result: ";
  auto names = Member(result, "NodeNames");
  auto node_list = Member(result, "Nodes");
  if (config_.node_cache_capable && names != result.end() && !names->is_null()) {
    if (!names->is_array()) return DataLossError(where + "nodenames is not a list");
    for (const Object& n : *names) {
      if (!n.is_string()) return DataLossError(where + "nodenames holds a non-string");
      out.node_names.push_back(n.get<std::string>());
    }
  } else if (node_list != result.end() && node_list->is_object()) {
    auto items = node_list->find("items");
    if (items != node_list->end() && items->is_array()) {
      for (const Object& n : *items) out.node_names.push_back(k8s::Name(n));
    }
  }
  for (const std::string& n : out.node_names) {
    if (offered.count(n) == 0) {
      return DataLossError(where + "claims node \"" + n + "\" which was not offered");
    }
  }
  Result<std::map<std::string, std::string>> failed = ReasonMap(result, "FailedNodes");
  if (!failed.ok()) return DataLossError(where + failed.status().message());
  out.failed_nodes = std::move(failed).value();
  Result<std::map<std::string, std::string>> unresolvable =
      ReasonMap(result, "FailedAndUnresolvableNodes");
  if (!unresolvable.ok()) return DataLossError(where + unresolvable.status().message());
  out.failed_and_unresolvable_nodes = std::move(unresolvable).value();
  return out;
}

Status Extender::Bind(const ExtenderBindingArgs& args) {
  Object body = {{"PodName", args.pod_name},
                 {"PodNamespace", args.pod_namespace},
                 {"PodUID", args.pod_uid},
                 {"Node", args.node}};
  HAMI_ASSIGN_OR_RETURN(Object result, Post(config_.bind_verb, body.dump()));
  std::string error = MemberString(result, "Error");
  if (!error.empty()) return UnavailableError(error);
  return OkStatus();
}

}  // namespace hami::sim
