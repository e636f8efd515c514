#include "sim/apiserver/api_server.h"

#include <poll.h>
#include <strings.h>

#include <algorithm>
#include <ctime>
#include <nlohmann/json.hpp>
#include <optional>
#include <random>
#include <sstream>

#include "common/base64.h"
#include "common/file_util.h"
#include "common/log.h"
#include "common/thread_annotations.h"
#include "common/uuid.h"
#include "net/http_server.h"
#include "net/http_wire.h"
#include "net/tls.h"
#include "sim/apiserver/admission.h"
#include "sim/apiserver/json_fields.h"
#include "sim/apiserver/kubelet_proxy.h"
#include "sim/apiserver/quantities.h"
#include "sim/apiserver/rbac.h"
#include "sim/apiserver/resources.h"
#include "sim/apiserver/selectors.h"
#include "sim/apiserver/store.h"
#include "sim/apiserver/strategic_merge.h"
#include "sim/apiserver/tables.h"
#include "sim/apiserver/watch_hub.h"

namespace hami::sim {
namespace {

using net::HttpRequest;
using net::HttpResponse;
using nlohmann::json;
using SteadyClock = std::chrono::steady_clock;

// ---- small helpers -------------------------------------------------------------------------

using json_fields::Str;

// Now plus `seconds`, in the API's timestamp form.
std::string Rfc3339After(int64_t seconds) {
  std::time_t t = std::time(nullptr) + static_cast<std::time_t>(seconds);
  std::tm tm{};
  gmtime_r(&t, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
}

std::string NowRfc3339() { return Rfc3339After(0); }

std::string RandomSuffix(size_t n) {
  static const char kChars[] = "bcdfghjklmnpqrstvwxz2456789";
  static thread_local std::mt19937_64 rng{std::random_device{}()};
  std::string out;
  for (size_t i = 0; i < n; ++i) out += kChars[rng() % (sizeof kChars - 1)];
  return out;
}

std::string NewUid() { return NewRandomUuid(); }

bool ValidName(const std::string& name) {
  if (name.empty() || name.size() > 253 || name == "." || name == "..") return false;
  for (char c : name) {
    if (c == '/' || c == '%' || static_cast<unsigned char>(c) < 0x21) return false;
  }
  return true;
}

// ---- errors in the shape of metav1.Status --------------------------------------------------

struct HttpError {
  int code;
  const char* reason;
};

HttpError Classify(StatusCode code) {
  switch (code) {
    case StatusCode::kNotFound:
      return {404, "NotFound"};
    case StatusCode::kAlreadyExists:
      return {409, "AlreadyExists"};
    case StatusCode::kAborted:
      return {409, "Conflict"};
    case StatusCode::kInvalidArgument:
      return {400, "BadRequest"};
    case StatusCode::kFailedPrecondition:
      return {422, "Invalid"};
    case StatusCode::kOutOfRange:
      return {410, "Expired"};
    case StatusCode::kUnimplemented:
      return {405, "MethodNotAllowed"};
    case StatusCode::kPermissionDenied:
      return {403, "Forbidden"};
    case StatusCode::kUnavailable:
      return {503, "ServiceUnavailable"};
    case StatusCode::kDeadlineExceeded:
      return {504, "Timeout"};
    default:
      return {500, "InternalError"};
  }
}

json StatusObject(int code, const std::string& reason, const std::string& message,
                  const json& details = json()) {
  json s = {{"kind", "Status"},    {"apiVersion", "v1"}, {"metadata", json::object()},
            {"status", "Failure"}, {"message", message}, {"reason", reason},
            {"code", code}};
  if (!details.is_null()) s["details"] = details;
  return s;
}

// The watch event that ends a stream whose position fell out of the history window.
std::string ExpiredEventLine(const std::string& message) {
  return json{{"type", "ERROR"}, {"object", StatusObject(410, "Expired", message)}}.dump() + "\n";
}

void WriteStatus(HttpResponse& res, int code, const std::string& reason, const std::string& message,
                 const json& details = json()) {
  res.SetJson(code, StatusObject(code, reason, message, details).dump());
}

void WriteError(HttpResponse& res, const Status& status, const json& details = json()) {
  HttpError e = Classify(status.code());
  WriteStatus(res, e.code, e.reason, status.message(), details);
}

void WriteObject(HttpResponse& res, int code, const json& object) {
  res.SetJson(code, object.dump());
}

// ---- request targets -----------------------------------------------------------------------

struct Target {
  std::string group, version;
  const ResourceInfo* resource = nullptr;
  std::string ns;
  std::string name;
  std::string sub;
  bool discovery = false;  // /api/v1 or /apis/<g>[/<v>] itself
};

std::vector<std::string> Split(const std::string& path) {
  std::vector<std::string> out;
  std::stringstream ss(path);
  std::string seg;
  while (std::getline(ss, seg, '/')) {
    if (!seg.empty()) out.push_back(seg);
  }
  return out;
}

Result<Target> ParseTarget(const ResourceRegistry& registry, const std::string& path) {
  std::vector<std::string> seg = Split(path);
  Target t;
  size_t i;
  if (!seg.empty() && seg[0] == "api" && seg.size() >= 2) {
    t.version = seg[1];
    i = 2;
  } else if (!seg.empty() && seg[0] == "apis" && seg.size() >= 2) {
    t.group = seg[1];
    if (seg.size() == 2) {
      t.discovery = true;
      return t;
    }
    t.version = seg[2];
    i = 3;
  } else {
    return NotFoundError("the server could not find the requested resource");
  }
  std::vector<std::string> rest(seg.begin() + static_cast<long>(i), seg.end());  // NOLINT
  if (rest.empty()) {
    t.discovery = true;
    return t;
  }
  if (rest[0] == "namespaces" && rest.size() >= 3) {
    const ResourceInfo* r = registry.Find(t.group, t.version, rest[2]);
    if (r && r->namespaced) {
      t.ns = rest[1];
      rest.erase(rest.begin(), rest.begin() + 2);
    }
  }
  if (rest.size() > 3) return NotFoundError("the server could not find the requested resource");
  t.resource = registry.Find(t.group, t.version, rest[0]);
  if (!t.resource) return NotFoundError("the server could not find the requested resource");
  if (rest.size() >= 2) t.name = rest[1];
  if (rest.size() == 3) t.sub = rest[2];
  if (t.resource->namespaced && t.ns.empty() && !t.name.empty()) {
    return NotFoundError("the server could not find the requested resource");
  }
  bool token_request =
      t.sub == "token" && t.group.empty() && t.resource->resource == "serviceaccounts";
  if (!t.sub.empty() && !token_request &&
      !((t.sub == "status" && t.resource->has_status) ||
        ((t.sub == "binding" || t.sub == "log" || t.sub == "exec") && t.resource->has_binding))) {
    return NotFoundError("the server could not find the requested resource");
  }
  return t;
}

// ---- kubectl's Table output ----------------------------------------------------------------

bool WantsTable(const HttpRequest& req) {
  return req.Header("Accept").find("as=Table") != std::string::npos;
}

}  // namespace

// ---- the server ----------------------------------------------------------------------------

class ApiServer::Impl {
 public:
  explicit Impl(ApiServerOptions o)
      : options(std::move(o)),
        store(options.history_window),
        watches(store, registry, ExpiredEventLine) {}

