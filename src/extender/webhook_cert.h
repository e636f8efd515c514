// Webhook certificates without a job: hami-scheduler keeps its admission webhook's TLS pair in a
// Secret of its own namespace, issues it from a CA it also keeps there, writes that CA into the
// caBundle of its MutatingWebhookConfiguration, serves the pair, and renews both before they
// expire. This replaces the chart's kube-webhook-certgen Jobs (or cert-manager) when the
// scheduler runs with --webhook-cert-secret.
//
// Two layers:
//  - PlanWebhookCertificates (pure, apart from generating keys): given what the Secret holds and
//    the time, what it should hold and why. Tests drive it with any clock.
//  - WebhookCertManager: the controller over the API client. Replicas share the Secret through
//    the API server's optimistic concurrency: a create that loses the race (AlreadyExists) and an
//    update that loses it (Conflict) re-read and adopt what the winner wrote.
//
//   WebhookCertManager certs(client, clock, options);
//   HAMI_RETURN_IF_ERROR(certs.Bootstrap());          // Secret read or created, pair loaded
//   http_options.certificate = certs.certificate();   // the server follows every renewal
//   ... server->Start() ...
//   certs.Start();                                    // caBundle now, then periodic checks
//
// The Secret (type kubernetes.io/tls) holds tls.crt/tls.key (the serving pair, leaf only),
// ca.crt (the signing CA first, then older CAs kept trusted until they expire: the caBundle) and
// ca.key (the signing CA's key); its owner is the MutatingWebhookConfiguration, so that it goes
// when the configuration is deleted (helm uninstall). Renewal: a certificate is replaced when
// less than a third of its lifetime is left (or less than `renew_before`, when set); the serving
// certificate also when its names differ from the wanted ones, it no longer verifies against the
// signing CA, or its key does not match. The CA is replaced early enough that it always outlives a fresh serving
// certificate; the old CA stays in ca.crt (and so in the caBundle) until it expires, so servers
// still presenting a certificate it signed keep being trusted while they catch up.
#pragma once

#include <chrono>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "common/clock.h"
#include "common/status.h"
#include "common/thread_annotations.h"
#include "k8s/rest_client.h"
#include "net/tls.h"

