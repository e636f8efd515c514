#include "sim/kubescheduler/config.h"

#include <yaml-cpp/yaml.h>

#include <cmath>
#include <initializer_list>
#include <set>

#include "common/base64.h"
#include "common/file_util.h"
#include "k8s/config.h"

namespace hami::sim {
namespace {

constexpr std::string_view kGroup = "kubescheduler.config.k8s.io/";

// Field access over yaml-cpp with errors that name the field. yaml-cpp reports type mismatches by
// throwing; every conversion here is wrapped so that nothing escapes the parser.
class Fields {
 public:
  Fields(const YAML::Node& node, std::string path) : node_(node), path_(std::move(path)) {}

  std::string Path(std::string_view key) const {
    return path_.empty() ? std::string(key) : path_ + "." + std::string(key);
  }

  // Rejects keys outside `known` (kube-scheduler decodes its configuration strictly).
  Status CheckKeys(std::initializer_list<std::string_view> known) const {
    for (const auto& kv : node_) {
      std::string key;
      try {
        key = kv.first.as<std::string>();
      } catch (const YAML::Exception&) {
        return InvalidArgumentError(Where() + "keys must be strings");
      }
      bool found = false;
      for (std::string_view k : known) found = found || k == key;
      if (!found) return InvalidArgumentError(Path(key) + ": unknown field");
    }
    return OkStatus();
  }

  YAML::Node Get(std::string_view key) const { return node_[std::string(key)]; }
  bool Has(std::string_view key) const {
    YAML::Node n = Get(key);
    return n && !n.IsNull();
  }

  Status String(std::string_view key, std::string* out) const {
    YAML::Node n = Get(key);
    if (!n || n.IsNull()) return OkStatus();
    if (!n.IsScalar()) return InvalidArgumentError(Path(key) + ": must be a string");
    *out = n.Scalar();
    return OkStatus();
  }

  Status Bool(std::string_view key, bool* out) const {
    YAML::Node n = Get(key);
    if (!n || n.IsNull()) return OkStatus();
    try {
      if (!n.IsScalar()) throw YAML::Exception(YAML::Mark(), "");
      *out = n.as<bool>();
    } catch (const YAML::Exception&) {
      return InvalidArgumentError(Path(key) + ": must be a boolean");
    }
    return OkStatus();
  }

  Status Int(std::string_view key, int64_t* out) const {
    YAML::Node n = Get(key);
    if (!n || n.IsNull()) return OkStatus();
    try {
      if (!n.IsScalar()) throw YAML::Exception(YAML::Mark(), "");
      *out = n.as<int64_t>();
    } catch (const YAML::Exception&) {
      return InvalidArgumentError(Path(key) + ": must be an integer");
    }
    return OkStatus();
  }

  Status Double(std::string_view key, double* out) const {
    YAML::Node n = Get(key);
    if (!n || n.IsNull()) return OkStatus();
    try {
      if (!n.IsScalar()) throw YAML::Exception(YAML::Mark(), "");
      *out = n.as<double>();
    } catch (const YAML::Exception&) {
      return InvalidArgumentError(Path(key) + ": must be a number");
    }
    if (!std::isfinite(*out)) return InvalidArgumentError(Path(key) + ": must be a finite number");
    return OkStatus();
  }

  Status Duration(std::string_view key, std::chrono::milliseconds* out) const {
    std::string text;
    HAMI_RETURN_IF_ERROR(String(key, &text));
    if (!Has(key)) return OkStatus();
    Result<std::chrono::milliseconds> d = ParseGoDuration(text);
    if (!d.ok()) return d.status().WithContext(Path(key));
    *out = *d;
    return OkStatus();
  }

  // Base64-encoded bytes ([]byte fields).
  Status Bytes(std::string_view key, std::string* out) const {
    std::string text;
    HAMI_RETURN_IF_ERROR(String(key, &text));
    if (text.empty()) return OkStatus();
    Result<std::string> decoded = Base64Decode(text);
    if (!decoded.ok()) return decoded.status().WithContext(Path(key));
    *out = std::move(decoded).value();
    return OkStatus();
  }