  // Start's steps. ConfigureTls serves the given certificate files, or a generated self-signed
  // certificate, or plain HTTP, and keeps the CA clients should trust in ca_pem. The Handle*
  // functions register routes on `s`; the handlers use this Impl, which outlives the server.
  Status ConfigureTls(net::HttpServerOptions& server_options);
  void HandleDiscovery(net::HttpServer& s);
  void HandleOpenApi(net::HttpServer& s);
  void HandleResources(net::HttpServer& s);

  ApiServerOptions options;
  ResourceRegistry registry;
  Store store;
  WatchHub watches;  // every watch stream's fan-out
  mutable Mutex counts_mu;
  std::map<std::string, uint64_t> request_counts GUARDED_BY(counts_mu);
  std::unique_ptr<net::HttpServer> http;
  std::string ca_pem;
  std::string url;
  int port = 0;

  const ResourceInfo& Res(const char* group, const char* resource) const {
    return *registry.Find(group, "v1", resource);
  }

  // RBAC state: issued ServiceAccount tokens and the decisions made.
  struct Decisions {
    std::map<std::string, uint64_t> allowed, denied;
  };
  mutable Mutex rbac_mu;
  mutable std::map<std::string, std::pair<std::string, std::string>> sa_tokens
      GUARDED_BY(rbac_mu);
  mutable std::map<std::string, Decisions> decisions GUARDED_BY(rbac_mu);

