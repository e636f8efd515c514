// ApiServer::Impl's authentication and authorization: the administrator's and ServiceAccounts'
// bearer tokens, the RBAC decision for each resource request, and TokenRequests.
#include "sim/apiserver/api_server_internal.h"

#include <ctime>

#include "common/log.h"

namespace hami::sim {

using api_server_internal::RandomSuffix;
using api_server_internal::WriteError;
using api_server_internal::WriteObject;
using api_server_internal::WriteStatus;

std::optional<UserInfo> ApiServer::Impl::Authenticate(const HttpRequest& req,
                                                      HttpResponse& res) const {
  std::string auth = req.Header("Authorization");
  if (options.token.empty() || auth == "Bearer " + options.token) {
    return UserInfo{options.token.empty() ? "system:anonymous" : "hami-sim-admin",
                    {"system:masters", "system:authenticated"}};
  }
  if (options.rbac && auth.rfind("Bearer ", 0) == 0) {
    std::pair<std::string, std::string> sa;
    {
      MutexLock lock(rbac_mu);
      auto it = sa_tokens.find(auth.substr(7));
      if (it != sa_tokens.end()) sa = it->second;
    }
    if (!sa.second.empty() && store.Get(Res("", "serviceaccounts"), sa.first, sa.second).ok()) {
      return ServiceAccountUser(sa.first, sa.second);
    }
  }
  WriteStatus(res, 401, "Unauthorized", "Unauthorized");
  return std::nullopt;
}

bool ApiServer::Impl::Permitted(const HttpRequest& req, const UserInfo& user, const Target& t,
                                HttpResponse& res) const {
  if (!options.rbac) return true;
  Attributes a;
  bool watch = req.Param("watch") == "true" || req.Param("watch") == "1";
  if (req.method == "GET" || req.method == "HEAD") {
    a.verb = !t.name.empty() ? "get" : watch ? "watch" : "list";
  } else if (req.method == "POST") {
    a.verb = "create";
  } else if (req.method == "PUT") {
    a.verb = "update";
  } else if (req.method == "PATCH") {
    a.verb = "patch";
  } else if (req.method == "DELETE") {
    a.verb = t.name.empty() ? "deletecollection" : "delete";
  }
  // pods/exec needs `create` whichever way it comes (a WebSocket upgrade is a GET), as newer
  // API servers require (AuthorizePodWebsocketUpgradeCreatePermission).
  if (t.sub == "exec") a.verb = "create";
  a.api_group = t.group;
  a.resource = t.resource->resource;
  a.subresource = t.sub;
  a.ns = t.ns;
  a.name = t.name;
  // A list or watch restricted to one name by field selector asks about that object, as on
  // the real server (informers on a single Lease or Node do this).
  std::string fs = req.Param("fieldSelector");
  if (a.name.empty() && (a.verb == "list" || a.verb == "watch") &&
      fs.rfind("metadata.name=", 0) == 0 && fs.find(',') == std::string::npos) {
    a.name = fs.substr(14);
  }
  RbacPolicy policy;
  int64_t unused = 0;
  const char* group = "rbac.authorization.k8s.io";
  policy.cluster_roles = store.List(Res(group, "clusterroles"), "", &unused);
  policy.cluster_role_bindings = store.List(Res(group, "clusterrolebindings"), "", &unused);
  if (!a.ns.empty()) {
    policy.roles = store.List(Res(group, "roles"), a.ns, &unused);
    policy.role_bindings = store.List(Res(group, "rolebindings"), a.ns, &unused);
  }
  bool ok = Allows(policy, user, a);
  std::string key =
      a.verb + " " + t.resource->qualified() + (a.subresource.empty() ? "" : "/" + a.subresource);
  {
    MutexLock lock(rbac_mu);
    Decisions& d = decisions[user.name];
    ++(ok ? d.allowed : d.denied)[key];
  }
  if (ok) return true;
  std::string message = ForbiddenMessage(user, a);
  HAMI_LOG(Warning) << "RBAC: " << message;
  json details = {{"kind", a.resource}};
  if (!a.name.empty()) details["name"] = a.name;
  if (!a.api_group.empty()) details["group"] = a.api_group;
  WriteStatus(res, 403, "Forbidden", message, details);
  return false;
}

Result<std::string> ApiServer::Impl::IssueToken(const std::string& ns,
                                                const std::string& name) const {
  Result<ObjectPtr> account = store.Get(Res("", "serviceaccounts"), ns, name);
  if (!account.ok()) return account.status();
  std::string token = "hami-sim-sa." + RandomSuffix(32);
  MutexLock lock(rbac_mu);
  sa_tokens[token] = {ns, name};
  return token;
}

void ApiServer::Impl::TokenRequest(const HttpRequest& req, const Target& t, HttpResponse& res) {
  if (req.method != "POST")
    return WriteStatus(res, 405, "MethodNotAllowed", "method not allowed");
  if (!options.rbac) {
    return WriteStatus(res, 404, "NotFound",
                       "serviceaccounts/token is served only with --rbac (tokens are not checked "
                       "otherwise)");
  }
  json body = json::parse(req.body, nullptr, /*allow_exceptions=*/false);
  if (body.is_discarded() || !body.is_object()) body = json::object();
  Result<std::string> token = IssueToken(t.ns, t.name);
  if (!token.ok()) {
    return WriteError(res, token.status(), {{"name", t.name}, {"kind", "serviceaccounts"}});
  }
  int64_t seconds = 3600;
  if (body["spec"].is_object() && body["spec"]["expirationSeconds"].is_number_integer()) {
    seconds = body["spec"]["expirationSeconds"].get<int64_t>();
  }
  std::time_t until = std::time(nullptr) + seconds;
  char buf[32];
  std::tm tm{};
  gmtime_r(&until, &tm);
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &tm);
  json spec = body["spec"].is_object() ? body["spec"] : json::object();
  spec["expirationSeconds"] = seconds;
  json out = {
      {"kind", "TokenRequest"},
      {"apiVersion", "authentication.k8s.io/v1"},
      {"metadata", {{"name", t.name}, {"namespace", t.ns}, {"creationTimestamp", nullptr}}},
      {"spec", spec},
      {"status", {{"token", *token}, {"expirationTimestamp", buf}}}};
  WriteObject(res, 201, out);
}

std::string ApiServer::Impl::DecisionReport() const {
  json out = json::object();
  MutexLock lock(rbac_mu);
  for (const auto& [user, d] : decisions) {
    out[user] = {{"allowed", d.allowed}, {"denied", d.denied}};
  }
  return out.dump();
}

}  // namespace hami::sim
