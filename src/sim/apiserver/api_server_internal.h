// Internals of ApiServer shared by its source files, and only by them (api_server*.cc): the
// Impl class that holds the server's state and answers every request, and the helpers for
// request paths and errors in the shape of metav1.Status. The full nlohmann/json header is
// included here because only those .cc files see it.
//
// Where Impl's parts live: api_server.cc (Start, Stop, TLS, the public accessors),
// api_server_routes.cc (routing, discovery, list and watch), api_server_auth.cc
// (authentication, RBAC, service account tokens), api_server_writes.cc (create, update, patch),
// api_server_pods.cc (bindings, pods/log, pods/exec, deletion), api_server_common.cc (helpers).
//
// Thread safety: the request handlers run concurrently on the HTTP workers. `store` and
// `watches` are thread-safe; counts_mu guards the request counts and rbac_mu the issued tokens
// and the authorization decisions; the rest is written by Start only.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "common/status.h"
#include "common/thread_annotations.h"
#include "net/http_server.h"
#include "sim/apiserver/api_server.h"
#include "sim/apiserver/kubelet_proxy.h"
#include "sim/apiserver/rbac.h"
#include "sim/apiserver/resources.h"
#include "sim/apiserver/selectors.h"
#include "sim/apiserver/store.h"
#include "sim/apiserver/watch_hub.h"

namespace hami::sim {
namespace api_server_internal {

using json = nlohmann::json;

// ---- small helpers -------------------------------------------------------------------------

// Now plus `seconds`, in the API's timestamp form.
std::string Rfc3339After(int64_t seconds);
std::string NowRfc3339();
// `n` characters drawn from the alphabet of generated name suffixes.
std::string RandomSuffix(size_t n);
std::string NewUid();
// Whether `name` may name an object: not empty, at most 253 bytes, no '/', '%' or blanks.
bool ValidName(const std::string& name);

// ---- errors in the shape of metav1.Status --------------------------------------------------

json StatusObject(int code, const std::string& reason, const std::string& message,
                  const json& details = json());
// The watch event that ends a stream whose position fell out of the history window.
std::string ExpiredEventLine(const std::string& message);
void WriteStatus(net::HttpResponse& res, int code, const std::string& reason,
                 const std::string& message, const json& details = json());
// `status` as the HTTP code and Status reason its code maps to.
void WriteError(net::HttpResponse& res, const Status& status, const json& details = json());
void WriteObject(net::HttpResponse& res, int code, const json& object);

// ---- request targets -----------------------------------------------------------------------

struct Target {
  std::string group, version;
  const ResourceInfo* resource = nullptr;
  std::string ns;
  std::string name;
  std::string sub;
  bool discovery = false;  // /api/v1 or /apis/<g>[/<v>] itself
};

// The non-empty segments of `path`.
std::vector<std::string> Split(const std::string& path);
// What an /api/... or /apis/... path names; NotFound for anything the server does not serve.
Result<Target> ParseTarget(const ResourceRegistry& registry, const std::string& path);

// kubectl's Table output is asked for.
bool WantsTable(const net::HttpRequest& req);

}  // namespace api_server_internal

// ---- the server ----------------------------------------------------------------------------

class ApiServer::Impl {
 public:
  using json = nlohmann::json;
  using HttpRequest = net::HttpRequest;
  using HttpResponse = net::HttpResponse;
  using Target = api_server_internal::Target;

  explicit Impl(ApiServerOptions o)
      : options(std::move(o)),
        store(options.history_window),
        watches(store, registry, api_server_internal::ExpiredEventLine) {}

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

  // --- authentication and RBAC (api_server_auth.cc) ---

  // RBAC state: issued ServiceAccount tokens and the decisions made.
  struct Decisions {
    std::map<std::string, uint64_t> allowed, denied;
  };
  mutable Mutex rbac_mu;
  mutable std::map<std::string, std::pair<std::string, std::string>> sa_tokens
      GUARDED_BY(rbac_mu);
  mutable std::map<std::string, Decisions> decisions GUARDED_BY(rbac_mu);