  // The node at `key` when it is a map (absent/null: an empty result and OK).
  Result<YAML::Node> Map(std::string_view key) const {
    YAML::Node n = Get(key);
    if (!n || n.IsNull()) return YAML::Node(YAML::NodeType::Map);
    if (!n.IsMap()) return InvalidArgumentError(Path(key) + ": must be a mapping");
    return n;
  }
  Result<YAML::Node> Sequence(std::string_view key) const {
    YAML::Node n = Get(key);
    if (!n || n.IsNull()) return YAML::Node(YAML::NodeType::Sequence);
    if (!n.IsSequence()) return InvalidArgumentError(Path(key) + ": must be a list");
    return n;
  }

 private:
  std::string Where() const { return path_.empty() ? std::string() : path_ + ": "; }

  const YAML::Node node_;
  std::string path_;
};

Result<ExtenderTlsConfig> ParseTls(const YAML::Node& node, const std::string& path) {
  Fields f(node, path);
  HAMI_RETURN_IF_ERROR(f.CheckKeys({"insecure", "serverName", "certFile", "keyFile", "caFile",
                                    "certData", "keyData", "caData"}));
  ExtenderTlsConfig tls;
  HAMI_RETURN_IF_ERROR(f.Bool("insecure", &tls.insecure));
  HAMI_RETURN_IF_ERROR(f.String("serverName", &tls.server_name));
  HAMI_RETURN_IF_ERROR(f.String("certFile", &tls.cert_file));
  HAMI_RETURN_IF_ERROR(f.String("keyFile", &tls.key_file));
  HAMI_RETURN_IF_ERROR(f.String("caFile", &tls.ca_file));
  HAMI_RETURN_IF_ERROR(f.Bytes("certData", &tls.cert_data));
  HAMI_RETURN_IF_ERROR(f.Bytes("keyData", &tls.key_data));
  HAMI_RETURN_IF_ERROR(f.Bytes("caData", &tls.ca_data));
  bool has_cert = !tls.cert_file.empty() || !tls.cert_data.empty();
  bool has_key = !tls.key_file.empty() || !tls.key_data.empty();
  if (has_cert != has_key) {
    return InvalidArgumentError(path + ": a client certificate and key must be given together");
  }
  return tls;
}

Result<ExtenderConfig> ParseExtender(const YAML::Node& node, const std::string& path) {
  if (!node.IsMap()) return InvalidArgumentError(path + ": must be a mapping");
  Fields f(node, path);
  HAMI_RETURN_IF_ERROR(f.CheckKeys({"urlPrefix", "filterVerb", "preemptVerb", "prioritizeVerb",
                                    "weight", "bindVerb", "enableHTTPS", "tlsConfig", "httpTimeout",
                                    "nodeCacheCapable", "managedResources", "ignorable"}));
  ExtenderConfig e;
  HAMI_RETURN_IF_ERROR(f.String("urlPrefix", &e.url_prefix));
  HAMI_RETURN_IF_ERROR(f.String("filterVerb", &e.filter_verb));
  HAMI_RETURN_IF_ERROR(f.String("preemptVerb", &e.preempt_verb));
  HAMI_RETURN_IF_ERROR(f.String("prioritizeVerb", &e.prioritize_verb));
  HAMI_RETURN_IF_ERROR(f.String("bindVerb", &e.bind_verb));
  HAMI_RETURN_IF_ERROR(f.Int("weight", &e.weight));
  HAMI_RETURN_IF_ERROR(f.Bool("enableHTTPS", &e.enable_https));
  HAMI_RETURN_IF_ERROR(f.Duration("httpTimeout", &e.http_timeout));
  HAMI_RETURN_IF_ERROR(f.Bool("nodeCacheCapable", &e.node_cache_capable));
  HAMI_RETURN_IF_ERROR(f.Bool("ignorable", &e.ignorable));

  if (e.url_prefix.empty()) return InvalidArgumentError(f.Path("urlPrefix") + ": required");
  if (e.url_prefix.rfind("http://", 0) != 0 && e.url_prefix.rfind("https://", 0) != 0) {
    return InvalidArgumentError(f.Path("urlPrefix") +
                                ": must start with http:// or https://, got " + e.url_prefix);
  }
  while (e.url_prefix.size() > 1 && e.url_prefix.back() == '/') e.url_prefix.pop_back();
  if (!e.prioritize_verb.empty() && e.weight <= 0) {
    return InvalidArgumentError(f.Path("weight") +
                                ": must be a positive number when prioritizeVerb is set");
  }
  if (e.weight == 0) e.weight = 1;
  if (e.http_timeout.count() == 0) e.http_timeout = std::chrono::milliseconds(5000);

  if (f.Has("tlsConfig")) {
    HAMI_ASSIGN_OR_RETURN(YAML::Node tls_node, f.Map("tlsConfig"));
    HAMI_ASSIGN_OR_RETURN(e.tls, ParseTls(tls_node, f.Path("tlsConfig")));
    e.has_tls_config = true;
  }

  HAMI_ASSIGN_OR_RETURN(YAML::Node managed, f.Sequence("managedResources"));
  std::set<std::string> seen;
  for (size_t i = 0; i < managed.size(); ++i) {
    std::string item_path = f.Path("managedResources") + "[" + std::to_string(i) + "]";
    if (!managed[i].IsMap()) return InvalidArgumentError(item_path + ": must be a mapping");
    Fields mf(managed[i], item_path);
    HAMI_RETURN_IF_ERROR(mf.CheckKeys({"name", "ignoredByScheduler"}));
    ManagedResource r;
    HAMI_RETURN_IF_ERROR(mf.String("name", &r.name));
    HAMI_RETURN_IF_ERROR(mf.Bool("ignoredByScheduler", &r.ignored_by_scheduler));
    if (r.name.empty()) return InvalidArgumentError(mf.Path("name") + ": required");
    if (!seen.insert(r.name).second) {
      return InvalidArgumentError(mf.Path("name") + ": duplicate resource " + r.name);
    }
    e.managed_resources.push_back(std::move(r));
  }
  return e;
}

Status ParseLeaderElection(const YAML::Node& node, LeaderElectionSettings* le) {
  Fields f(node, "leaderElection");
  HAMI_RETURN_IF_ERROR(f.CheckKeys({"leaderElect", "leaseDuration", "renewDeadline", "retryPeriod",
                                    "resourceLock", "resourceName", "resourceNamespace"}));
  HAMI_RETURN_IF_ERROR(f.Bool("leaderElect", &le->leader_elect));
  HAMI_RETURN_IF_ERROR(f.Duration("leaseDuration", &le->lease_duration));
  HAMI_RETURN_IF_ERROR(f.Duration("renewDeadline", &le->renew_deadline));
  HAMI_RETURN_IF_ERROR(f.Duration("retryPeriod", &le->retry_period));
  std::string lock;
  HAMI_RETURN_IF_ERROR(f.String("resourceLock", &lock));
  if (!lock.empty() && lock != "leases") {
    return InvalidArgumentError(f.Path("resourceLock") + ": only \"leases\" is supported, got " +
                                lock);
  }
  HAMI_RETURN_IF_ERROR(f.String("resourceName", &le->resource_name));
  HAMI_RETURN_IF_ERROR(f.String("resourceNamespace", &le->resource_namespace));
  if (!le->leader_elect) return OkStatus();
  if (le->resource_name.empty()) return InvalidArgumentError(f.Path("resourceName") + ": required");
  if (le->resource_namespace.empty()) {
    return InvalidArgumentError(f.Path("resourceNamespace") + ": required");
  }
  // The same ordering client-go's elector insists on: renewals must be able to succeed before the
  // lease runs out, and retries must fit inside the renew deadline.
  if (le->retry_period.count() <= 0) {
    return InvalidArgumentError(f.Path("retryPeriod") + ": must be positive");
  }
  if (le->renew_deadline <= le->retry_period) {
    return InvalidArgumentError(f.Path("renewDeadline") + ": must be greater than retryPeriod");
  }
  if (le->lease_duration <= le->renew_deadline) {
    return InvalidArgumentError(f.Path("leaseDuration") + ": must be greater than renewDeadline");
  }
  return OkStatus();
}

// apiVersion (group and version), kind, and the top-level keys that version allows.
Status ParseTypeMeta(const Fields& f, KubeSchedulerConfig* cfg) {
  HAMI_RETURN_IF_ERROR(f.String("apiVersion", &cfg->api_version));
  if (cfg->api_version.empty()) return InvalidArgumentError("apiVersion: required");
  if (cfg->api_version.rfind(kGroup, 0) != 0) {
    return InvalidArgumentError("apiVersion: unknown group in " + cfg->api_version +
                                " (want kubescheduler.config.k8s.io/v1)");
  }
  std::string version = cfg->api_version.substr(kGroup.size());
  if (version != "v1" && version != "v1beta3" && version != "v1beta2") {
    return InvalidArgumentError("apiVersion: unsupported version " + cfg->api_version +
                                " (supported: v1, v1beta3, v1beta2)");
  }
  std::string kind;
  HAMI_RETURN_IF_ERROR(f.String("kind", &kind));
  if (kind != "KubeSchedulerConfiguration") {
    return InvalidArgumentError("kind: want KubeSchedulerConfiguration, got \"" + kind + "\"");
  }
  // v1beta2 still carried the bind addresses; later versions dropped them, as does this check.
  if (version == "v1beta2") {
    HAMI_RETURN_IF_ERROR(
        f.CheckKeys({"apiVersion", "kind", "parallelism", "leaderElection", "clientConnection",
                     "healthzBindAddress", "metricsBindAddress", "enableProfiling",
                     "enableContentionProfiling", "percentageOfNodesToScore",
                     "podInitialBackoffSeconds", "podMaxBackoffSeconds", "profiles", "extenders"}));
  } else {
    HAMI_RETURN_IF_ERROR(
        f.CheckKeys({"apiVersion", "kind", "parallelism", "leaderElection", "clientConnection",
                     "enableProfiling", "enableContentionProfiling", "percentageOfNodesToScore",
                     "podInitialBackoffSeconds", "podMaxBackoffSeconds", "profiles", "extenders",
                     "delayCacheUntilActive"}));
  }
  return OkStatus();
}

// percentageOfNodesToScore, then the profiles: each is validated, only the first is served (the
// simulation runs one scheduler name), and its own percentage, when set, wins.
Status ParseProfiles(const Fields& f, KubeSchedulerConfig* cfg) {
  HAMI_RETURN_IF_ERROR(f.Int("percentageOfNodesToScore", &cfg->percentage_of_nodes_to_score));
  if (cfg->percentage_of_nodes_to_score < 0 || cfg->percentage_of_nodes_to_score > 100) {
    return InvalidArgumentError("percentageOfNodesToScore: must be in the range [0, 100]");
  }
  int64_t profile_percentage = -1;  // unset
  HAMI_ASSIGN_OR_RETURN(YAML::Node profiles, f.Sequence("profiles"));
  for (size_t i = 0; i < profiles.size(); ++i) {
    std::string path = "profiles[" + std::to_string(i) + "]";
    if (!profiles[i].IsMap()) return InvalidArgumentError(path + ": must be a mapping");
    Fields pf(profiles[i], path);
    HAMI_RETURN_IF_ERROR(
        pf.CheckKeys({"schedulerName", "percentageOfNodesToScore", "plugins", "pluginConfig"}));
    std::string name;
    HAMI_RETURN_IF_ERROR(pf.String("schedulerName", &name));
    int64_t percentage = -1;
    HAMI_RETURN_IF_ERROR(pf.Int("percentageOfNodesToScore", &percentage));
    if (pf.Has("percentageOfNodesToScore") && (percentage < 0 || percentage > 100)) {
      return InvalidArgumentError(pf.Path("percentageOfNodesToScore") +
                                  ": must be in the range [0, 100]");
    }
    if (i == 0) {
      if (!name.empty()) cfg->scheduler_name = name;
      profile_percentage = percentage;
    }
  }
  if (profile_percentage >= 0) cfg->percentage_of_nodes_to_score = profile_percentage;
  return OkStatus();
}

Status ParseClientConnection(const Fields& f, KubeSchedulerConfig* cfg) {
  HAMI_ASSIGN_OR_RETURN(YAML::Node conn, f.Map("clientConnection"));
  Fields cf(conn, "clientConnection");
  HAMI_RETURN_IF_ERROR(
      cf.CheckKeys({"kubeconfig", "acceptContentTypes", "contentType", "qps", "burst"}));
  HAMI_RETURN_IF_ERROR(cf.String("kubeconfig", &cfg->kubeconfig));
  HAMI_RETURN_IF_ERROR(cf.Double("qps", &cfg->qps));
  HAMI_RETURN_IF_ERROR(cf.Int("burst", &cfg->burst));
  return OkStatus();
}

// The unschedulable-pod backoff, kube-scheduler's defaults 1 s and 10 s.
Status ParseBackoff(const Fields& f, KubeSchedulerConfig* cfg) {
  int64_t initial_s = 1;
  int64_t max_s = 10;
  HAMI_RETURN_IF_ERROR(f.Int("podInitialBackoffSeconds", &initial_s));
  HAMI_RETURN_IF_ERROR(f.Int("podMaxBackoffSeconds", &max_s));
  if (initial_s <= 0) return InvalidArgumentError("podInitialBackoffSeconds: must be positive");
  if (max_s < initial_s) {
    return InvalidArgumentError("podMaxBackoffSeconds: must be at least podInitialBackoffSeconds");
  }
  cfg->pod_initial_backoff = std::chrono::seconds(initial_s);
  cfg->pod_max_backoff = std::chrono::seconds(max_s);
  return OkStatus();
}

// The extenders, of which at most one may bind.
Status ParseExtenders(const Fields& f, KubeSchedulerConfig* cfg) {
  HAMI_ASSIGN_OR_RETURN(YAML::Node extenders, f.Sequence("extenders"));
  int binders = 0;
  for (size_t i = 0; i < extenders.size(); ++i) {
    std::string path = "extenders[" + std::to_string(i) + "]";
    HAMI_ASSIGN_OR_RETURN(ExtenderConfig e, ParseExtender(extenders[i], path));
    if (!e.bind_verb.empty() && ++binders > 1) {
      return InvalidArgumentError(path + ".bindVerb: only one extender may implement bind");
    }
    cfg->extenders.push_back(std::move(e));
  }
  return OkStatus();
}

Result<KubeSchedulerConfig> ParseRoot(const YAML::Node& root) {
  if (!root.IsMap()) return InvalidArgumentError("configuration must be a YAML mapping");
  Fields f(root, "");
  KubeSchedulerConfig cfg;
  HAMI_RETURN_IF_ERROR(ParseTypeMeta(f, &cfg));
  HAMI_RETURN_IF_ERROR(ParseProfiles(f, &cfg));
  HAMI_ASSIGN_OR_RETURN(YAML::Node le, f.Map("leaderElection"));
  HAMI_RETURN_IF_ERROR(ParseLeaderElection(le, &cfg.leader_election));
  HAMI_RETURN_IF_ERROR(ParseClientConnection(f, &cfg));
  HAMI_RETURN_IF_ERROR(ParseBackoff(f, &cfg));
  HAMI_RETURN_IF_ERROR(ParseExtenders(f, &cfg));
  return cfg;
}

}  // namespace

Result<KubeSchedulerConfig> ParseKubeSchedulerConfig(std::string_view yaml) {
  YAML::Node root;
  try {
    root = YAML::Load(std::string(yaml));
  } catch (const YAML::Exception& e) {
    return InvalidArgumentError(std::string("invalid YAML: ") + e.what());
  }
  try {
    return ParseRoot(root);
  } catch (const YAML::Exception& e) {
    // Defensive: every access above is checked, but yaml-cpp may still throw on odd documents
    // (aliases to invalid nodes and the like).
    return InvalidArgumentError(std::string("invalid configuration: ") + e.what());
  }
}

Result<KubeSchedulerConfig> LoadKubeSchedulerConfigFile(const std::string& path) {
  Result<std::string> text = hami::ReadFileToString(path);
  if (!text.ok()) return text.status();
  Result<KubeSchedulerConfig> cfg = ParseKubeSchedulerConfig(*text);
  if (!cfg.ok()) return cfg.status().WithContext(path);
  return cfg;
}

}  // namespace hami::sim
