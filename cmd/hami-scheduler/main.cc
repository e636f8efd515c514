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
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include "common/duration.h"
#include "common/file_util.h"
#include "common/go_flags.h"
#include "common/log.h"
#include "common/ready_file.h"
#include "common/stop_signals.h"
#include "device/config.h"
#include "device/vendor.h"
#include "extender/service.h"
#include "extender/webhook_cert.h"
#include "k8s/config.h"
#include "k8s/rest_client.h"
#include "net/http_server.h"
#include "net/server_flags.h"
#include "scheduler/policy.h"

namespace {

using hami::Result;
using hami::Status;

std::string Hostname() {
  char buf[256] = {};
  if (gethostname(buf, sizeof(buf) - 1) != 0) return "hami-scheduler";
  return buf;
}

}  // namespace

int main(int argc, char** argv) {
  hami::StopSignals signals;  // before any thread starts: every thread inherits the mask
  CLI::App app{"hami-scheduler: HAMi-compatible scheduler extender, webhook and metrics"};
  std::string http_bind = "127.0.0.1:8080", cert_file, key_file, metrics_bind = ":9395";
  std::string scheduler_name = "hami-scheduler", node_policy = "binpack", gpu_policy = "spread";
  std::string device_config_file, node_label_selector, kubeconfig, context, ready_file;
  std::string lease_name = "hami-scheduler", lease_ns, node_lock_timeout = "5m",
              node_lock_retry = "28s", kube_timeout = "30s";
  bool force_overwrite = true, leader_elect = false, legacy_metrics = false, debug = false,
       profiling = false, enable_ascend = false, enable_iluvatar = false;
  float kube_qps = 50;
  int kube_burst = 100, verbosity = 0;
  app.add_option("--http_bind", http_bind, "extender/webhook listen address")
      ->capture_default_str();
  app.add_option("--cert_file", cert_file, "TLS certificate (with --key_file: HTTPS)");
  app.add_option("--key_file", key_file, "TLS private key");
  app.add_option("--metrics-bind-address", metrics_bind, "metrics listen address")
      ->capture_default_str();
  app.add_option("--ready-file", ready_file,
                 "once serving, write the extender's url, the metrics address and the PID to "
                 "this file as JSON");
  app.add_option("--scheduler-name", scheduler_name, "schedulerName the webhook sets")
      ->capture_default_str();
  app.add_option("--node-scheduler-policy", node_policy, "binpack or spread")
      ->capture_default_str();
  app.add_option("--gpu-scheduler-policy", gpu_policy,
                 "binpack, spread, topology-aware, mutex, numa or a comma chain")
      ->capture_default_str();
  app.add_option("--force-overwrite-default-scheduler", force_overwrite,
                 "take pods that name default-scheduler")
      ->capture_default_str();
  app.add_option("--device-config-file", device_config_file,
                 "device-config.yaml (default: the chart's built-in NVIDIA defaults)");
  app.add_option("--node-label-selector", node_label_selector, "only nodes with these labels");
  app.add_option("--leader-elect", leader_elect, "follow the kube-scheduler's Lease")
      ->capture_default_str();
  app.add_option("--leader-elect-resource-name", lease_name)->capture_default_str();
  app.add_option("--leader-elect-resource-namespace", lease_ns,
                 "default: $POD_NAMESPACE, else kube-system");
  app.add_option("--legacy-metrics", legacy_metrics, "also emit pre-2.6 metric names")
      ->capture_default_str();
  app.add_option("--node-lock-timeout", node_lock_timeout, "node lock expiry")
      ->capture_default_str();
  app.add_option("--node-lock-retry-timeout", node_lock_retry,
                 "how long a bind waits for another allocation on the node")
      ->capture_default_str();
  app.add_option("--kube-qps", kube_qps)->capture_default_str();
  app.add_option("--kube-burst", kube_burst)->capture_default_str();
  app.add_option("--kube-timeout", kube_timeout)->capture_default_str();
  app.add_option("--kubeconfig", kubeconfig, "kubeconfig file (default $KUBECONFIG, in-cluster)");
  app.add_option("--context", context, "kubeconfig context");
  app.add_option("--debug", debug, "verbose logging (-v=4)");
  app.add_option("--profiling", profiling, "accepted for compatibility; no pprof in this build");
  app.add_option("--enable-ascend", enable_ascend,
                 "schedule the Ascend chips of the device config's vnpus section (the flat "
                 "ascend: section needs no flag)");
  app.add_option("--enable-iluvatar", enable_iluvatar,
                 "schedule the Iluvatar chips of the device config's iluvatars section");
  hami::net::ServerLimitFlags limits;
  hami::net::AddServerLimitFlags(app, &limits);
  app.add_option("-v,--v", verbosity, "log verbosity")->capture_default_str();
  std::string cert_secret, cert_ns,
      webhook_service = "hami-scheduler", webhook_config = "hami-webhook", cert_hosts,
      cert_check = "1h", cert_renew_before = "0", cert_validity = "8760h", ca_validity = "87600h";
  app.add_option("--webhook-cert-secret", cert_secret,
                 "manage the webhook's TLS pair in this Secret (created if absent, renewed, "
                 "caBundle patched) instead of --cert_file/--key_file");
  app.add_option("--webhook-cert-namespace", cert_ns, "the Secret's namespace ($POD_NAMESPACE)");
  app.add_option("--webhook-service-name", webhook_service,
                 "Service the webhook is reached through (the certificate's DNS names)")
      ->capture_default_str();
  app.add_option("--webhook-config-name", webhook_config,
                 "MutatingWebhookConfiguration whose caBundle is kept current")
      ->capture_default_str();
  app.add_option("--webhook-cert-extra-hosts", cert_hosts,
                 "more certificate names, comma-separated (DNS names or IP addresses; "
                 "127.0.0.1 and localhost are always included)");
  app.add_option("--webhook-cert-check-interval", cert_check, "how often to check the Secret")
      ->capture_default_str();
  app.add_option("--webhook-cert-renew-before", cert_renew_before,
                 "renew a certificate this long before it expires (0: with a third of its "
                 "lifetime left)")
      ->capture_default_str();
  app.add_option("--webhook-cert-validity", cert_validity, "serving certificate lifetime")
      ->capture_default_str();
  app.add_option("--webhook-ca-validity", ca_validity, "CA lifetime")->capture_default_str();
  if (std::optional<int> exit = hami::ParseGoStyleFlags(app, argc, argv)) return *exit;
  hami::log::SetVerbosity(debug ? std::max(verbosity, 4) : verbosity);
  if (profiling) HAMI_LOG(Warning) << "--profiling: no profiling endpoints in this build";

  auto die = [](const std::string& what) {
    HAMI_LOG(Error) << what;
    return 2;
  };
  {
    hami::net::HttpServerOptions probe;  // the limits are checked before anything starts
    if (Status s = hami::net::ApplyServerLimitFlags(limits, &probe); !s.ok())
      return die(s.message());
  }
  hami::scheduler::SchedulerOptions opts;
  opts.scheduler_name = scheduler_name;
  opts.version = HAMI_VERSION;
  if (!hami::scheduler::ParseNodePolicy(node_policy, &opts.node_policy)) {
    return die("--node-scheduler-policy \"" + node_policy + "\": use binpack or spread");
  }
  opts.gpu_policy = gpu_policy;
  opts.force_overwrite_default_scheduler = force_overwrite;
  opts.node_label_selector = node_label_selector;
  opts.legacy_metrics = legacy_metrics;
  opts.vendors.enable_ascend = enable_ascend;
  opts.vendors.enable_iluvatar = enable_iluvatar;
  opts.leader_elect = leader_elect;
  opts.lease_name = lease_name;
  const char* pod_ns = std::getenv("POD_NAMESPACE");
  const char* pod_name = std::getenv("POD_NAME");
  opts.lease_namespace = !lease_ns.empty() ? lease_ns : (pod_ns ? pod_ns : "kube-system");
  opts.identity = Hostname();
  if (pod_ns) opts.pod_namespace = pod_ns;
  if (pod_name) opts.pod_name = pod_name;
  Result<std::chrono::milliseconds> lock_timeout = hami::ParseGoDuration(node_lock_timeout);
  if (!lock_timeout.ok()) return die("--node-lock-timeout: " + lock_timeout.status().message());
  opts.node_lock_timeout_seconds = std::max<int64_t>(1, lock_timeout->count() / 1000);
  Result<std::chrono::milliseconds> lock_retry = hami::ParseGoDuration(node_lock_retry);
  if (!lock_retry.ok()) return die("--node-lock-retry-timeout: " + lock_retry.status().message());
  opts.node_lock_wait = *lock_retry;
  Result<std::chrono::milliseconds> api_timeout = hami::ParseGoDuration(kube_timeout);
  if (!api_timeout.ok()) return die("--kube-timeout: " + api_timeout.status().message());

  // Self-managed webhook certificate: flags checked before anything is read or contacted.
  std::optional<hami::scheduler::WebhookCertOptions> cert_opts;
  if (!cert_secret.empty()) {
    if (!cert_file.empty() || !key_file.empty()) {
      return die(
          "--webhook-cert-secret and --cert_file/--key_file both configure the webhook's TLS "
          "pair: use one (--webhook-cert-secret makes the scheduler create and renew it)");
    }
    hami::scheduler::WebhookCertOptions& o = cert_opts.emplace();
    o.secret_name = cert_secret;
    o.ns = !cert_ns.empty() ? cert_ns : (pod_ns ? pod_ns : "");
    if (o.ns.empty()) {
      return die(
          "--webhook-cert-secret: the Secret's namespace is unknown: set $POD_NAMESPACE "
          "(downward API) or --webhook-cert-namespace");
    }
    o.webhook_config_name = webhook_config;
    std::vector<std::string> hosts;
    std::stringstream list(cert_hosts);
    for (std::string h; std::getline(list, h, ',');) {
      if (!h.empty()) hosts.push_back(h);
    }
    hami::scheduler::SetServingNames(webhook_service, o.ns, hosts, o.policy);
    struct DurationFlag {
      const char* name;
      const std::string& text;
      std::chrono::milliseconds* out;
    };
    std::chrono::milliseconds renew, serving, ca;
    for (const DurationFlag& f :
         {DurationFlag{"--webhook-cert-check-interval", cert_check, &o.check_interval},
          DurationFlag{"--webhook-cert-renew-before", cert_renew_before, &renew},
          DurationFlag{"--webhook-cert-validity", cert_validity, &serving},
          DurationFlag{"--webhook-ca-validity", ca_validity, &ca}}) {
      Result<std::chrono::milliseconds> d = hami::ParseGoDuration(f.text);
      if (!d.ok()) return die(std::string(f.name) + ": " + d.status().message());
      *f.out = *d;
    }
    if (o.check_interval.count() <= 0) return die("--webhook-cert-check-interval must be > 0");
    o.policy.renew_before = std::chrono::duration_cast<std::chrono::seconds>(renew);
    o.policy.serving_validity = std::chrono::duration_cast<std::chrono::seconds>(serving);
    o.policy.ca_validity = std::chrono::duration_cast<std::chrono::seconds>(ca);
    if (Status s = hami::scheduler::ValidatePolicy(o.policy); !s.ok()) {
      return die("--webhook-cert-*: " + s.message());
    }
  }

  hami::device::DeviceConfig device_config = hami::device::DefaultDeviceConfig();
  if (!device_config_file.empty()) {
    Result<std::string> text = hami::ReadFileToString(device_config_file);
    if (!text.ok()) return die("--device-config-file: " + text.status().ToString());
    Result<hami::device::DeviceConfig> parsed = hami::device::ParseDeviceConfigYaml(*text);
    if (!parsed.ok()) return die(device_config_file + ": " + parsed.status().message());
    device_config = std::move(*parsed);
    for (const std::string& w : device_config.warnings) {
      HAMI_LOG(Warning) << device_config_file << ": " << w;
    }
    // Read and checked, not scheduled yet: say so rather than leave their pods pending unexplained.
    for (const std::string& section :
         hami::device::UnscheduledVendorSections(device_config, {enable_ascend, enable_iluvatar})) {
      HAMI_LOG(Warning) << device_config_file << ": " << section
                        << "; pods asking for its resources are left to other schedulers";
    }
  }

  if (kubeconfig.empty()) {
    if (const char* env = std::getenv("KUBECONFIG"); env != nullptr) kubeconfig = env;
  }
  Result<hami::k8s::RestConfig> rest = hami::k8s::LoadRestConfig(kubeconfig, context);
  if (!rest.ok()) return die("API server config: " + rest.status().ToString());
  rest->qps = kube_qps;
  rest->burst = kube_burst;
  rest->timeout = *api_timeout;
  rest->user_agent = "hami-scheduler";
  Result<std::unique_ptr<hami::k8s::RestClient>> client = hami::k8s::RestClient::Create(*rest);
  if (!client.ok()) return die("API client: " + client.status().ToString());

  Result<std::unique_ptr<hami::scheduler::SchedulerService>> svc =
      hami::scheduler::SchedulerService::Create(**client, device_config, opts);
  if (!svc.ok()) return die(svc.status().ToString());

  hami::net::HttpServerOptions http;
  if (Status s = hami::net::SplitHostPort(http_bind, &http.host, &http.port); !s.ok()) {
    return die("--http_bind: " + s.message());
  }
  if (Status s = hami::net::ApplyServerLimitFlags(limits, &http); !s.ok()) {
    return die(s.message());
  }
  if (!cert_file.empty() || !key_file.empty()) {
    if (cert_file.empty() || key_file.empty()) return die("--cert_file and --key_file go together");
    http.tls = hami::net::TlsOptions{cert_file, key_file};
  }
  std::unique_ptr<hami::scheduler::WebhookCertManager> certs;
  if (cert_opts) {
    certs = std::make_unique<hami::scheduler::WebhookCertManager>(**client, (*client)->clock(),
                                                                  std::move(*cert_opts));
    if (Status s = certs->Bootstrap(); !s.ok()) {
      return die("webhook certificate: " + s.message());
    }
    http.certificate = certs->certificate();
  }
  http.max_body_bytes = 64u << 20;
  Result<std::unique_ptr<hami::net::HttpServer>> server = hami::net::HttpServer::Create(http);
  if (!server.ok()) return die("extender server: " + server.status().ToString());
  (*svc)->RegisterRoutes(**server);

  hami::net::HttpServerOptions mhttp;
  if (Status s = hami::net::SplitHostPort(metrics_bind, &mhttp.host, &mhttp.port); !s.ok()) {
    return die("--metrics-bind-address: " + s.message());
  }
  if (Status s = hami::net::ApplyServerLimitFlags(limits, &mhttp); !s.ok()) {
    return die(s.message());
  }
  mhttp.worker_threads = 4;
  Result<std::unique_ptr<hami::net::HttpServer>> metrics = hami::net::HttpServer::Create(mhttp);
  if (!metrics.ok()) return die("metrics server: " + metrics.status().ToString());
  hami::scheduler::SchedulerService* service = svc->get();
  (*metrics)->SetMetricsHandler([service] { return service->Metrics(); });
  (*metrics)->AddReadinessCheck("scheduler", [service] { return service->Ready(); });

  if (Status s = (*svc)->Start(); !s.ok()) return die("start: " + s.ToString());
  Result<int> port = (*server)->Start();
  if (!port.ok()) return die("extender server: " + port.status().ToString());
  Result<int> mport = (*metrics)->Start();
  if (!mport.ok()) return die("metrics server: " + mport.status().ToString());
  const bool tls = (*server)->tls();
  const std::string extender_url =
      std::string(tls ? "https" : "http") + "://" + http.host + ":" + std::to_string(*port);
  const std::string metrics_addr = mhttp.host + ":" + std::to_string(*mport);
  if (Status s = hami::WriteReadyFile(ready_file, {{"extender", extender_url},
                                                   {"metrics", metrics_addr}});
      !s.ok()) {
    return die(s.message());
  }
  // The same addresses as the log line below, for whoever watches stdout.
  std::printf("listening on %s://%s:%d (metrics on %s:%d)\n", tls ? "https" : "http",
              http.host.c_str(), *port, mhttp.host.c_str(), *mport);
  std::fflush(stdout);
  HAMI_LOG(Info) << "extender on " << http.host << ":" << *port << (tls ? " (TLS)" : "")
                 << ", metrics on " << mhttp.host << ":" << *mport;
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