  // Who sent the request: nullopt (and a 401 written) when it is not authenticated.
  std::optional<UserInfo> Authenticate(const HttpRequest& req, HttpResponse& res) const {
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

  bool Authorized(const HttpRequest& req, HttpResponse& res) const {
    return Authenticate(req, res).has_value();
  }

  // The RBAC decision for a resource request; writes the 403 when refused.
  bool Permitted(const HttpRequest& req, const UserInfo& user, const Target& t,
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

  Result<std::string> IssueToken(const std::string& ns, const std::string& name) const {
    Result<ObjectPtr> account = store.Get(Res("", "serviceaccounts"), ns, name);
    if (!account.ok()) return account.status();
    std::string token = "hami-sim-sa." + RandomSuffix(32);
    MutexLock lock(rbac_mu);
    sa_tokens[token] = {ns, name};
    return token;
  }

  // POST serviceaccounts/<name>/token: a TokenRequest answered with a token for the account.
  void TokenRequest(const HttpRequest& req, const Target& t, HttpResponse& res) {
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

  std::string DecisionReport() const {
    json out = json::object();
    MutexLock lock(rbac_mu);
    for (const auto& [user, d] : decisions) {
      out[user] = {{"allowed", d.allowed}, {"denied", d.denied}};
    }
    return out.dump();
  }

  void SeedNamespaces() {
    for (const char* ns : {"default", "kube-system", "kube-public", "kube-node-lease"}) {
      json obj = {{"kind", "Namespace"}, {"apiVersion", "v1"}, {"metadata", {{"name", ns}}}};
      (void)Create(Res("", "namespaces"), "", std::move(obj), "system:apiserver");
    }
  }

  // --- verbs ---

  Result<ObjectPtr> Create(const ResourceInfo& r, const std::string& path_ns, json obj,
                           const std::string& user,
                           std::shared_ptr<const LazyText>* text = nullptr) {
    if (!obj.is_object()) return InvalidArgumentError("the request body must be a JSON object");
    if (obj.contains("kind") && Str(obj, "kind") != r.kind) {
      return InvalidArgumentError("the kind \"" + Str(obj, "kind") + "\" does not match the " +
                                  r.kind + " expected by " + r.qualified());
    }
    if (obj.contains("apiVersion") && Str(obj, "apiVersion") != r.api_version()) {
      return InvalidArgumentError("the apiVersion \"" + Str(obj, "apiVersion") +
                                  "\" does not match " + r.api_version());
    }
    obj["kind"] = r.kind;
    obj["apiVersion"] = r.api_version();
    if (!obj.contains("metadata")) obj["metadata"] = json::object();
    json& md = obj["metadata"];
    if (!md.is_object()) return InvalidArgumentError("metadata must be an object");
    if (Str(md, "name").empty() && !Str(md, "generateName").empty()) {
      md["name"] = Str(md, "generateName") + RandomSuffix(5);
    }
    std::string name = Str(md, "name");
    if (name.empty()) {
      return FailedPreconditionError(r.kind +
                                     " is invalid: metadata.name: Required value: name "
                                     "or generateName is required");
    }
    if (!ValidName(name)) {
      return FailedPreconditionError(r.kind + " \"" + name + "\" is invalid: metadata.name");
    }
    ObjectPtr ns_object;  // for admission
    if (r.namespaced) {
      std::string body_ns = Str(md, "namespace");
      if (!body_ns.empty() && body_ns != path_ns) {
        return InvalidArgumentError(
            "the namespace of the provided object does not match the namespace sent on the "
            "request");
      }
      md["namespace"] = path_ns;
      Result<ObjectPtr> ns = store.Get(Res("", "namespaces"), "", path_ns);
      if (!ns.ok()) return NotFoundError("namespaces \"" + path_ns + "\" not found");
      ns_object = *ns;
    } else {
      md.erase("namespace");
    }
    md["uid"] = NewUid();
    md["creationTimestamp"] = NowRfc3339();
    md["generation"] = 1;
    md.erase("resourceVersion");
    md.erase("deletionTimestamp");
    ApplyCreateDefaults(r, obj);
    // As the real server decodes the body: quantities in canonical form, as strings.
    HAMI_RETURN_IF_ERROR(CanonicalizeQuantities(r.kind, obj));
    if (r.kind == "Pod" && r.group.empty()) {
      int64_t unused;
      std::vector<ObjectPtr> configs = store.List(
          Res("admissionregistration.k8s.io", "mutatingwebhookconfigurations"), "", &unused);
      if (!configs.empty()) {
        json before = md;
        HAMI_ASSIGN_OR_RETURN(
            obj, AdmitCreate(configs, r, ns_object ? *ns_object : json(), std::move(obj), user));
        if (!obj.is_object() || !obj["metadata"].is_object()) {
          return InternalError("a mutating webhook removed the object's metadata");
        }
        // Identity fields are not the webhook's to change.
        for (const char* k : {"name", "namespace", "uid", "creationTimestamp"}) {
          obj["metadata"][k] = before[k];
        }
        obj["kind"] = r.kind;
        obj["apiVersion"] = r.api_version();
        // The patched object is decoded again, so what a webhook added is canonical too.
        HAMI_RETURN_IF_ERROR(CanonicalizeQuantities(r.kind, obj));
      }
    }
    return store.Create(r, path_ns, std::move(obj), text);
  }

  static void ApplyCreateDefaults(const ResourceInfo& r, json& obj) {
    if (r.group.empty() && r.kind == "Pod") {
      if (!obj["spec"].is_object()) obj["spec"] = json::object();
      json& spec = obj["spec"];
      if (!spec.contains("schedulerName")) spec["schedulerName"] = "default-scheduler";
      if (!spec.contains("restartPolicy")) spec["restartPolicy"] = "Always";
      if (!spec.contains("dnsPolicy")) spec["dnsPolicy"] = "ClusterFirst";
      if (!spec.contains("terminationGracePeriodSeconds")) {
        spec["terminationGracePeriodSeconds"] = 30;
      }
      // As the real server: a new pod's status is reset to Pending.
      obj["status"] = {{"phase", "Pending"}};
    } else if (r.group.empty() && r.kind == "Namespace") {
      obj["spec"] = {{"finalizers", {"kubernetes"}}};
      obj["status"] = {{"phase", "Active"}};
    } else if (r.group.empty() && r.kind == "Secret") {
      NormalizeSecret(obj);
    }
  }

  // As the real server: `stringData` is write-only, folded into `data` (base64) on every write,
  // its keys winning over `data`'s; `type` defaults to Opaque.
  static void NormalizeSecret(json& obj) {
    if (!obj.contains("type")) obj["type"] = "Opaque";
    auto sd = obj.find("stringData");
    if (sd == obj.end()) return;
    if (sd->is_object()) {
      if (!obj["data"].is_object()) obj["data"] = json::object();
      for (auto it = sd->begin(); it != sd->end(); ++it) {
        if (it.value().is_string()) {
          obj["data"][it.key()] = Base64Encode(it.value().get<std::string>());
        }
      }
    }
    obj.erase("stringData");
  }

  // Whether anything but metadata and status differs (what bumps metadata.generation).
  static bool SpecChanged(const json& a, const json& b) {
    auto counted = [](const json& o) {
      size_t n = o.size();
      for (const char* k : {"metadata", "status"}) n -= o.contains(k) ? 1 : 0;
      return n;
    };
    if (counted(a) != counted(b)) return true;
    for (auto it = a.begin(); it != a.end(); ++it) {
      if (it.key() == "metadata" || it.key() == "status") continue;
      auto other = b.find(it.key());
      if (other == b.end() || *other != it.value()) return true;
    }
    return false;
  }

  // Carries over what a client may not change with PUT/PATCH and bumps generation when the spec
  // part changed. `sub` is "" or "status".
  static Status FinishUpdate(const ResourceInfo& r, const std::string& sub, const json& current,
                             json& next) {
    if (!next.is_object()) return InvalidArgumentError("the object must be a JSON object");
    if (!next.contains("metadata") || !next["metadata"].is_object()) {
      next["metadata"] = json::object();
    }
    if (sub == "status") {
      // Only the status (and metadata labels and annotations, as on the real server) may change
      // through /status: everything else in `next` is put back to `current`'s value, in place.
      // Most of it is already equal, so this costs comparisons, not a copy of the object.
      auto restore = [](json& into, const json& from, std::initializer_list<const char*> keep) {
        auto kept = [&](const std::string& k) {
          for (const char* x : keep) {
            if (k == x) return true;
          }
          return false;
        };
        for (auto it = into.begin(); it != into.end();) {
          if (kept(it.key())) {
            ++it;
            continue;
          }
          auto was = from.find(it.key());
          if (was == from.end()) {
            it = into.erase(it);
            continue;
          }
          if (*it != *was) *it = *was;
          ++it;
        }
        for (auto it = from.begin(); it != from.end(); ++it) {
          if (!kept(it.key()) && !into.contains(it.key())) into[it.key()] = it.value();
        }
      };
      restore(next, current, {"status", "metadata"});
      json& md = next["metadata"];
      const json& cur_md = current["metadata"];
      restore(md, cur_md, {"labels", "annotations"});
      for (const char* k : {"labels", "annotations"}) {
        if (!md.contains(k) && cur_md.contains(k)) md[k] = cur_md[k];
      }
    } else if (r.has_status) {
      if (current.contains("status")) {
        next["status"] = current["status"];
      } else {
        next.erase("status");
      }
    }
    next["kind"] = r.kind;
    next["apiVersion"] = r.api_version();
    if (r.group.empty() && r.kind == "Secret") NormalizeSecret(next);
    json& md = next["metadata"];
    const json& cur_md = current["metadata"];
    for (const char* k :
         {"name", "namespace", "uid", "creationTimestamp", "deletionTimestamp", "generation"}) {
      if (cur_md.contains(k)) {
        md[k] = cur_md[k];
      } else {
        md.erase(k);
      }
    }
    if (SpecChanged(current, next) && cur_md.contains("generation") &&
        cur_md["generation"].is_number_integer()) {
      md["generation"] = cur_md["generation"].get<int64_t>() + 1;
    }
    return CanonicalizeQuantities(r.kind, next);
  }

  static Status CheckResourceVersion(const ResourceInfo& r, const std::string& name,
                                     const std::string& wanted, const json& current) {
    if (wanted.empty() || wanted == Str(current["metadata"], "resourceVersion")) return OkStatus();
    return AbortedError("Operation cannot be fulfilled on " + r.qualified() + " \"" + name +
                        "\": the object has been modified; please apply your changes to the "
                        "latest version and try again");
  }

  // --- HTTP handlers ---

  void HandleResource(const HttpRequest& req, HttpResponse& res) {
    std::optional<UserInfo> user = Authenticate(req, res);
    if (!user) return;
    Result<Target> target = ParseTarget(registry, req.path);
    if (!target.ok()) return WriteError(res, target.status());
    const Target& t = *target;
    if (t.discovery) {
      if (req.method != "GET")
        return WriteStatus(res, 405, "MethodNotAllowed", "method not allowed");
      return ServeDiscovery(t, res);
    }
    if (!Permitted(req, *user, t, res)) return;
    if (t.sub == "token") return TokenRequest(req, t, res);
    const ResourceInfo& r = *t.resource;
    {
      std::string key = req.method == "GET" && t.name.empty() &&
                                (req.Param("watch") == "true" || req.Param("watch") == "1")
                            ? std::string("WATCH")
                            : req.method;
      key += ' ';
      key += r.resource;
      if (!t.sub.empty()) key += "/" + t.sub;
      MutexLock lock(counts_mu);
      ++request_counts[key];
    }
    json details = {{"name", t.name}, {"group", r.group}, {"kind", r.resource}};
    try {
      if (t.sub == "log") {
        if (req.method != "GET")
          return WriteStatus(res, 405, "MethodNotAllowed", "method not allowed");
        return Log(req, t, res);
      }
      if (t.sub == "exec") {
        if (req.method != "GET" && req.method != "POST")
          return WriteStatus(res, 405, "MethodNotAllowed", "method not allowed");
        return Exec(req, t, res);
      }
      if (req.method == "GET" || req.method == "HEAD") {
        if (t.name.empty()) {
          std::string w = req.Param("watch");
          if (w == "true" || w == "1") return Watch(req, t, res);
          return List(req, t, res);
        }
        std::shared_ptr<const LazyText> text;
        Result<ObjectPtr> obj = store.Get(r, t.ns, t.name, &text);
        if (!obj.ok()) return WriteError(res, obj.status(), details);
        if (WantsTable(req))
          return WriteObject(res, 200, TableOf(r, {*obj}, store.revision(), std::time(nullptr)));
        return res.SetJson(200, text->Get(**obj));
      }
      if (req.method == "POST") {
        if (t.sub == "binding") return Bind(req, t, res);
        if (!t.name.empty()) return WriteStatus(res, 405, "MethodNotAllowed", "method not allowed");
        json body = json::parse(req.body, nullptr, /*allow_exceptions=*/false);
        if (body.is_discarded()) return BadBody(res);
        std::shared_ptr<const LazyText> text;
        Result<ObjectPtr> created = Create(r, t.ns, std::move(body), User(req), &text);
        if (!created.ok()) return WriteError(res, created.status(), details);
        return res.SetJson(201, text->Get(**created));
      }
      if (req.method == "PUT") return Update(req, t, res);
      if (req.method == "PATCH") return Patch(req, t, res);
      if (req.method == "DELETE") {
        if (t.name.empty()) return DeleteCollection(req, t, res);
        return Delete(req, t, res);
      }
      WriteStatus(res, 405, "MethodNotAllowed", "method not allowed");
    } catch (const json::exception& e) {
      // A field of an untrusted body had an unexpected JSON type.
      WriteStatus(res, 400, "BadRequest", std::string("malformed object: ") + e.what());
    }
  }

  static std::string User(const HttpRequest& req) {
    return req.Header("Authorization").empty() ? "system:anonymous" : "hami-sim-user";
  }

  static void BadBody(HttpResponse& res) {
    WriteStatus(res, 400, "BadRequest",
                "the body of the request was in an unknown format - accepted media types "
                "include: application/json");
  }

  void ServeDiscovery(const Target& t, HttpResponse& res) {
    if (t.version.empty()) {  // /apis/<group>
      std::string groups = registry.Groups();
      json all = json::parse(groups);
      for (const json& g : all["groups"]) {
        if (g["name"] == t.group) {
          json doc = g;
          doc["kind"] = "APIGroup";
          doc["apiVersion"] = "v1";
          return WriteObject(res, 200, doc);
        }
      }
      return WriteStatus(res, 404, "NotFound", "the server could not find the requested resource");
    }
    std::string doc = registry.ResourceList(t.group, t.version);
    if (doc.empty()) {
      return WriteStatus(res, 404, "NotFound", "the server could not find the requested resource");
    }
    res.SetJson(200, doc);
  }

  struct Selectors {
    LabelSelector labels;
    FieldSelector fields;
    bool Matches(const json& o) const { return labels.MatchesObject(o) && fields.Matches(o); }
  };

  static Result<Selectors> ParseSelectors(const HttpRequest& req) {
    Selectors s;
    HAMI_ASSIGN_OR_RETURN(s.labels, LabelSelector::Parse(req.Param("labelSelector")));
    HAMI_ASSIGN_OR_RETURN(s.fields, FieldSelector::Parse(req.Param("fieldSelector")));
    return s;
  }

  void List(const HttpRequest& req, const Target& t, HttpResponse& res) {
    Result<Selectors> sel = ParseSelectors(req);
    if (!sel.ok()) return WriteError(res, sel.status());
    int64_t revision = 0;
    std::vector<ObjectPtr> all = store.List(*t.resource, t.ns, &revision);
    std::vector<ObjectPtr> matched;
    for (ObjectPtr& o : all) {
      if (sel->Matches(*o)) matched.push_back(std::move(o));
    }
    if (WantsTable(req))
      return WriteObject(res, 200, TableOf(*t.resource, matched, revision, std::time(nullptr)));
    std::string body = "{\"kind\":\"" + t.resource->list_kind() + "\",\"apiVersion\":\"" +
                       t.resource->api_version() + "\",\"metadata\":{\"resourceVersion\":\"" +
                       std::to_string(revision) + "\"},\"items\":[";
    for (size_t i = 0; i < matched.size(); ++i) {
      if (i) body += ',';
      body += matched[i]->dump();
    }
    body += "]}";
    res.SetJson(200, std::move(body));
  }

  void Watch(const HttpRequest& req, const Target& t, HttpResponse& res) {
    Result<Selectors> sel = ParseSelectors(req);
    if (!sel.ok()) return WriteError(res, sel.status());
    std::string rv_param = req.Param("resourceVersion");
    auto deadline = SteadyClock::now() + options.max_watch_duration;
    if (req.HasParam("timeoutSeconds")) {
      char* end = nullptr;
      std::string ts = req.Param("timeoutSeconds");
      long secs = std::strtol(ts.c_str(), &end, 10);  // NOLINT(runtime/int)
      if (ts.empty() || *end != '\0' || secs < 0) {
        return WriteStatus(res, 400, "BadRequest", "invalid timeoutSeconds: " + ts);
      }
      deadline = std::min(deadline, SteadyClock::now() + std::chrono::seconds(secs));
    }
    bool bookmarks = req.Param("allowWatchBookmarks") == "true";
    bool table = WantsTable(req);
    const ResourceInfo* r = t.resource;
    std::vector<WatchEvent> initial;
    int64_t start = 0;
    if (rv_param.empty() || rv_param == "0") {
      // No resourceVersion: the current state as ADDED events, then changes.
      for (ObjectPtr& o : store.List(*r, t.ns, &start)) {
        initial.push_back({start, "ADDED", r, t.ns, std::move(o), nullptr});
      }
    } else {
      char* end = nullptr;
      long long v = std::strtoll(rv_param.c_str(), &end, 10);  // NOLINT(runtime/int)
      if (*end != '\0' || v < 0) {
        return WriteStatus(res, 400, "BadRequest", "invalid resourceVersion: " + rv_param);
      }
      // The events since `v`; a compacted revision is answered with 410 Gone.
      int64_t now = v;
      Status s = store.EventsSince(
          v, [r](const ResourceInfo& x) { return &x == r; }, &initial, &now);
      if (s.code() == StatusCode::kOutOfRange) {
        if (!options.expired_watch_as_error_event) return WriteError(res, s);
        std::string line = ExpiredEventLine(s.message());
        res.status = 200;
        res.content_type = "application/json";
        res.stream = [line](net::ChunkWriter& w) { (void)w.Write(line); };
        return;
      }
      if (!s.ok()) return WriteStatus(res, 503, "ServiceUnavailable", s.message());
      start = now;
    }
    res.status = 200;
    res.content_type = "application/json";
    WatchSpec spec;
    spec.resource = r;
    spec.ns = t.ns;
    spec.labels = std::move(sel->labels);
    spec.fields = std::move(sel->fields);
    if (table) {  // kubectl get -w: every event object is a one-row Table
      spec.render = [r](const WatchEvent& e) {
        return TableOf(*r, {e.object}, e.revision, std::time(nullptr)).dump();
      };
    }
    spec.bookmarks = bookmarks;
    spec.bookmark_every = options.bookmark_interval;
    spec.deadline = deadline;
    WatchHub* hub = &watches;
    res.stream = [hub, spec = std::move(spec), initial = std::move(initial),
                  start](net::ChunkWriter& w) mutable {
      // The current state (or the events since the requested revision) from this thread, in
      // chunks of about 1 MiB; then the hub takes over.
      std::string out;
      for (const WatchEvent& e : initial) {
        spec.AppendEvent(e, &out);
        if (out.size() >= (1 << 20)) {
          if (!w.Write(out)) return;
          out.clear();
        }
      }
      if (!out.empty() && !w.Write(out)) return;
      hub->Serve(std::move(spec), start, w);
    };
  }

  void Update(const HttpRequest& req, const Target& t, HttpResponse& res) {
    const ResourceInfo& r = *t.resource;
    json details = {{"name", t.name}, {"group", r.group}, {"kind", r.resource}};
    if (t.name.empty() || t.sub == "binding") {
      return WriteStatus(res, 405, "MethodNotAllowed", "method not allowed");
    }
    json body = json::parse(req.body, nullptr, false);
    if (body.is_discarded()) return BadBody(res);
    if (!body.is_object()) return WriteStatus(res, 400, "BadRequest", "the body must be an object");
    if (body.contains("kind") && Str(body, "kind") != r.kind) {
      return WriteStatus(res, 400, "BadRequest",
                         "the kind \"" + Str(body, "kind") + "\" does not match " + r.kind);
    }
    std::string body_name = body.contains("metadata") ? Str(body["metadata"], "name") : "";
    if (body_name != t.name) {
      return WriteStatus(res, 400, "BadRequest",
                         "the name of the object (" + body_name +
                             ") does not match the name on the URL (" + t.name + ")");
    }
    std::string wanted_rv = Str(body["metadata"], "resourceVersion");
    std::shared_ptr<const LazyText> text;
    Result<ObjectPtr> updated = store.Update(
        r, t.ns, t.name,
        [&](const json& current, json& next) {
          HAMI_RETURN_IF_ERROR(CheckResourceVersion(r, t.name, wanted_rv, current));
          next = body;
          return FinishUpdate(r, t.sub, current, next);
        },
        &text);
    if (!updated.ok()) return WriteError(res, updated.status(), details);
    res.SetJson(200, text->Get(**updated));
  }

  void Patch(const HttpRequest& req, const Target& t, HttpResponse& res) {
    const ResourceInfo& r = *t.resource;
    json details = {{"name", t.name}, {"group", r.group}, {"kind", r.resource}};
    if (t.name.empty() || t.sub == "binding") {
      return WriteStatus(res, 405, "MethodNotAllowed", "method not allowed");
    }
    std::string ct = req.Header("Content-Type");
    ct = ct.substr(0, ct.find(';'));
    enum { kMerge, kStrategic, kJsonPatch } kind;
    if (ct == "application/merge-patch+json") {
      kind = kMerge;
    } else if (ct == "application/strategic-merge-patch+json") {
      kind = kStrategic;
    } else if (ct == "application/json-patch+json") {
      kind = kJsonPatch;
    } else if (ct == "application/apply-patch+yaml" || ct == "application/apply-patch+cbor") {
      return WriteStatus(res, 415, "UnsupportedMediaType",
                         "server-side apply (" + ct +
                             ") is not supported by the simulated API server: use client-side "
                             "apply (kubectl apply without --server-side), kubectl patch or "
                             "kubectl edit");
    } else {
      return WriteStatus(res, 415, "UnsupportedMediaType",
                         "the body of the request was in an unknown format - accepted media "
                         "types include: application/json-patch+json, "
                         "application/merge-patch+json, application/strategic-merge-patch+json");
    }
    json patch = json::parse(req.body, nullptr, false);
    if (patch.is_discarded()) return BadBody(res);
    if (kind != kJsonPatch && !patch.is_object()) {
      return WriteStatus(res, 400, "BadRequest", "a merge patch must be a JSON object");
    }
    if (kind == kJsonPatch && !patch.is_array()) {
      return WriteStatus(res, 400, "BadRequest", "a JSON patch must be a JSON array");
    }
    std::shared_ptr<const LazyText> text;
    Result<ObjectPtr> updated = store.Update(
        r, t.ns, t.name,
        [&](const json& current, json& next) {
          if (kind == kMerge) {
            next.merge_patch(patch);
          } else if (kind == kStrategic) {
            HAMI_RETURN_IF_ERROR(ApplyStrategicMergePatch(r.kind, next, patch));
          } else {
            try {
              next = current.patch(patch);
            } catch (const json::exception& e) {
              return FailedPreconditionError(std::string("the JSON patch cannot be applied: ") +
                                             e.what());
            }
          }
          if (!next.is_object() || !next.contains("metadata") || !next["metadata"].is_object()) {
            return FailedPreconditionError("the patch removed the object's metadata");
          }
          // A resourceVersion in the patched object is a precondition, as on the real server.
          std::string wanted_rv = Str(next["metadata"], "resourceVersion");
          HAMI_RETURN_IF_ERROR(CheckResourceVersion(r, t.name, wanted_rv, current));
          return FinishUpdate(r, t.sub, current, next);
        },
        &text);
    if (!updated.ok()) return WriteError(res, updated.status(), details);
    res.SetJson(200, text->Get(**updated));
  }

  // The pod, container and kubelet address a pods/log or pods/exec request is for: the
  // `container` parameter or the pod's only container, and the pod's node's InternalIP and
  // status.daemonEndpoints.kubeletEndpoint.Port, as kube-apiserver finds them. False with the
  // error written to `res`.
  struct KubeletTarget {
    std::string container, ip;
    int port = 0;
  };
  bool FindKubelet(const HttpRequest& req, const Target& t, const char* what, HttpResponse& res,
                   KubeletTarget* out) {
    json details = {{"name", t.name}, {"kind", "pods"}};
    Result<ObjectPtr> pod = store.Get(*t.resource, t.ns, t.name, nullptr);
    if (!pod.ok()) return WriteError(res, pod.status(), details), false;
    std::vector<std::string> names;
    if ((**pod).contains("spec") && (**pod)["spec"].contains("containers")) {
      for (const json& c : (**pod)["spec"]["containers"]) names.push_back(Str(c, "name"));
    }
    std::string container = req.Param("container");
    if (container.empty()) {
      if (names.size() != 1) {
        std::string list;
        for (const std::string& n : names) list += (list.empty() ? "" : " ") + n;
        WriteStatus(res, 400, "BadRequest",
                    "a container name must be specified for pod " + t.name +
                        ", choose one of: [" + list + "]");
        return false;
      }
      container = names[0];
    } else if (std::find(names.begin(), names.end(), container) == names.end()) {
      WriteStatus(res, 400, "BadRequest",
                  "container " + container + " is not valid for pod " + t.name);
      return false;
    }
    std::string node = FieldValue(**pod, "spec.nodeName");
    if (node.empty()) {
      WriteStatus(res, 400, "BadRequest",
                  "container \"" + container + "\" in pod \"" + t.name +
                      "\" is waiting to start: the pod is not scheduled yet");
      return false;
    }
    const ResourceInfo* nodes = registry.Find("", "v1", "nodes");
    Result<ObjectPtr> n = store.Get(*nodes, "", node, nullptr);
    if (!n.ok()) return WriteError(res, n.status(), {{"name", node}, {"kind", "nodes"}}), false;
    const json& st = (**n).value("status", json::object());
    std::string ip;
    for (const json& a : st.value("addresses", json::array())) {
      if (Str(a, "type") == "InternalIP") ip = Str(a, "address");
    }
    int kubelet_port = 0;
    if (st.contains("daemonEndpoints") && st["daemonEndpoints"].contains("kubeletEndpoint")) {
      kubelet_port = st["daemonEndpoints"]["kubeletEndpoint"].value("Port", 0);
    }
    if (ip.empty() || kubelet_port <= 0) {
      WriteStatus(res, 400, "BadRequest",
                  "node " + node + " has no kubelet to ask for " + what);
      return false;
    }
    *out = {container, ip, kubelet_port};
    return true;
  }

  // pods/exec: the client's upgrade request goes to the pod's kubelet (/exec/<ns>/<pod>/<c>)
  // and, once the kubelet switches protocols, the bytes are relayed both ways, as
  // kube-apiserver's upgrade-aware proxy does (without its WebSocket-to-SPDY translation: the
  // simulated kubelet speaks WebSocket itself).
  void Exec(const HttpRequest& req, const Target& t, HttpResponse& res) {
    KubeletTarget k;
    if (!FindKubelet(req, t, "exec", res, &k)) return;
    if (req.Header("Upgrade").empty()) {
      return WriteStatus(res, 400, "BadRequest", "Upgrade request required");
    }
    // The kubelet's query, as kube-apiserver writes it from PodExecOptions: command (repeated),
    // then input, output, error and tty as "1" for the streams asked for.
    std::string path = "/exec/" + t.ns + "/" + t.name + "/" + k.container;
    char sep = '?';
    auto range = req.params.equal_range("command");
    for (auto it = range.first; it != range.second; ++it) {
      path += sep + std::string("command=") + net::wire::PercentEncode(it->second);
      sep = '&';
    }
    for (auto [option, kubelet_name] : {std::pair{"stdin", "input"}, std::pair{"stdout", "output"},
                                       std::pair{"stderr", "error"}, std::pair{"tty", "tty"}}) {
      std::string v = req.Param(option);
      if (v == "true" || v == "1") {
        path += sep + std::string(kubelet_name) + "=1";
        sep = '&';
      }
    }
    std::vector<std::pair<std::string, std::string>> forward;
    for (const auto& [key, value] : req.headers) {
      for (const char* name : {"Upgrade", "Connection", "Sec-WebSocket-Key",
                               "Sec-WebSocket-Version", "Sec-WebSocket-Protocol",
                               "X-Stream-Protocol-Version"}) {
        if (::strcasecmp(key.c_str(), name) == 0) forward.emplace_back(name, value);
      }
    }
    Result<KubeletUpgradeReply> r = KubeletUpgrade(k.ip, k.port, req.method, path, forward);
    if (!r.ok()) return WriteStatus(res, 500, "InternalError", r.status().message());
    if (r->status != 101) {
      std::string message = r->body;
      while (!message.empty() && (message.back() == '\n' || message.back() == '\r')) {
        message.pop_back();
      }
      return WriteStatus(res, r->status >= 400 ? r->status : 500,
                         r->status == 404 ? "NotFound" : "BadRequest", message);
    }
    res.status = 101;
    for (const auto& [key, value] : r->headers) {
      if (key == "connection" || key == "content-length" || key == "content-type") continue;
      res.headers.emplace_back(key, value);
    }
    std::shared_ptr<KubeletStream> kubelet = std::move(r->stream);
    res.upgrade = [kubelet, early = std::move(r->early)](net::UpgradedConnection& client) {
      RelayUpgraded(client, *kubelet, early);
    };
  }

  // Copies bytes both ways between a client and a kubelet until either side ends.
  static void RelayUpgraded(net::UpgradedConnection& client, KubeletStream& kubelet,
                            const std::string& early) {
    if (!early.empty() && !client.Write(early)) return;
    std::string buf;
    while (client.ServerRunning()) {
      pollfd fds[2] = {{client.fd(), POLLIN, 0}, {kubelet.fd(), POLLIN, 0}};
      int timeout = client.HasBuffered() || kubelet.HasBuffered() ? 0 : 250;
      if (::poll(fds, 2, timeout) < 0 && errno != EINTR) return;
      if (client.HasBuffered() || (fds[0].revents & (POLLIN | POLLHUP | POLLERR)) != 0) {
        buf.clear();
        if (client.Read(&buf) == net::UpgradedConnection::ReadResult::kEnd) return;
        if (!buf.empty() && !kubelet.Write(buf)) return;
      }
      if (kubelet.HasBuffered() || (fds[1].revents & (POLLIN | POLLHUP | POLLERR)) != 0) {
        buf.clear();
        if (!kubelet.Read(&buf)) return;
        if (!buf.empty() && !client.Write(buf)) return;
      }
    }
  }

  // pods/log: what the pod's node serves for the container, fetched from its kubelet.
  void Log(const HttpRequest& req, const Target& t, HttpResponse& res) {
    KubeletTarget k;
    if (!FindKubelet(req, t, "logs", res, &k)) return;
    std::string path = "/containerLogs/" + t.ns + "/" + t.name + "/" + k.container;
    if (req.HasParam("tailLines")) path += "?tailLines=" + req.Param("tailLines");
    Result<KubeletReply> r = KubeletGet(k.ip, k.port, path);
    if (!r.ok()) return WriteStatus(res, 500, "InternalError", r.status().message());
    if (r->status != 200) {
      return WriteStatus(res, r->status == 404 ? 404 : 500,
                         r->status == 404 ? "NotFound" : "InternalError", r->body);
    }
    res.SetText(200, r->body);
  }

  void Bind(const HttpRequest& req, const Target& t, HttpResponse& res) {
    json details = {{"name", t.name}, {"kind", "pods"}};
    json body = json::parse(req.body, nullptr, false);
    if (body.is_discarded() || !body.is_object()) return BadBody(res);
    if (body.contains("kind") && Str(body, "kind") != "Binding") {
      return WriteStatus(res, 400, "BadRequest", "expected a Binding object");
    }
    std::string node = body.contains("target") ? Str(body["target"], "name") : "";
    if (node.empty()) {
      return WriteStatus(res, 422, "Invalid",
                         "Binding \"" + t.name + "\" is invalid: target.name: Required value");
    }
    json annotations = body.contains("metadata") && body["metadata"].is_object()
                           ? body["metadata"].value("annotations", json())
                           : json();
    Result<ObjectPtr> bound = store.Update(*t.resource, t.ns, t.name, [&](const json&, json& pod) {
      std::string current = FieldValue(pod, "spec.nodeName");
      if (!current.empty()) {
        return AbortedError("Operation cannot be fulfilled on pods/binding \"" + t.name +
                            "\": pod " + t.name + " is already assigned to node \"" + current +
                            "\"");
      }
      if (!pod["spec"].is_object()) pod["spec"] = json::object();
      pod["spec"]["nodeName"] = node;
      if (annotations.is_object()) {
        for (const auto& [k, v] : annotations.items()) {
          if (v.is_string()) pod["metadata"]["annotations"][k] = v;
        }
      }
      if (!pod["status"].is_object()) pod["status"] = json::object();
      json& conds = pod["status"]["conditions"];
      if (!conds.is_array()) conds = json::array();
      json cond = {{"type", "PodScheduled"},
                   {"status", "True"},
                   {"lastProbeTime", nullptr},
                   {"lastTransitionTime", NowRfc3339()}};
      bool replaced = false;
      for (json& c : conds) {
        if (Str(c, "type") == "PodScheduled") {
          c = cond;
          replaced = true;
        }
      }
      if (!replaced) conds.push_back(cond);
      return OkStatus();
    });
    if (!bound.ok()) return WriteError(res, bound.status(), details);
    json ok = {{"kind", "Status"},
               {"apiVersion", "v1"},
               {"metadata", json::object()},
               {"status", "Success"},
               {"code", 201}};
    WriteObject(res, 201, ok);
  }

  // How long a pod deletion waits for its kubelet, as kube-apiserver decides it: no wait for a
  // pod on no node or one that has finished; else the request's grace period (DeleteOptions or
  // ?gracePeriodSeconds=; 0 with --force), else the pod's terminationGracePeriodSeconds (30).
  static int64_t PodGracePeriod(const json& pod, std::optional<int64_t> asked) {
    std::string phase = Str(pod.value("status", json::object()), "phase");
    if (Str(pod.value("spec", json::object()), "nodeName").empty() || phase == "Succeeded" ||
        phase == "Failed") {
      return 0;
    }
    if (asked) return std::max<int64_t>(0, *asked);
    const json spec = pod.value("spec", json::object());
    auto it = spec.find("terminationGracePeriodSeconds");
    return it != spec.end() && it->is_number_integer() ? std::max<int64_t>(0, it->get<int64_t>())
                                                       : 30;
  }

  void Delete(const HttpRequest& req, const Target& t, HttpResponse& res) {
    const ResourceInfo& r = *t.resource;
    json details = {{"name", t.name}, {"group", r.group}, {"kind", r.resource}};
    if (!t.sub.empty()) return WriteStatus(res, 405, "MethodNotAllowed", "method not allowed");
    std::string want_uid, want_rv;
    std::optional<int64_t> grace;
    if (req.HasParam("gracePeriodSeconds")) {
      const std::string v = req.Param("gracePeriodSeconds");
      char* end = nullptr;
      long long n = std::strtoll(v.c_str(), &end, 10);
      if (v.empty() || *end != '\0') {
        return WriteStatus(res, 400, "BadRequest",
                           "gracePeriodSeconds \"" + v + "\": not an integer");
      }
      grace = n;
    }
    if (!req.body.empty()) {
      json opts = json::parse(req.body, nullptr, false);
      if (opts.is_discarded() || !opts.is_object()) return BadBody(res);
      if (opts.contains("preconditions") && opts["preconditions"].is_object()) {
        want_uid = Str(opts["preconditions"], "uid");
        want_rv = Str(opts["preconditions"], "resourceVersion");
      }
      if (opts.contains("gracePeriodSeconds") && opts["gracePeriodSeconds"].is_number_integer()) {
        grace = opts["gracePeriodSeconds"].get<int64_t>();
      }
    }
    auto precondition = [&](const json& current) {
      if (!want_uid.empty() && want_uid != Str(current["metadata"], "uid")) {
        return AbortedError("Operation cannot be fulfilled on " + r.qualified() + " \"" + t.name +
                            "\": Precondition failed: UID in precondition: " + want_uid +
                            ", UID in object meta: " + Str(current["metadata"], "uid"));
      }
      return CheckResourceVersion(r, t.name, want_rv, current);
    };
    if (r.group.empty() && r.kind == "Pod") {
      // Graceful deletion: a pod on a node stays, Terminating (deletionTimestamp set), until its
      // kubelet has stopped the containers and deletes it with no grace period. A second
      // deletion may shorten the grace, never lengthen it.
      Result<ObjectPtr> current = store.Get(r, t.ns, t.name);
      if (!current.ok()) return WriteError(res, current.status(), details);
      if (Status s = precondition(**current); !s.ok()) return WriteError(res, s, details);
      const int64_t g = PodGracePeriod(**current, grace);
      const json& md = (**current)["metadata"];
      auto had = md.find("deletionGracePeriodSeconds");
      const bool already = had != md.end() && had->is_number_integer();
      if (g > 0 && already && had->get<int64_t>() <= g) return WriteObject(res, 200, **current);
      if (g > 0) {
        Result<ObjectPtr> marked =
            store.Update(r, t.ns, t.name, [&](const json& now, json& next) -> Status {
              HAMI_RETURN_IF_ERROR(precondition(now));
              next["metadata"]["deletionTimestamp"] = Rfc3339After(g);
              next["metadata"]["deletionGracePeriodSeconds"] = g;
              return OkStatus();
            });
        if (!marked.ok()) return WriteError(res, marked.status(), details);
        return WriteObject(res, 200, **marked);
      }
    }
    Result<ObjectPtr> gone = store.Delete(r, t.ns, t.name, precondition);
    if (!gone.ok()) return WriteError(res, gone.status(), details);
    if (r.group.empty() && r.kind == "Namespace") DeleteNamespaceContents(t.name);
    if (r.group.empty() && r.kind == "Pod") {
      json last = **gone;
      if (!last["metadata"].contains("deletionTimestamp")) {
        last["metadata"]["deletionTimestamp"] = NowRfc3339();
      }
      last["metadata"]["deletionGracePeriodSeconds"] = 0;
      return WriteObject(res, 200, last);
    }
    details["uid"] = Str((**gone)["metadata"], "uid");
    json ok = {{"kind", "Status"},
               {"apiVersion", "v1"},
               {"metadata", json::object()},
               {"status", "Success"},
               {"details", details}};
    WriteObject(res, 200, ok);
  }

  void DeleteCollection(const HttpRequest& req, const Target& t, HttpResponse& res) {
    Result<Selectors> sel = ParseSelectors(req);
    if (!sel.ok()) return WriteError(res, sel.status());
    int64_t revision = 0;
    json items = json::array();
    for (const ObjectPtr& o : store.List(*t.resource, t.ns, &revision)) {
      if (!sel->Matches(*o)) continue;
      const json& md = (*o)["metadata"];
      Result<ObjectPtr> gone =
          store.Delete(*t.resource, Str(md, "namespace"), Str(md, "name"), nullptr);
      if (gone.ok()) items.push_back(**gone);
    }
    json list = {{"kind", t.resource->list_kind()},
                 {"apiVersion", t.resource->api_version()},
                 {"metadata", {{"resourceVersion", std::to_string(store.revision())}}},
                 {"items", items}};
    WriteObject(res, 200, list);
  }

  void DeleteNamespaceContents(const std::string& ns) {
    for (const ResourceInfo& r : registry.all()) {
      if (!r.namespaced) continue;
      int64_t revision = 0;
      for (const ObjectPtr& o : store.List(r, ns, &revision)) {
        (void)store.Delete(r, ns, Str((*o)["metadata"], "name"), nullptr);
      }
    }
  }
};

ApiServer::ApiServer(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
ApiServer::~ApiServer() { Stop(); }

Status ApiServer::Impl::ConfigureTls(net::HttpServerOptions& server_options) {
  const ApiServerOptions& o = options;
  if (!o.tls_cert_file.empty() || !o.tls_key_file.empty()) {
    if (o.tls_cert_file.empty() || o.tls_key_file.empty()) {
      return InvalidArgumentError("--tls-cert and --tls-key go together");
    }
    server_options.tls = net::TlsOptions{o.tls_cert_file, o.tls_key_file};
    ca_pem = ReadFileToString(o.tls_cert_file).value_or("");
  } else if (o.self_signed) {
    HAMI_ASSIGN_OR_RETURN(
        net::CertificatePem pem,
        net::GenerateSelfSignedCertificate("hami-sim-apiserver", {"localhost"}, {"127.0.0.1"}));
    HAMI_ASSIGN_OR_RETURN(server_options.certificate, net::CertificateSource::FromPem(pem));
    ca_pem = pem.cert_pem;
  }
  return OkStatus();
}

// /version, /debug/authorization, and the API discovery documents.
void ApiServer::Impl::HandleDiscovery(net::HttpServer& s) {
  Impl* self = this;
  s.Handle("GET", "/version", [self](const HttpRequest& req, HttpResponse& res) {
    if (!self->Authorized(req, res)) return;
    json v = {{"major", "1"},
              {"minor", "32"},
              {"gitVersion", "v1.32.0-hami-sim"},
              {"gitCommit", "0000000000000000000000000000000000000000"},
              {"gitTreeState", "clean"},
              {"buildDate", "2026-01-01T00:00:00Z"},
              {"goVersion", "go1.23"},
              {"compiler", "gc"},
              {"platform", "linux/amd64"}};
    WriteObject(res, 200, v);
  });
  s.Handle("GET", "/debug/authorization", [self](const HttpRequest& req, HttpResponse& res) {
    std::optional<UserInfo> user = self->Authenticate(req, res);
    if (!user) return;
    if (self->options.rbac && user->name != "hami-sim-admin") {
      return WriteStatus(
          res, 403, "Forbidden",
          "forbidden: User \"" + user->name + "\" cannot get path \"/debug/authorization\"");
    }
    res.SetJson(200, self->DecisionReport());
  });
  s.Handle("GET", "/api", [self](const HttpRequest& req, HttpResponse& res) {
    if (!self->Authorized(req, res)) return;
    res.SetJson(200, self->registry.CoreVersions(self->options.host + ":" +
                                                 std::to_string(self->http->port())));
  });
  s.Handle("GET", "/apis", [self](const HttpRequest& req, HttpResponse& res) {
    if (!self->Authorized(req, res)) return;
    res.SetJson(200, self->registry.Groups());
  });
}

// The OpenAPI v3 index and its per group-version documents.
void ApiServer::Impl::HandleOpenApi(net::HttpServer& s) {
  Impl* self = this;
  s.Handle("GET", "/openapi/v3", [self](const HttpRequest& req, HttpResponse& res) {
    if (!self->Authorized(req, res)) return;
    res.SetJson(200, self->registry.OpenApiV3Index());
  });
  s.HandlePrefix("GET", "/openapi/v3/", [self](const HttpRequest& req, HttpResponse& res) {
    if (!self->Authorized(req, res)) return;
    std::vector<std::string> seg = Split(req.path);  // openapi v3 api v1 | openapi v3 apis g v
    std::string doc;
    if (seg.size() == 4 && seg[2] == "api") {
      doc = self->registry.OpenApiV3GroupVersion("", seg[3]);
    } else if (seg.size() == 5 && seg[2] == "apis") {
      doc = self->registry.OpenApiV3GroupVersion(seg[3], seg[4]);
    }
    if (doc.empty()) {
      return WriteStatus(res, 404, "NotFound", "the server could not find the requested resource");
    }
    res.SetJson(200, std::move(doc));
  });
}

// Every verb on the core (/api/) and group (/apis/) resource paths.
void ApiServer::Impl::HandleResources(net::HttpServer& s) {
  Impl* self = this;
  auto resource = [self](const HttpRequest& req, HttpResponse& res) {
    self->HandleResource(req, res);
  };
  for (const char* method : {"GET", "POST", "PUT", "PATCH", "DELETE"}) {
    s.HandlePrefix(method, "/api/", resource);
    s.HandlePrefix(method, "/apis/", resource);
  }
}

Result<std::unique_ptr<ApiServer>> ApiServer::Start(ApiServerOptions options) {
  if (options.rbac && options.token.empty()) {
    return InvalidArgumentError("RBAC needs an administrator token (--token)");
  }
  auto impl = std::make_unique<Impl>(std::move(options));
  const ApiServerOptions& o = impl->options;
  net::HttpServerOptions http;
  http.host = o.host;
  http.port = o.port;
  http.worker_threads = o.worker_threads;
  http.keep_alive_timeout = std::chrono::seconds(10);
  HAMI_RETURN_IF_ERROR(impl->ConfigureTls(http));
  HAMI_ASSIGN_OR_RETURN(impl->http, net::HttpServer::Create(std::move(http)));
  impl->SeedNamespaces();

  net::HttpServer& s = *impl->http;
  impl->HandleDiscovery(s);
  impl->HandleOpenApi(s);
  impl->HandleResources(s);
  impl->watches.Start();
  HAMI_ASSIGN_OR_RETURN(impl->port, s.Start());
  // A wildcard bind address is reached through loopback (which the generated cert names too).
  std::string host = o.host == "0.0.0.0" || o.host.empty() ? "127.0.0.1" : o.host;
  impl->url =
      std::string(s.tls() ? "https://" : "http://") + host + ":" + std::to_string(impl->port);
  return std::unique_ptr<ApiServer>(new ApiServer(std::move(impl)));
}

void ApiServer::Stop() {
  if (!impl_->http) return;
  impl_->store.Close();
  impl_->watches.Stop();  // ends every watch stream
  impl_->http->Stop();
  impl_->http.reset();
}

int ApiServer::port() const { return impl_->port; }
std::string ApiServer::url() const { return impl_->url; }
bool ApiServer::tls() const { return !impl_->ca_pem.empty(); }
const std::string& ApiServer::ca_pem() const { return impl_->ca_pem; }
int64_t ApiServer::revision() const { return impl_->store.revision(); }

void ApiServer::ServeInProcess(const net::HttpRequest& req, net::HttpResponse& res) const {
  if (!impl_->http) {
    res.SetText(503, "the API server is stopped\n");
    return;
  }
  impl_->http->Serve(req, res);
}

std::map<std::string, uint64_t> ApiServer::RequestCounts() const {
  MutexLock lock(impl_->counts_mu);
  return impl_->request_counts;
}

std::string ApiServer::Kubeconfig(const std::string& token) const {
  const std::string& user_token = token.empty() ? impl_->options.token : token;
  std::string out =
      "apiVersion: v1\n"
      "kind: Config\n"
      "clusters:\n"
      "- name: hami-sim\n"
      "  cluster:\n"
      "    server: " +
      impl_->url + "\n";
  if (!impl_->ca_pem.empty()) {
    out += "    certificate-authority-data: " + Base64Encode(impl_->ca_pem) + "\n";
  }
  out += "users:\n- name: hami-sim\n  user:";
  out += user_token.empty() ? " {}\n" : "\n    token: " + user_token + "\n";
  out +=
      "contexts:\n"
      "- name: hami-sim\n"
      "  context:\n"
      "    cluster: hami-sim\n"
      "    user: hami-sim\n"
      "    namespace: default\n"
      "current-context: hami-sim\n";
  return out;
}

Status ApiServer::WriteKubeconfig(const std::string& path, const std::string& token) const {
  return hami::WriteFileAtomically(path, Kubeconfig(token));
}

Result<std::string> ApiServer::IssueServiceAccountToken(const std::string& ns,
                                                        const std::string& name) const {
  if (!impl_->options.rbac) return FailedPreconditionError("RBAC is off: tokens are not checked");
  return impl_->IssueToken(ns, name);
}

std::string ApiServer::AuthorizationReport() const { return impl_->DecisionReport(); }

}  // namespace hami::sim
