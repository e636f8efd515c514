#include "extender/flags.h"

#include <unistd.h>

#include <CLI/CLI.hpp>
#include <algorithm>

#include "common/duration.h"
#include "common/file_util.h"
#include "common/go_flags.h"
#include "device/text_util.h"
#include "device/vendor.h"
#include "scheduler/policy.h"

namespace hami::extender {

using scheduler::ParseNodePolicy;

namespace {

std::string Hostname() {
  char buf[256] = {};
  if (gethostname(buf, sizeof(buf) - 1) != 0) return "hami-scheduler";
  return buf;
}

void AddWebhookCertFlags(CLI::App& app, SchedulerFlags* f) {
  app.add_option("--webhook-cert-secret", f->cert_secret,
                 "manage the webhook's TLS pair in this Secret (created if absent, renewed, "
                 "caBundle patched) instead of --cert_file/--key_file");
  app.add_option("--webhook-cert-namespace", f->cert_namespace,
                 "the Secret's namespace ($POD_NAMESPACE)");
  app.add_option("--webhook-service-name", f->webhook_service,
                 "Service the webhook is reached through (the certificate's DNS names)")
      ->capture_default_str();
  app.add_option("--webhook-config-name", f->webhook_config,
                 "MutatingWebhookConfiguration whose caBundle is kept current")
      ->capture_default_str();
  app.add_option("--webhook-cert-extra-hosts", f->cert_hosts,
                 "more certificate names, comma-separated (DNS names or IP addresses; "
                 "127.0.0.1 and localhost are always included)");
  app.add_option("--webhook-cert-check-interval", f->cert_check, "how often to check the Secret")
      ->capture_default_str();
  app.add_option("--webhook-cert-renew-before", f->cert_renew_before,
                 "renew a certificate this long before it expires (0: with a third of its "
                 "lifetime left)")
      ->capture_default_str();
  app.add_option("--webhook-cert-validity", f->cert_validity, "serving certificate lifetime")
      ->capture_default_str();
  app.add_option("--webhook-ca-validity", f->ca_validity, "CA lifetime")->capture_default_str();
}

}  // namespace

SchedulerFlags DefaultSchedulerFlags() {
  SchedulerFlags f;
  f.kubeconfig = EnvOr("KUBECONFIG");
  f.pod_namespace = EnvOr("POD_NAMESPACE");
  f.pod_name = EnvOr("POD_NAME");
  f.hostname = Hostname();
  return f;
}

void AddSchedulerFlags(CLI::App& app, SchedulerFlags* f) {
  app.add_option("--http_bind", f->http_bind, "extender/webhook listen address")
      ->capture_default_str();
  app.add_option("--cert_file", f->cert_file, "TLS certificate (with --key_file: HTTPS)");
  app.add_option("--key_file", f->key_file, "TLS private key");
  app.add_option("--metrics-bind-address", f->metrics_bind, "metrics listen address")
      ->capture_default_str();
  app.add_option("--ready-file", f->ready_file,
                 "once serving, write the extender's url, the metrics address and the PID to "
                 "this file as JSON");
  app.add_option("--scheduler-name", f->scheduler_name, "schedulerName the webhook sets")
      ->capture_default_str();
  app.add_option("--node-scheduler-policy", f->node_policy, "binpack or spread")
      ->capture_default_str();
  app.add_option("--gpu-scheduler-policy", f->gpu_policy,
                 "binpack, spread, topology-aware, mutex, numa or a comma chain")
      ->capture_default_str();
  app.add_option("--force-overwrite-default-scheduler", f->force_overwrite,
                 "take pods that name default-scheduler")
      ->capture_default_str();
  app.add_option("--device-config-file", f->device_config_file,
                 "device-config.yaml (default: the chart's built-in NVIDIA defaults)");
  app.add_option("--node-label-selector", f->node_label_selector,
                 "only nodes with these labels");
  app.add_option("--leader-elect", f->leader_elect, "follow the kube-scheduler's Lease")
      ->capture_default_str();
  app.add_option("--leader-elect-resource-name", f->lease_name)->capture_default_str();
  app.add_option("--leader-elect-resource-namespace", f->lease_namespace,
                 "default: $POD_NAMESPACE, else kube-system");
  app.add_option("--legacy-metrics", f->legacy_metrics, "also emit pre-2.6 metric names")
      ->capture_default_str();
  app.add_option("--node-lock-timeout", f->node_lock_timeout, "node lock expiry")
      ->capture_default_str();
  app.add_option("--node-lock-retry-timeout", f->node_lock_retry,
                 "how long a bind waits for another allocation on the node")
      ->capture_default_str();
  app.add_option("--kube-qps", f->kube_qps)->capture_default_str();
  app.add_option("--kube-burst", f->kube_burst)->capture_default_str();
  app.add_option("--kube-timeout", f->kube_timeout)->capture_default_str();
  app.add_option("--kubeconfig", f->kubeconfig,
                 "kubeconfig file (default $KUBECONFIG, in-cluster)");
  app.add_option("--context", f->context, "kubeconfig context");
  app.add_option("--debug", f->debug, "verbose logging (-v=4)");
  app.add_option("--profiling", f->profiling,
                 "accepted for compatibility; no pprof in this build");
  app.add_option("--enable-ascend", f->enable_ascend,
                 "schedule the Ascend chips of the device config's vnpus section (the flat "
                 "ascend: section needs no flag)");
  app.add_option("--enable-iluvatar", f->enable_iluvatar,
                 "schedule the Iluvatar chips of the device config's iluvatars section");
  net::AddServerLimitFlags(app, &f->limits);
  app.add_option("-v,--v", f->verbosity, "log verbosity")->capture_default_str();
  AddWebhookCertFlags(app, f);
}

namespace {

Status ParseDurationFlag(const char* name, const std::string& text,
                         std::chrono::milliseconds* out) {
  Result<std::chrono::milliseconds> d = ParseGoDuration(text);
  if (!d.ok()) return InvalidArgumentError(std::string(name) + ": " + d.status().message());
  *out = *d;
  return OkStatus();
}

Status ApplySchedulingFlags(const SchedulerFlags& f, SchedulerOptions* o) {
  if (!ParseNodePolicy(f.node_policy, &o->node_policy)) {
    return InvalidArgumentError("--node-scheduler-policy \"" + f.node_policy +
                                "\": use binpack or spread");
  }
  o->scheduler_name = f.scheduler_name;
  o->gpu_policy = f.gpu_policy;
  o->force_overwrite_default_scheduler = f.force_overwrite;
  o->node_label_selector = f.node_label_selector;
  o->legacy_metrics = f.legacy_metrics;
  o->vendors.enable_ascend = f.enable_ascend;
  o->vendors.enable_iluvatar = f.enable_iluvatar;
  o->leader_elect = f.leader_elect;
  o->lease_name = f.lease_name;
  o->lease_namespace = !f.lease_namespace.empty() ? f.lease_namespace
                       : !f.pod_namespace.empty() ? f.pod_namespace
                                                  : "kube-system";
  o->identity = f.hostname;
  o->pod_namespace = f.pod_namespace;
  o->pod_name = f.pod_name;
  std::chrono::milliseconds lock_timeout{0};
  HAMI_RETURN_IF_ERROR(ParseDurationFlag("--node-lock-timeout", f.node_lock_timeout,
                                         &lock_timeout));
  o->node_lock_timeout_seconds = std::max<int64_t>(1, lock_timeout.count() / 1000);
  return ParseDurationFlag("--node-lock-retry-timeout", f.node_lock_retry, &o->node_lock_wait);
}

// The self-managed webhook certificate: nullopt without --webhook-cert-secret.
Result<std::optional<WebhookCertOptions>> WebhookCertFromFlags(const SchedulerFlags& f) {
  if (f.cert_secret.empty()) return std::optional<WebhookCertOptions>();
  if (!f.cert_file.empty() || !f.key_file.empty()) {
    return InvalidArgumentError(
        "--webhook-cert-secret and --cert_file/--key_file both configure the webhook's TLS "
        "pair: use one (--webhook-cert-secret makes the scheduler create and renew it)");
  }
  WebhookCertOptions o;
  o.secret_name = f.cert_secret;
  o.ns = !f.cert_namespace.empty() ? f.cert_namespace : f.pod_namespace;
  if (o.ns.empty()) {
    return InvalidArgumentError(
        "--webhook-cert-secret: the Secret's namespace is unknown: set $POD_NAMESPACE "
        "(downward API) or --webhook-cert-namespace");
  }
  o.webhook_config_name = f.webhook_config;
  std::vector<std::string> hosts;
  for (std::string_view h : device::text::Split(f.cert_hosts, ',')) {
    if (!h.empty()) hosts.emplace_back(h);
  }
  SetServingNames(f.webhook_service, o.ns, hosts, o.policy);
  std::chrono::milliseconds renew{0}, serving{0}, ca{0};
  HAMI_RETURN_IF_ERROR(
      ParseDurationFlag("--webhook-cert-check-interval", f.cert_check, &o.check_interval));
  HAMI_RETURN_IF_ERROR(ParseDurationFlag("--webhook-cert-renew-before", f.cert_renew_before,
                                         &renew));
  HAMI_RETURN_IF_ERROR(ParseDurationFlag("--webhook-cert-validity", f.cert_validity, &serving));
  HAMI_RETURN_IF_ERROR(ParseDurationFlag("--webhook-ca-validity", f.ca_validity, &ca));
  if (o.check_interval.count() <= 0) {
    return InvalidArgumentError("--webhook-cert-check-interval must be > 0");
  }
  o.policy.renew_before = std::chrono::duration_cast<std::chrono::seconds>(renew);
  o.policy.serving_validity = std::chrono::duration_cast<std::chrono::seconds>(serving);
  o.policy.ca_validity = std::chrono::duration_cast<std::chrono::seconds>(ca);
  if (Status s = ValidatePolicy(o.policy); !s.ok()) {
    return InvalidArgumentError("--webhook-cert-*: " + s.message());
  }
  return std::optional<WebhookCertOptions>(std::move(o));
}

// device-config.yaml: the vendors and their resource names; sections read but not scheduled
// are warnings, so their pods do not sit pending unexplained.
Status LoadDeviceConfig(const SchedulerFlags& f, SchedulerConfig* c) {
  c->device_config = device::DefaultDeviceConfig();
  if (f.device_config_file.empty()) return OkStatus();
  const std::string& file = f.device_config_file;
  Result<std::string> text = ReadFileToString(file);
  if (!text.ok()) return InvalidArgumentError("--device-config-file: " + text.status().ToString());
  Result<device::DeviceConfig> parsed = device::ParseDeviceConfigYaml(*text);
  if (!parsed.ok()) return InvalidArgumentError(file + ": " + parsed.status().message());
  c->device_config = std::move(*parsed);
  for (const std::string& w : c->device_config.warnings) c->warnings.push_back(file + ": " + w);
  for (const std::string& section : device::UnscheduledVendorSections(
           c->device_config, {f.enable_ascend, f.enable_iluvatar})) {
    c->warnings.push_back(file + ": " + section +
                          "; pods asking for its resources are left to other schedulers");
  }
  return OkStatus();
}

// The two listeners: addresses, limits, and the extender's TLS files.
Status ApplyServerFlags(const SchedulerFlags& f, SchedulerConfig* c) {
  if (Status s = net::SplitHostPort(f.http_bind, &c->http.host, &c->http.port); !s.ok()) {
    return InvalidArgumentError("--http_bind: " + s.message());
  }
  HAMI_RETURN_IF_ERROR(net::ApplyServerLimitFlags(f.limits, &c->http));
  if (!f.cert_file.empty() || !f.key_file.empty()) {
    if (f.cert_file.empty() || f.key_file.empty()) {
      return InvalidArgumentError("--cert_file and --key_file go together");
    }
    c->http.tls = net::TlsOptions{f.cert_file, f.key_file};
  }
  c->http.max_body_bytes = 64u << 20;
  if (Status s = net::SplitHostPort(f.metrics_bind, &c->metrics.host, &c->metrics.port);
      !s.ok()) {
    return InvalidArgumentError("--metrics-bind-address: " + s.message());
  }
  HAMI_RETURN_IF_ERROR(net::ApplyServerLimitFlags(f.limits, &c->metrics));
  c->metrics.worker_threads = 4;
  return OkStatus();
}

}  // namespace

Result<SchedulerConfig> SchedulerConfigFromFlags(const SchedulerFlags& f) {
  SchedulerConfig c;
  c.verbosity = f.debug ? std::max(f.verbosity, 4) : f.verbosity;
  if (f.profiling) c.warnings.push_back("--profiling: no profiling endpoints in this build");
  HAMI_RETURN_IF_ERROR(ApplyServerFlags(f, &c));
  HAMI_RETURN_IF_ERROR(ApplySchedulingFlags(f, &c.options));
  HAMI_RETURN_IF_ERROR(ParseDurationFlag("--kube-timeout", f.kube_timeout, &c.kube_timeout));
  HAMI_ASSIGN_OR_RETURN(c.cert, WebhookCertFromFlags(f));
  HAMI_RETURN_IF_ERROR(LoadDeviceConfig(f, &c));
  c.kubeconfig = f.kubeconfig;
  c.context = f.context;
  c.ready_file = f.ready_file;
  c.kube_qps = f.kube_qps;
  c.kube_burst = f.kube_burst;
  return c;
}

}  // namespace hami::extender
