// hami-scheduler: scheduler extender (/filter, /bind), mutating admission webhook (/webhook) and
// the scheduler's metrics (:9395). Flags follow upstream HAMi's scheduler so existing Helm values
// and manifests keep working; Go-style single-dash long flags (-v=4, -leader-elect) are accepted.
//
//   hami-scheduler --http_bind=0.0.0.0:443 --cert_file=/tls/tls.crt --key_file=/tls/tls.key
//       --scheduler-name=hami-scheduler --metrics-bind-address=:9395
//       --device-config-file=/device-config.yaml --leader-elect=true
//       --leader-elect-resource-name=hami-scheduler --leader-elect-resource-namespace=kube-system
//
// The webhook's TLS pair comes from --cert_file/--key_file (upstream's way: a Secret filled by the
// chart's certificate Jobs or cert-manager, mounted at /tls and re-read when it changes), or is
// managed by the scheduler itself with --webhook-cert-secret=hami-scheduler-tls: the Secret in
// $POD_NAMESPACE is created (CA + serving certificate) or reused, the caBundle of
// --webhook-config-name is kept in step, and both are renewed in the background
// (scheduler/webhook_cert.h). RBAC for that mode: secrets get/create/update in the namespace,
// mutatingwebhookconfigurations get/patch.
//
// The API server comes from --kubeconfig, else $KUBECONFIG, else the in-cluster service account.
// Once the extender serves it prints "listening on <url>" for people and, given --ready-file,
// writes its addresses there for programs (common/ready_file.h).
#include <CLI/CLI.hpp>
#include <cstdio>
#include <memory>
#include <optional>
#include <string>

#include "common/go_flags.h"
#include "common/log.h"
#include "common/ready_file.h"
#include "common/stop_signals.h"
#include "extender/flags.h"
#include "extender/service.h"
#include "extender/webhook_cert.h"
#include "k8s/config.h"
#include "k8s/rest_client.h"
#include "net/http_server.h"

namespace {

using hami::Result;
using hami::Status;
namespace extender = hami::extender;

int Die(const std::string& what) {
  HAMI_LOG(Error) << what;
  return 2;
}

Result<std::unique_ptr<hami::k8s::RestClient>> ApiClient(const extender::SchedulerConfig& c) {
  Result<hami::k8s::RestConfig> rest = hami::k8s::LoadRestConfig(c.kubeconfig, c.context);
  if (!rest.ok()) return rest.status().WithContext("API server config");
  rest->qps = c.kube_qps;
  rest->burst = c.kube_burst;
  rest->timeout = c.kube_timeout;
  rest->user_agent = "hami-scheduler";
  Result<std::unique_ptr<hami::k8s::RestClient>> client = hami::k8s::RestClient::Create(*rest);
  if (!client.ok()) return client.status().WithContext("API client");
  return client;
}

}  // namespace

int main(int argc, char** argv) {
  hami::StopSignals signals;  // before any thread starts: every thread inherits the mask
  CLI::App app{"hami-scheduler: HAMi-compatible scheduler extender, webhook and metrics"};
  extender::SchedulerFlags flags = extender::DefaultSchedulerFlags();
  extender::AddSchedulerFlags(app, &flags);
  if (std::optional<int> exit = hami::ParseGoStyleFlags(app, argc, argv)) return *exit;
  Result<extender::SchedulerConfig> config = extender::SchedulerConfigFromFlags(flags);
  if (!config.ok()) return Die(config.status().message());
  hami::log::SetVerbosity(config->verbosity);  // --debug raises -v to 4
  for (const std::string& w : config->warnings) HAMI_LOG(Warning) << w;
  config->options.version = HAMI_VERSION;

  Result<std::unique_ptr<hami::k8s::RestClient>> client = ApiClient(*config);
  if (!client.ok()) return Die(client.status().ToString());
  Result<std::unique_ptr<extender::SchedulerService>> svc =
      extender::SchedulerService::Create(**client, config->device_config, config->options);
  if (!svc.ok()) return Die(svc.status().ToString());

  hami::net::HttpServerOptions& http = config->http;
  std::unique_ptr<extender::WebhookCertManager> certs;
  if (config->cert) {
    certs = std::make_unique<extender::WebhookCertManager>(**client, (*client)->clock(),
                                                           std::move(*config->cert));
    if (Status s = certs->Bootstrap(); !s.ok()) return Die("webhook certificate: " + s.message());
    http.certificate = certs->certificate();
  }
  Result<std::unique_ptr<hami::net::HttpServer>> server = hami::net::HttpServer::Create(http);
  if (!server.ok()) return Die("extender server: " + server.status().ToString());
  (*svc)->RegisterRoutes(**server);
  const hami::net::HttpServerOptions& mhttp = config->metrics;
  Result<std::unique_ptr<hami::net::HttpServer>> metrics = hami::net::HttpServer::Create(mhttp);
  if (!metrics.ok()) return Die("metrics server: " + metrics.status().ToString());
  extender::SchedulerService* service = svc->get();
  (*metrics)->SetMetricsHandler([service] { return service->Metrics(); });
  (*metrics)->AddReadinessCheck("scheduler", [service] { return service->Ready(); });

  if (Status s = (*svc)->Start(); !s.ok()) return Die("start: " + s.ToString());
  Result<int> port = (*server)->Start();
  if (!port.ok()) return Die("extender server: " + port.status().ToString());
  Result<int> mport = (*metrics)->Start();
  if (!mport.ok()) return Die("metrics server: " + mport.status().ToString());
  const bool tls = (*server)->tls();
  const std::string extender_url =
      std::string(tls ? "https" : "http") + "://" + http.host + ":" + std::to_string(*port);
  const std::string metrics_addr = mhttp.host + ":" + std::to_string(*mport);
  if (Status s = hami::WriteReadyFile(config->ready_file,
                                      {{"extender", extender_url}, {"metrics", metrics_addr}});
      !s.ok()) {
    return Die(s.message());
  }
  // The same addresses as the log line below, for whoever watches stdout.
  std::printf("listening on %s (metrics on %s)\n", extender_url.c_str(), metrics_addr.c_str());
  std::fflush(stdout);
  HAMI_LOG(Info) << "extender on " << http.host << ":" << *port << (tls ? " (TLS)" : "")
                 << ", metrics on " << metrics_addr;
  // Serving first: the caBundle patch makes the API server call us.
  if (certs) certs->Start();

  int sig = signals.Wait();
  HAMI_LOG(Info) << "signal " << sig << ": shutting down";
  if (certs) certs->Stop();
  (*server)->Stop();
  (*metrics)->Stop();
  (*svc)->Stop();
  return 0;
}
