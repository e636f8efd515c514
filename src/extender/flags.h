// The hami-scheduler command line: the flags as typed (SchedulerFlags, upstream HAMi's names and
// defaults, with POD_NAMESPACE, POD_NAME, KUBECONFIG and the host name from the environment),
// checked once, with the device config file they name, into SchedulerConfig, so main only wires.
//
//   SchedulerFlags flags = DefaultSchedulerFlags();
//   AddSchedulerFlags(app, &flags);
//   ... parse ...
//   Result<SchedulerConfig> config = SchedulerConfigFromFlags(flags);  // every mistake named
//   for (const std::string& w : config->warnings) HAMI_LOG(Warning) << w;
//
// Thread safety: plain data and functions without shared state.
#pragma once

#include <chrono>
#include <optional>
#include <string>
#include <vector>

#include "common/status.h"
#include "device/config.h"
#include "extender/service.h"
#include "extender/webhook_cert.h"
#include "net/http_server.h"
#include "net/server_flags.h"

namespace CLI {
class App;
}

namespace hami::extender {

struct SchedulerFlags {
  std::string http_bind = "127.0.0.1:8080";
  std::string cert_file, key_file;
  std::string metrics_bind = ":9395";
  std::string ready_file;
  std::string scheduler_name = "hami-scheduler";
  std::string node_policy = "binpack";
  std::string gpu_policy = "spread";
  bool force_overwrite = true;
  std::string device_config_file;  // empty: the chart's built-in NVIDIA defaults
  std::string node_label_selector;
  bool leader_elect = false;
  std::string lease_name = "hami-scheduler";
  std::string lease_namespace;  // empty: $POD_NAMESPACE, else kube-system
  bool legacy_metrics = false;
  std::string node_lock_timeout = "5m";
  std::string node_lock_retry = "28s";
  float kube_qps = 50;
  int kube_burst = 100;
  std::string kube_timeout = "30s";
  std::string kubeconfig;  // $KUBECONFIG; empty: in-cluster
  std::string context;
  bool debug = false;
  bool profiling = false;
  bool enable_ascend = false;
  bool enable_iluvatar = false;
  int verbosity = 0;
  net::ServerLimitFlags limits;
  // The self-managed webhook certificate (--webhook-cert-*).
  std::string cert_secret, cert_namespace;
  std::string webhook_service = "hami-scheduler";
  std::string webhook_config = "hami-webhook";
  std::string cert_hosts;  // comma-separated
  std::string cert_check = "1h";
  std::string cert_renew_before = "0";
  std::string cert_validity = "8760h";
  std::string ca_validity = "87600h";
  // From the environment only.
  std::string pod_namespace;  // $POD_NAMESPACE
  std::string pod_name;       // $POD_NAME
  std::string hostname;       // the lease identity
};

SchedulerFlags DefaultSchedulerFlags();
void AddSchedulerFlags(CLI::App& app, SchedulerFlags* flags);

struct SchedulerConfig {
  SchedulerOptions options;
  device::DeviceConfig device_config;
  net::HttpServerOptions http;     // extender and webhook: address, TLS, limits
  net::HttpServerOptions metrics;  // address and limits
  std::optional<WebhookCertOptions> cert;  // set: the scheduler manages the webhook's TLS pair
  std::string kubeconfig, context, ready_file;
  float kube_qps = 50;
  int kube_burst = 100;
  std::chrono::milliseconds kube_timeout{30000};
  int verbosity = 0;  // --debug raises it to 4
  std::vector<std::string> warnings;  // worth saying, not worth stopping for
};

// InvalidArgument naming the flag (or the variable to set, or the file) for the first thing
// wrong. Reads --device-config-file.
Result<SchedulerConfig> SchedulerConfigFromFlags(const SchedulerFlags& flags);

}  // namespace hami::extender
