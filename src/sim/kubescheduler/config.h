// KubeSchedulerConfig: the subset of kube-scheduler's KubeSchedulerConfiguration file that the
// simulated kube-scheduler acts on, parsed from YAML.
//
//   HAMI_ASSIGN_OR_RETURN(KubeSchedulerConfig cfg, LoadKubeSchedulerConfigFile("/config.yaml"));
//   for (const ExtenderConfig& e : cfg.extenders) ...
//
// Accepted apiVersions: kubescheduler.config.k8s.io/v1, v1beta3 and v1beta2; kind must be
// KubeSchedulerConfiguration. Like kube-scheduler's strict decoding, an unknown key is an error,
// so a misspelt "filterverb" is reported instead of silently disabling the filter. Keys that
// kube-scheduler knows but this simulation does not act on (plugins, pluginConfig, parallelism,
// preemptVerb, ...) are accepted and ignored. Every error is
// InvalidArgument and names the offending field, e.g. "extenders[0].httpTimeout: ...".
//
// Defaults follow kube-scheduler: schedulerName "default-scheduler", leader election on with
// Lease kube-system/kube-scheduler (15s/10s/2s), pod backoff 1s..10s, extender httpTimeout 5s
// and weight 1.
//
// Thread safety: plain values and pure functions.
#pragma once

#include <chrono>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "common/duration.h"
#include "common/status.h"

namespace hami::sim {

// Extender.tlsConfig. *_data fields hold the decoded PEM bytes (base64 in the file).
struct ExtenderTlsConfig {
  bool insecure = false;
  std::string server_name;
  std::string cert_file;
  std::string key_file;
  std::string ca_file;
  std::string cert_data;
  std::string key_data;
  std::string ca_data;
};

struct ManagedResource {
  std::string name;
  bool ignored_by_scheduler = false;
};

struct ExtenderConfig {
  std::string url_prefix;  // "https://127.0.0.1:443"; no trailing slash is needed
  std::string filter_verb;
  std::string prioritize_verb;  // accepted; prioritization is not simulated
  std::string preempt_verb;     // accepted; preemption is not simulated
  std::string bind_verb;
  int64_t weight = 1;
  bool enable_https = false;
  bool has_tls_config = false;  // a tlsConfig block was present
  ExtenderTlsConfig tls;
  std::chrono::milliseconds http_timeout{5000};
  bool node_cache_capable = false;
  std::vector<ManagedResource> managed_resources;
  bool ignorable = false;
};

struct LeaderElectionSettings {
  bool leader_elect = true;
  std::string resource_name = "kube-scheduler";
  std::string resource_namespace = "kube-system";
  std::chrono::milliseconds lease_duration{15000};
  std::chrono::milliseconds renew_deadline{10000};
  std::chrono::milliseconds retry_period{2000};
};

struct KubeSchedulerConfig {
  std::string api_version;
  std::string scheduler_name = "default-scheduler";  // the first profile's
  LeaderElectionSettings leader_election;
  std::string kubeconfig;  // clientConnection.kubeconfig ("" = not set)
  double qps = 50;         // clientConnection.qps
  int64_t burst = 100;     // clientConnection.burst
  std::chrono::milliseconds pod_initial_backoff{1000};
  std::chrono::milliseconds pod_max_backoff{10000};
  // percentageOfNodesToScore (the first profile's value wins over the top-level one); 0 means
  // kube-scheduler's adaptive default.
  int64_t percentage_of_nodes_to_score = 0;
  std::vector<ExtenderConfig> extenders;
};

// Parses and validates a KubeSchedulerConfiguration document.
Result<KubeSchedulerConfig> ParseKubeSchedulerConfig(std::string_view yaml);
// Reads and parses a file; errors are prefixed with the path.
Result<KubeSchedulerConfig> LoadKubeSchedulerConfigFile(const std::string& path);

}  // namespace hami::sim
