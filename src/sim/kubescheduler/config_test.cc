// KubeSchedulerConfiguration parsing: the configuration HAMi's chart generates, defaults,
// durations, and clear InvalidArgument errors naming the field for bad input.
#include "sim/kubescheduler/config.h"

#include <gtest/gtest.h>

#include <string>

#include "k8s/test_util.h"

namespace hami::sim {
namespace {

using std::chrono::milliseconds;

// What HAMi's chart renders into its scheduler ConfigMap on Kubernetes > 1.25 with the webhook
// enabled (HTTPS extender on loopback, NVIDIA resource names managed and ignored).
constexpr char kChartConfig[] = R"(
apiVersion: kubescheduler.config.k8s.io/v1
kind: KubeSchedulerConfiguration
leaderElection:
  leaderElect: true
  resourceName: hami-scheduler
  resourceNamespace: hami-system
profiles:
- schedulerName: hami-scheduler
extenders:
- urlPrefix: "https://127.0.0.1:443"
  filterVerb: filter
  bindVerb: bind
  enableHTTPS: true
  weight: 1
  nodeCacheCapable: true
  httpTimeout: 30s
  tlsConfig:
    insecure: true
  managedResources:
  - name: nvidia.com/gpu
    ignoredByScheduler: true
  - name: nvidia.com/gpumem
    ignoredByScheduler: true
  - name: nvidia.com/gpucores
    ignoredByScheduler: true
  - name: nvidia.com/gpumem-percentage
    ignoredByScheduler: true
  - name: nvidia.com/priority
    ignoredByScheduler: true
)";

Status ParseError(const std::string& yaml) {
  Result<KubeSchedulerConfig> r = ParseKubeSchedulerConfig(yaml);
  EXPECT_FALSE(r.ok()) << yaml;
  return r.ok() ? OkStatus() : r.status();
}

// Minimal valid document plus `extra` lines.
std::string Doc(const std::string& extra) {
  return "apiVersion: kubescheduler.config.k8s.io/v1\nkind: KubeSchedulerConfiguration\n" + extra;
}

TEST(KubeSchedulerConfigTest, ParsesHamiChartConfig) {
  Result<KubeSchedulerConfig> r = ParseKubeSchedulerConfig(kChartConfig);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  const KubeSchedulerConfig& c = *r;
  EXPECT_EQ(c.api_version, "kubescheduler.config.k8s.io/v1");
  EXPECT_EQ(c.scheduler_name, "hami-scheduler");
  EXPECT_TRUE(c.leader_election.leader_elect);
  EXPECT_EQ(c.leader_election.resource_name, "hami-scheduler");
  EXPECT_EQ(c.leader_election.resource_namespace, "hami-system");
  EXPECT_EQ(c.leader_election.lease_duration, milliseconds(15000));
  ASSERT_EQ(c.extenders.size(), 1u);
  const ExtenderConfig& e = c.extenders[0];
  EXPECT_EQ(e.url_prefix, "https://127.0.0.1:443");
  EXPECT_EQ(e.filter_verb, "filter");
  EXPECT_EQ(e.bind_verb, "bind");
  EXPECT_TRUE(e.prioritize_verb.empty());
  EXPECT_TRUE(e.enable_https);
  EXPECT_TRUE(e.has_tls_config);
  EXPECT_TRUE(e.tls.insecure);
  EXPECT_EQ(e.weight, 1);
  EXPECT_TRUE(e.node_cache_capable);
  EXPECT_FALSE(e.ignorable);
  EXPECT_EQ(e.http_timeout, milliseconds(30000));
  ASSERT_EQ(e.managed_resources.size(), 5u);
  EXPECT_EQ(e.managed_resources[0].name, "nvidia.com/gpu");
  EXPECT_TRUE(e.managed_resources[0].ignored_by_scheduler);
  EXPECT_EQ(e.managed_resources[4].name, "nvidia.com/priority");
}

TEST(KubeSchedulerConfigTest, ParsesLegacyVersionsAndPlainHttp) {
  for (const char* version : {"v1beta2", "v1beta3"}) {
    std::string yaml = std::string("apiVersion: kubescheduler.config.k8s.io/") + version + R"(
kind: KubeSchedulerConfiguration
leaderElection:
  leaderElect: false
profiles:
- schedulerName: hami-scheduler
extenders:
- urlPrefix: "http://127.0.0.1:80/"
  filterVerb: filter
  bindVerb: bind
  enableHTTPS: false
  nodeCacheCapable: true
  weight: 1
  httpTimeout: 1m30s
)";
    Result<KubeSchedulerConfig> r = ParseKubeSchedulerConfig(yaml);
    ASSERT_TRUE(r.ok()) << version << ": " << r.status().ToString();
    EXPECT_FALSE(r->leader_election.leader_elect);
    ASSERT_EQ(r->extenders.size(), 1u);
    EXPECT_EQ(r->extenders[0].url_prefix, "http://127.0.0.1:80");  // trailing slash dropped
    EXPECT_EQ(r->extenders[0].http_timeout, milliseconds(90000));
    EXPECT_FALSE(r->extenders[0].has_tls_config);
  }
}

