// ApiServer: the simulated world's Kubernetes API server. An in-memory control plane
// that speaks enough of the real REST API for kubectl, our API client and the scheduler:
//
//   sim::ApiServerOptions opts;            // port 0, plain HTTP, no auth
//   opts.self_signed = true;               // HTTPS with a generated certificate
//   opts.token = "secret";                 // require "Authorization: Bearer secret"
//   auto server = sim::ApiServer::Start(opts).value();
//   server->WriteKubeconfig(dir + "/kubeconfig");   // for kubectl and clients
//   ... server->url() ...
//
// Served: discovery (/api, /api/v1, /apis, /apis/<group>[/<version>], /version), /healthz,
// /readyz, /livez; core/v1 namespaces, nodes, pods (+status, +binding), events, configmaps,
// resourcequotas, services, serviceaccounts, secrets (stringData folded into data);
// events.k8s.io/v1 events; coordination.k8s.io/v1 leases; apps/v1 deployments and daemonsets
// (stored only: no controller runs them); rbac.authorization.k8s.io/v1 roles, rolebindings,
// clusterroles, clusterrolebindings; admissionregistration.k8s.io/v1
// mutatingwebhookconfigurations. Verbs: get, list (label and
// field selectors, Table output for kubectl), watch (?watch=1: JSON lines over chunked HTTP,
// bookmarks, resumption, 410 Gone past the history window), create, update (resourceVersion
// precondition -> 409), patch (JSON merge, JSON patch, and strategic merge with the kinds'
// published merge keys and directives: strategic_merge.h), delete, deletecollection. Pod CREATE
// runs the registered mutating webhooks (see admission.h). Quantities are stored in canonical
// form, as strings, as the real server stores them (quantities.h).
//
// Simplifications (documented, deliberate): deletions are immediate (no graceful termination or
// finalizers; a deleted namespace takes its objects with it at once); list ignores limit/continue
// and resourceVersion (always the latest state); no server-side apply (a 415 that says so); no
// validation beyond names, namespaces, kinds and quantities.
//
// Thread safety: Start/Stop/WriteKubeconfig from the owning thread; the accessors are safe from
// any thread. Requests are served concurrently by the HTTP worker pool.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>

#include "common/status.h"
#include "net/http_server.h"

namespace hami::sim {

struct ApiServerOptions {
  std::string host = "127.0.0.1";
  int port = 0;  // 0 = pick a free port
  // HTTPS with these PEM files (re-read on change), or with a generated certificate for
  // 127.0.0.1/localhost when self_signed is set. Neither: plain HTTP.
  std::string tls_cert_file;
  std::string tls_key_file;
  bool self_signed = false;
  // Non-empty: every request except /healthz, /livez and /readyz needs this bearer token.
  std::string token;
  // RBAC on (needs `token`): the `token` holder is a cluster administrator (group
  // system:masters); a ServiceAccount's token (from a TokenRequest, POST
  // .../serviceaccounts/<name>/token as `kubectl create token` sends, or from
  // IssueServiceAccountToken) acts as that account and is authorized by the stored Roles,
  // ClusterRoles and bindings (see rbac.h); a refused request gets 403 with the standard
  // Forbidden Status. Any other token is 401.
  bool rbac = false;
  // Watch events retained for resumption; older resourceVersions get 410 Gone.
  size_t history_window = 10000;
  // How a watch from a compacted resourceVersion is refused. false: HTTP 410 with a Status body
  // (reason Expired). true: HTTP 200 and a single {"type":"ERROR","object":<that Status>} event,
  // which is what the real server's watch cache usually does. Clients must handle both.
  bool expired_watch_as_error_event = false;
  // How often a watch with allowWatchBookmarks=true gets a BOOKMARK.
  std::chrono::milliseconds bookmark_interval{std::chrono::seconds(10)};
  // Upper bound of one watch request (a smaller ?timeoutSeconds= wins).
  std::chrono::seconds max_watch_duration{std::chrono::minutes(30)};
  int worker_threads = 256;  // each connection (and each open watch) holds one
  // Set: called after every write the server stores (any resource and verb), on the writing
  // thread, once the written state is what reads return. For an in-process harness that waits
  // for the cluster to change (SimCluster::WaitFor) instead of polling it. It must be cheap and
  // must neither block nor call into the server.
  std::function<void()> on_write;
};

class ApiServer {
 public:
  static Result<std::unique_ptr<ApiServer>> Start(ApiServerOptions options);
  ~ApiServer();
  ApiServer(const ApiServer&) = delete;
  ApiServer& operator=(const ApiServer&) = delete;

  // Ends open watches, stops serving. Idempotent.
  void Stop();

  int port() const;
  // "http://127.0.0.1:<port>" or "https://127.0.0.1:<port>".
  std::string url() const;
  bool tls() const;
  // PEM clients should trust for url() ("" for plain HTTP).
  const std::string& ca_pem() const;
  // The current cluster-wide resourceVersion.
  int64_t revision() const;
  // Resource requests served so far, by "<METHOD> <resource>[/<subresource>]" ("GET pods",
  // "PATCH nodes", "POST pods/binding"; watches count as "WATCH pods"). For benchmarks: what a
  // workload costs the API server.
  std::map<std::string, uint64_t> RequestCounts() const;

  // Serves one request on the calling thread without a connection: the same routing, auth,
  // admission, storage and watch events as over HTTP (and counted in RequestCounts), minus the
  // transport. `req.path` is decoded and `req.params` hold the decoded query. A watch comes back
  // as `res.stream`; run it only while the server is up (Stop() ends it). For in-process clients
  // such as the benchmark's device plugins, whose API traffic a cluster serves elsewhere.
  void ServeInProcess(const net::HttpRequest& req, net::HttpResponse& res) const;

  // A kubeconfig (YAML) with one cluster/user/context "hami-sim" (namespace default), for the
  // administrator's token, or for `token` when given.
  std::string Kubeconfig(const std::string& token = "") const;
  Status WriteKubeconfig(const std::string& path, const std::string& token = "") const;

  // With RBAC: a token for the ServiceAccount <ns>/<name> (NotFound when it does not exist). The
  // token stops working when the account is deleted.
  Result<std::string> IssueServiceAccountToken(const std::string& ns,
                                               const std::string& name) const;
  // With RBAC: every authorization decision so far, as JSON text
  // {"<user>": {"allowed": {"<verb> <resource>[.<group>][/<sub>]": n}, "denied": {...}}}. Also
  // served to the administrator at GET /debug/authorization.
  std::string AuthorizationReport() const;

  class Impl;

 private:
  explicit ApiServer(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace hami::sim