  // Who sent the request: nullopt (and a 401 written) when it is not authenticated.
  std::optional<UserInfo> Authenticate(const HttpRequest& req, HttpResponse& res) const;
  bool Authorized(const HttpRequest& req, HttpResponse& res) const {
    return Authenticate(req, res).has_value();
  }
  // The RBAC decision for a resource request; writes the 403 when refused.
  bool Permitted(const HttpRequest& req, const UserInfo& user, const Target& t,
                 HttpResponse& res) const;
  Result<std::string> IssueToken(const std::string& ns, const std::string& name) const;
  // POST serviceaccounts/<name>/token: a TokenRequest answered with a token for the account.
  void TokenRequest(const HttpRequest& req, const Target& t, HttpResponse& res);
  std::string DecisionReport() const;

  // --- writes (api_server_writes.cc) ---

  void SeedNamespaces();
  Result<ObjectPtr> Create(const ResourceInfo& r, const std::string& path_ns, json obj,
                           const std::string& user,
                           std::shared_ptr<const LazyText>* text = nullptr);
  static void ApplyCreateDefaults(const ResourceInfo& r, json& obj);
  // As the real server: `stringData` is write-only, folded into `data` (base64) on every write,
  // its keys winning over `data`'s; `type` defaults to Opaque.
  static void NormalizeSecret(json& obj);
  // Whether anything but metadata and status differs (what bumps metadata.generation).
  static bool SpecChanged(const json& a, const json& b);
  // Carries over what a client may not change with PUT/PATCH and bumps generation when the spec
  // part changed. `sub` is "" or "status".
  static Status FinishUpdate(const ResourceInfo& r, const std::string& sub, const json& current,
                             json& next);
  static Status CheckResourceVersion(const ResourceInfo& r, const std::string& name,
                                     const std::string& wanted, const json& current);
  void Update(const HttpRequest& req, const Target& t, HttpResponse& res);
  void Patch(const HttpRequest& req, const Target& t, HttpResponse& res);

  // --- HTTP handlers (api_server_routes.cc) ---

  void HandleResource(const HttpRequest& req, HttpResponse& res);
  static std::string User(const HttpRequest& req);
  static void BadBody(HttpResponse& res);
  void ServeDiscovery(const Target& t, HttpResponse& res);

  struct Selectors {
    LabelSelector labels;
    FieldSelector fields;
    bool Matches(const json& o) const { return labels.MatchesObject(o) && fields.Matches(o); }
  };
  static Result<Selectors> ParseSelectors(const HttpRequest& req);
  void List(const HttpRequest& req, const Target& t, HttpResponse& res);
  void Watch(const HttpRequest& req, const Target& t, HttpResponse& res);

  // --- pods and deletion (api_server_pods.cc) ---

  // The pod, container and kubelet address a pods/log or pods/exec request is for: the
  // `container` parameter or the pod's only container, and the pod's node's InternalIP and
  // status.daemonEndpoints.kubeletEndpoint.Port, as kube-apiserver finds them. False with the
  // error written to `res`.
  struct KubeletTarget {
    std::string container, ip;
    int port = 0;
  };
  bool FindKubelet(const HttpRequest& req, const Target& t, const char* what, HttpResponse& res,
                   KubeletTarget* out);
  // pods/exec: the client's upgrade request goes to the pod's kubelet (/exec/<ns>/<pod>/<c>)
  // and, once the kubelet switches protocols, the bytes are relayed both ways, as
  // kube-apiserver's upgrade-aware proxy does (without its WebSocket-to-SPDY translation: the
  // simulated kubelet speaks WebSocket itself).
  void Exec(const HttpRequest& req, const Target& t, HttpResponse& res);
  // Copies bytes both ways between a client and a kubelet until either side ends.
  static void RelayUpgraded(net::UpgradedConnection& client, KubeletStream& kubelet,
                            const std::string& early);
  // pods/log: what the pod's node serves for the container, fetched from its kubelet.
  void Log(const HttpRequest& req, const Target& t, HttpResponse& res);
  void Bind(const HttpRequest& req, const Target& t, HttpResponse& res);
  // How long a pod deletion waits for its kubelet, as kube-apiserver decides it: no wait for a
  // pod on no node or one that has finished; else the request's grace period (DeleteOptions or
  // ?gracePeriodSeconds=; 0 with --force), else the pod's terminationGracePeriodSeconds (30).
  static int64_t PodGracePeriod(const json& pod, std::optional<int64_t> asked);
  void Delete(const HttpRequest& req, const Target& t, HttpResponse& res);
  void DeleteCollection(const HttpRequest& req, const Target& t, HttpResponse& res);
  void DeleteNamespaceContents(const std::string& ns);
};

}  // namespace hami::sim