TEST(KubeSchedulerConfigTest, AppliesKubeSchedulerDefaults) {
  Result<KubeSchedulerConfig> r = ParseKubeSchedulerConfig(Doc(R"(
extenders:
- urlPrefix: http://ext:8888
  filterVerb: filter
)"));
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->scheduler_name, "default-scheduler");
  EXPECT_TRUE(r->leader_election.leader_elect);
  EXPECT_EQ(r->leader_election.resource_name, "kube-scheduler");
  EXPECT_EQ(r->leader_election.resource_namespace, "kube-system");
  EXPECT_EQ(r->leader_election.renew_deadline, milliseconds(10000));
  EXPECT_EQ(r->leader_election.retry_period, milliseconds(2000));
  EXPECT_EQ(r->pod_initial_backoff, milliseconds(1000));
  EXPECT_EQ(r->pod_max_backoff, milliseconds(10000));
  EXPECT_EQ(r->percentage_of_nodes_to_score, 0);
  EXPECT_EQ(r->extenders[0].http_timeout, milliseconds(5000));
  EXPECT_EQ(r->extenders[0].weight, 1);
  EXPECT_TRUE(r->extenders[0].bind_verb.empty());
}

TEST(KubeSchedulerConfigTest, ReadsTopLevelTuningAndTlsData) {
  Result<KubeSchedulerConfig> r = ParseKubeSchedulerConfig(Doc(R"(
podInitialBackoffSeconds: 2
podMaxBackoffSeconds: 20
parallelism: 16
clientConnection:
  kubeconfig: /etc/kubernetes/scheduler.conf
  qps: 100
  burst: 200
percentageOfNodesToScore: 30
profiles:
- schedulerName: first
  percentageOfNodesToScore: 70
  plugins: {}
- schedulerName: second
leaderElection:
  leaderElect: true
  leaseDuration: 4s
  renewDeadline: 3s
  retryPeriod: 500ms
  resourceLock: leases
extenders:
- urlPrefix: https://ext:8443
  filterVerb: f
  prioritizeVerb: p
  weight: 5
  tlsConfig:
    serverName: ext.example
    caData: Q0EtUEVN
    certData: Q0VSVA==
    keyData: S0VZ
)"));
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->scheduler_name, "first");
  EXPECT_EQ(r->percentage_of_nodes_to_score, 70);
  EXPECT_EQ(r->kubeconfig, "/etc/kubernetes/scheduler.conf");
  EXPECT_DOUBLE_EQ(r->qps, 100);
  EXPECT_EQ(r->burst, 200);
  EXPECT_EQ(r->pod_initial_backoff, milliseconds(2000));
  EXPECT_EQ(r->pod_max_backoff, milliseconds(20000));
  EXPECT_EQ(r->leader_election.retry_period, milliseconds(500));
  const ExtenderTlsConfig& tls = r->extenders[0].tls;
  EXPECT_EQ(tls.ca_data, "CA-PEM");
  EXPECT_EQ(tls.cert_data, "CERT");
  EXPECT_EQ(tls.key_data, "KEY");
  EXPECT_EQ(tls.server_name, "ext.example");
  EXPECT_EQ(r->extenders[0].weight, 5);
  EXPECT_EQ(r->extenders[0].prioritize_verb, "p");
}

