// World (world.h): least-privilege set-up (RBAC manifests, one token kubeconfig per component)
// and the authorization report.

#include <set>

#include "common/base64.h"
#include "common/file_util.h"
#include "k8s/api_error.h"
#include "k8s/typed.h"
#include "sim/world/manifests.h"
#include "sim/world/world.h"
#include "sim/world/world_internal.h"

namespace hami::sim {

using Json = nlohmann::json;
using world_internal::WriteAll;

k8s::Object AuthorizationReportFromAudit(const std::string& audit_log) {
  // A long-running request (a watch) is logged when its answer starts and again when it ends:
  // counted once, at its start.
  std::set<std::string> started;
  k8s::Object out = k8s::Object::object();
  size_t begin = 0;
  while (begin < audit_log.size()) {
    size_t end = audit_log.find('\n', begin);
    if (end == std::string::npos) end = audit_log.size();
    Json e = Json::parse(audit_log.substr(begin, end - begin), nullptr, false);
    begin = end + 1;
    if (!e.is_object() || !e.contains("objectRef")) continue;  // non-resource requests
    std::string stage = e.value("stage", ""), id = e.value("auditID", "");
    if (stage == "ResponseStarted") {
      started.insert(id);
    } else if (stage != "ResponseComplete" || started.count(id)) {
      continue;
    }
    std::string decision =
        k8s::GetString(e, "/annotations/authorization.k8s.io~1decision");  // allow / forbid
    if (decision.empty()) continue;
    const Json& ref = e["objectRef"];
    std::string call = e.value("verb", "") + " " + ref.value("resource", "");
    if (!ref.value("apiGroup", "").empty()) call += "." + ref.value("apiGroup", "");
    if (!ref.value("subresource", "").empty()) call += "/" + ref.value("subresource", "");
    std::string user = k8s::GetString(e, "/user/username");
    Json& d = out[user];
    if (!d.is_object()) d = {{"allowed", Json::object()}, {"denied", Json::object()}};
    Json& count = d[decision == "allow" ? "allowed" : "denied"][call];
    count = count.is_number() ? count.get<int>() + 1 : 1;
  }
  return out;
}

Status World::WriteTokenKubeconfig(const std::string& path, const std::string& token) {
  if (!control_plane_) {
    // The simulated API server's administrator kubeconfig, with the account's token instead.
    HAMI_ASSIGN_OR_RETURN(std::string admin, hami::ReadFileToString(kubeconfig_));
    const std::string marker = "token: hami-sim-admin";
    size_t at = admin.find(marker);
    if (at == std::string::npos) return InternalError("the API server's kubeconfig has no token");
    admin.replace(at, marker.size(), "token: " + token);
    return WriteAll(path, admin);
  }
  return WriteAll(path, "apiVersion: v1\nkind: Config\nclusters:\n- name: kube\n  cluster:\n"
                        "    server: " + control_plane_->server() +
                        "\n    certificate-authority-data: " +
                        Base64Encode(control_plane_->ca_pem()) +
                        "\nusers:\n- name: account\n  user:\n    token: " + token +
                        "\ncontexts:\n- name: kube\n  context: {cluster: kube, user: account}\n"
                        "current-context: kube\n");
}

Status World::SetUpRbac() {
  // The resource of each kind the RBAC manifests may hold.
  const std::map<std::string, k8s::Resource> kinds = {
      {"ServiceAccount", {"v1", "serviceaccounts", true}},
      {"Role", {"rbac.authorization.k8s.io/v1", "roles", true}},
      {"RoleBinding", {"rbac.authorization.k8s.io/v1", "rolebindings", true}},
      {"ClusterRole", {"rbac.authorization.k8s.io/v1", "clusterroles", false}},
      {"ClusterRoleBinding", {"rbac.authorization.k8s.io/v1", "clusterrolebindings", false}},
      {"Namespace", {"v1", "namespaces", false}}};
  for (const std::string& doc : SplitYamlDocuments(options_.rbac_manifests)) {
    HAMI_ASSIGN_OR_RETURN(k8s::Object obj, YamlToJson(doc));
    if (!obj.is_object()) return InvalidArgumentError("an RBAC manifest is not an object");
    std::string kind = k8s::GetString(obj, "/kind");
    auto it = kinds.find(kind);
    if (it == kinds.end()) return InvalidArgumentError("RBAC manifests: unexpected kind " + kind);
    std::string ns = k8s::GetString(obj, "/metadata/namespace");
    if (it->second.namespaced && ns.empty()) ns = "default";
    Result<k8s::Object> created = client_->Create(it->second, ns, obj);
    if (!created.ok() && !k8s::IsAlreadyExists(created.status())) return created.status();
  }
  // One kubeconfig per component, with a token of its account.
  for (const auto& [component, account] : options_.service_accounts) {
    size_t slash = account.find('/');
    if (slash == std::string::npos) {
      return InvalidArgumentError("service account \"" + account + "\": want <namespace>/<name>");
    }
    k8s::Object request = {{"apiVersion", "authentication.k8s.io/v1"},
                           {"kind", "TokenRequest"},
                           {"metadata", {{"name", account.substr(slash + 1)}}},
                           {"spec", {{"expirationSeconds", 86400}}}};
    HAMI_ASSIGN_OR_RETURN(k8s::Object answer,
                          client_->Create(k8s::Resource{"v1", "serviceaccounts", true},
                                          account.substr(0, slash), request, "token"));
    std::string token = k8s::GetString(answer, "/status/token");
    if (token.empty()) return InternalError("TokenRequest for " + account + " gave no token");
    std::string path = dir_ + "/kubeconfig-" + component;
    HAMI_RETURN_IF_ERROR(WriteTokenKubeconfig(path, token));
    component_kubeconfigs_[component] = path;
  }
  return OkStatus();
}

std::string World::KubeconfigOf(const std::string& component) const {
  auto it = component_kubeconfigs_.find(component);
  return it != component_kubeconfigs_.end() ? it->second : kubeconfig_;
}

Result<std::string> World::AuthorizationReport() {
  if (control_plane_) {
    HAMI_ASSIGN_OR_RETURN(std::string audit, hami::ReadFileToString(control_plane_->audit_log()));
    return AuthorizationReportFromAudit(audit).dump();
  }
  HAMI_ASSIGN_OR_RETURN(k8s::HttpResponse r, client_->Send("GET", "/debug/authorization"));
  if (r.status != 200) {
    return InternalError("GET /debug/authorization: " + std::to_string(r.status) + " " + r.body);
  }
  return r.body;
}

}  // namespace hami::sim