namespace hami::extender {

// The Secret's four keys, as PEM text ("" when a key is absent).
struct WebhookCertBundle {
  std::string ca_crt;   // signing CA first, then older CAs still trusted
  std::string ca_key;   // the signing CA's private key
  std::string tls_crt;  // serving certificate
  std::string tls_key;  // its private key
};

struct WebhookCertPolicy {
  std::vector<std::string> dns_names;     // the serving certificate's DNS names
  std::vector<std::string> ip_addresses;  // and IP addresses
  std::chrono::seconds ca_validity{std::chrono::hours(24 * 3650)};
  std::chrono::seconds serving_validity{std::chrono::hours(24 * 365)};
  // 0: renew a certificate when less than a third of its lifetime is left.
  std::chrono::seconds renew_before{0};
};

// The names a webhook behind Service `service` in `ns` is reached by (`svc`, `svc.ns`,
// `svc.ns.svc`, `svc.ns.svc.cluster.local`, `localhost`), plus 127.0.0.1 (kube-scheduler calls the
// extender at https://127.0.0.1:443) and `extra_hosts` (DNS names or IP addresses, e.g. a custom
// webhook URL's host) into the policy's name lists, without duplicates.
void SetServingNames(const std::string& service, const std::string& ns,
                     const std::vector<std::string>& extra_hosts, WebhookCertPolicy& policy);

// InvalidArgument when the durations cannot work: a renewal threshold at or beyond the serving
// validity would renew on every check, and a CA must outlive two serving certificates so that one
// can always be issued before the CA itself is due.
Status ValidatePolicy(const WebhookCertPolicy& policy);

// Why the signing CA (`ca`) must be replaced at `now`, or "" when it need not.
std::string CaRenewalReason(const net::CertificateInfo& ca, const WebhookCertPolicy& policy,
                            net::CertTime now);
// Why the serving certificate (`serving`) must be replaced at `now`, or "" when it need not. Its
// signature and key are checked by PlanWebhookCertificates, which has the PEM text.
std::string ServingRenewalReason(const net::CertificateInfo& serving,
                                 const WebhookCertPolicy& policy, net::CertTime now);

struct WebhookCertPlan {
  WebhookCertBundle bundle;      // what the Secret should hold
  bool changed = false;          // bundle differs from the input
  bool new_ca = false;           // a CA was generated (bundle.ca_crt changed)
  std::string reason;            // why it changed; "" when unchanged
  net::CertificateInfo ca;       // the signing CA of `bundle`
  net::CertificateInfo serving;  // the serving certificate of `bundle`
};

// What the Secret should hold at `now`, given what it holds (`current`; nullopt when there is no
// Secret). Unparseable or missing parts are replaced, never fatal: a Secret written by another
// tool without a CA key gets a new CA. Errors only when OpenSSL cannot generate or sign.
Result<WebhookCertPlan> PlanWebhookCertificates(const std::optional<WebhookCertBundle>& current,
                                                const WebhookCertPolicy& policy, net::CertTime now);

struct WebhookCertOptions {
  std::string ns;           // the Secret's namespace
  std::string secret_name;  // e.g. "hami-scheduler-tls"
  std::string webhook_config_name = "hami-webhook";
  WebhookCertPolicy policy;
  std::chrono::milliseconds check_interval{std::chrono::hours(1)};
  // After a failed round (API error, configuration not there yet); capped by check_interval.
  std::chrono::milliseconds retry_interval{std::chrono::seconds(10)};
};

// API calls made: secrets get/create/update (options.ns, options.secret_name; update also sets
// the owner of a Secret made before the configuration existed),
// mutatingwebhookconfigurations get/patch (options.webhook_config_name; JSON patch).
//
// Thread safety: Bootstrap and SyncOnce from one thread at a time, never concurrently with the
// loop Start() runs; certificate() from any thread; Start/Stop from the owning thread.
class WebhookCertManager {
 public:
  // `client` and `clock` must outlive the manager. The clock gives the time certificates are
  // judged and issued at, and paces the loop.
  WebhookCertManager(k8s::RestClient& client, hami::Clock& clock, WebhookCertOptions options);
  ~WebhookCertManager();
  WebhookCertManager(const WebhookCertManager&) = delete;
  WebhookCertManager& operator=(const WebhookCertManager&) = delete;

  // Reads the Secret (creating, renewing or adopting it as needed) and loads its pair into
  // certificate(). Errors are the API's (e.g. PermissionDenied when RBAC lacks secrets access).
  Status Bootstrap();
  // The pair to serve; null before a successful Bootstrap. Follows every renewal.
  std::shared_ptr<net::CertificateSource> certificate() const;

  // One round: the Secret (renewed when due, reloaded when another replica changed it), then the
  // caBundle of every webhook of the configuration. NotFound when the configuration is missing.
  Status SyncOnce();

  // Runs SyncOnce now and then every check_interval (retry_interval after a failure) on a
  // background thread until Stop().
  void Start();
  void Stop();

  // The Secret contents in use (tests, diagnostics).
  WebhookCertBundle bundle() const;

 private:
  Status SyncSecret();
  Status PatchCaBundle();
  // Makes the webhook configuration `config` an owner of the Secret, when it is not yet.
  Status SetSecretOwner(const k8s::Object& config);
  // Makes `bundle` (stored as resourceVersion `rv`) the one served.
  Status Adopt(const WebhookCertBundle& bundle, const std::string& rv);
  std::string SecretRef() const;

  k8s::RestClient& client_;
  hami::Clock& clock_;
  const WebhookCertOptions options_;

  mutable Mutex mu_;
  std::shared_ptr<net::CertificateSource> source_ GUARDED_BY(mu_);
  WebhookCertBundle bundle_ GUARDED_BY(mu_);
  // Only the sync thread (Bootstrap/SyncOnce callers) touches these.
  std::string secret_rv_;  // resourceVersion of the Secret last adopted

  hami::Cancellation stop_;
  std::thread loop_;
};

}  // namespace hami::extender