TEST(KubeSchedulerConfigTest, RejectsBadDocumentsNamingTheField) {
  struct Case {
    std::string yaml;
    std::string want;  // substring of the message
  };
  const Case cases[] = {
      {"apiVersion: [unclosed", "invalid YAML"},
      {"- a\n- b\n", "must be a YAML mapping"},
      {"kind: KubeSchedulerConfiguration\n", "apiVersion: required"},
      {"apiVersion: kubescheduler.config.k8s.io/v2\nkind: KubeSchedulerConfiguration\n",
       "apiVersion: unsupported version"},
      {"apiVersion: v1\nkind: KubeSchedulerConfiguration\n", "apiVersion: unknown group"},
      {"apiVersion: kubescheduler.config.k8s.io/v1\nkind: Policy\n", "kind: want"},
      {Doc("leaderElection:\n  leaderElect: maybe\n"),
       "leaderElection.leaderElect: must be a "
       "boolean"},
      {Doc("leaderElection: true\n"), "leaderElection: must be a mapping"},
      {Doc("leaderElection:\n  leaseDuration: 10\n"),
       "leaderElection.leaseDuration: invalid "
       "duration \"10\": missing unit"},
      {Doc("leaderElection:\n  leaseDuration: 5s\n"),
       "leaderElection.leaseDuration: must be "
       "greater than renewDeadline"},
      {Doc("leaderElection:\n  resourceLock: endpoints\n"), "leaderElection.resourceLock"},
      {Doc("profiles: hami\n"), "profiles: must be a list"},
      {Doc("profiles:\n- schedulerName: [a]\n"), "profiles[0].schedulerName: must be a string"},
      {Doc("extenders: {}\n"), "extenders: must be a list"},
      {Doc("extenders:\n- filterVerb: filter\n"), "extenders[0].urlPrefix: required"},
      {Doc("extenders:\n- urlPrefix: ftp://x\n"), "extenders[0].urlPrefix: must start with"},
      {Doc("extenders:\n- urlPrefix: http://x\n  weight: heavy\n"),
       "extenders[0].weight: must be an integer"},
      {Doc("extenders:\n- urlPrefix: http://x\n  prioritizeVerb: p\n  weight: -1\n"),
       "extenders[0].weight: must be a positive number"},
      {Doc("extenders:\n- urlPrefix: http://x\n  httpTimeout: 30\n"),
       "extenders[0].httpTimeout: invalid duration \"30\": missing unit"},
      {Doc("extenders:\n- urlPrefix: http://x\n  httpTimeout: soon\n"),
       "extenders[0].httpTimeout: invalid duration"},
      {Doc("extenders:\n- urlPrefix: http://x\n  nodeCacheCapable: 3\n"),
       "extenders[0].nodeCacheCapable: must be a boolean"},
      {Doc("extenders:\n- urlPrefix: http://x\n  filterverb: filter\n"),
       "extenders[0].filterverb: unknown field"},
      {Doc("extenders:\n- urlPrefix: http://x\n  tlsConfig:\n    caData: '!!!'\n"),
       "extenders[0].tlsConfig.caData: invalid base64"},
      {Doc("extenders:\n- urlPrefix: http://x\n  tlsConfig:\n    certFile: /c\n"),
       "extenders[0].tlsConfig: a client certificate and key must be given together"},
      {Doc("extenders:\n- urlPrefix: http://x\n  managedResources:\n  - ignoredByScheduler: "
           "true\n"),
       "extenders[0].managedResources[0].name: required"},
      {Doc("extenders:\n- urlPrefix: http://x\n  managedResources:\n  - name: a\n  - name: a\n"),
       "extenders[0].managedResources[1].name: duplicate"},
      {Doc("extenders:\n- urlPrefix: http://a\n  bindVerb: bind\n- urlPrefix: http://b\n  "
           "bindVerb: bind\n"),
       "extenders[1].bindVerb: only one extender may implement bind"},
      {Doc("podInitialBackoffSeconds: 0\n"), "podInitialBackoffSeconds: must be positive"},
      {Doc("podInitialBackoffSeconds: 5\npodMaxBackoffSeconds: 2\n"), "podMaxBackoffSeconds"},
      {Doc("clientConnection:\n  qps: fast\n"), "clientConnection.qps: must be a number"},
      {Doc("schedulerName: hami\n"), "schedulerName: unknown field"},
      {Doc("percentageOfNodesToScore: 101\n"), "percentageOfNodesToScore: must be in the range"},
      {Doc("profiles:\n- percentageOfNodesToScore: -1\n"),
       "profiles[0].percentageOfNodesToScore: must be in the range"},
  };
  for (const Case& c : cases) {
    Status s = ParseError(c.yaml);
    EXPECT_EQ(s.code(), StatusCode::kInvalidArgument) << c.yaml;
    EXPECT_NE(s.message().find(c.want), std::string::npos)
        << "yaml:\n"
        << c.yaml << "\ngot: " << s.message() << "\nwant: " << c.want;
  }
}

TEST(KubeSchedulerConfigTest, LoadsFilesAndNamesThePath) {
  k8s::testing::TempDir dir;
  std::string good = dir.Write("good.yaml", kChartConfig);
  Result<KubeSchedulerConfig> r = LoadKubeSchedulerConfigFile(good);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->scheduler_name, "hami-scheduler");

  std::string bad = dir.Write("bad.yaml", Doc("extenders: 3\n"));
  r = LoadKubeSchedulerConfigFile(bad);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(r.status().message().find(bad + ": extenders"), std::string::npos)
      << r.status().message();

  r = LoadKubeSchedulerConfigFile(dir.path() + "/missing.yaml");
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kNotFound);
}

TEST(GoDurationTest, ParsesGoSyntax) {
  EXPECT_EQ(*ParseGoDuration("0"), milliseconds(0));
  EXPECT_EQ(*ParseGoDuration("30s"), milliseconds(30000));
  EXPECT_EQ(*ParseGoDuration("1m30s"), milliseconds(90000));
  EXPECT_EQ(*ParseGoDuration("1.5h"), milliseconds(5400000));
  EXPECT_EQ(*ParseGoDuration("250ms"), milliseconds(250));
  EXPECT_EQ(*ParseGoDuration("2500us"), milliseconds(2));
  EXPECT_EQ(*ParseGoDuration("+1s"), milliseconds(1000));
  EXPECT_EQ(*ParseGoDuration(".5s"), milliseconds(500));
  for (const char* bad : {"", "-1s", "10", "s", "1d", "1.s.", "abc", "1e3s"}) {
    Result<milliseconds> r = ParseGoDuration(bad);
    EXPECT_FALSE(r.ok()) << bad;
    EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument) << bad;
  }
}

}  // namespace
}  // namespace hami::sim
