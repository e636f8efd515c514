// hami-scheduler's flags checked into its configuration: what each flag becomes, and the message
// for each mistake.
#include "extender/flags.h"

#include <gtest/gtest.h>

#include <fstream>

#include "k8s/test_util.h"

namespace hami::extender {

using scheduler::NodePolicy;

namespace {

class SchedulerFlagsTest : public ::testing::Test {
 protected:
  SchedulerFlagsTest() {
    flags_.hostname = "host-1";
    flags_.pod_namespace = "hami-system";
    flags_.pod_name = "hami-scheduler-0";
  }
  std::string ErrorOf() {
    Result<SchedulerConfig> c = SchedulerConfigFromFlags(flags_);
    EXPECT_FALSE(c.ok());
    EXPECT_EQ(c.status().code(), StatusCode::kInvalidArgument) << c.status().ToString();
    return c.ok() ? "" : c.status().message();
  }

  k8s::testing::TempDir dir_;
  SchedulerFlags flags_;
};

TEST_F(SchedulerFlagsTest, DefaultsFollowUpstream) {
  Result<SchedulerConfig> c = SchedulerConfigFromFlags(flags_);
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_EQ(c->http.host, "127.0.0.1");
  EXPECT_EQ(c->http.port, 8080);
  EXPECT_FALSE(c->http.tls.has_value());
  EXPECT_EQ(c->metrics.port, 9395);
  EXPECT_EQ(c->metrics.worker_threads, 4);
  EXPECT_EQ(c->options.scheduler_name, "hami-scheduler");
  EXPECT_EQ(c->options.node_policy, NodePolicy::kBinpack);
  EXPECT_EQ(c->options.gpu_policy, "spread");
  EXPECT_EQ(c->options.lease_namespace, "hami-system");  // $POD_NAMESPACE
  EXPECT_EQ(c->options.identity, "host-1");
  EXPECT_EQ(c->options.pod_name, "hami-scheduler-0");
  EXPECT_EQ(c->options.node_lock_timeout_seconds, 300);
  EXPECT_EQ(c->options.node_lock_wait, std::chrono::seconds(28));
  EXPECT_EQ(c->kube_timeout, std::chrono::seconds(30));
  EXPECT_FALSE(c->cert.has_value());
  ASSERT_TRUE(c->device_config.nvidia.has_value());
  EXPECT_TRUE(c->warnings.empty());
}

TEST_F(SchedulerFlagsTest, FlagsReachTheOptions) {
  flags_.http_bind = "0.0.0.0:443";
  flags_.node_policy = "spread";
  flags_.lease_namespace = "kube-system";
  flags_.node_lock_timeout = "90s";
  flags_.debug = true;
  flags_.profiling = true;
  flags_.cert_secret = "hami-scheduler-tls";
  flags_.cert_hosts = "hami.example.com,,10.0.0.7";
  flags_.cert_check = "10m";
  flags_.device_config_file = dir_.path() + "/device-config.yaml";
  std::ofstream(flags_.device_config_file)
      << "nvidia:\n  resourceCountName: nvidia.com/gpu\n"
         "iluvatars:\n- chipName: MR-V100\n  commonWord: MR-V100\n"
         "  resourceCountName: iluvatar.ai/MR-V100-vgpu\n";
  Result<SchedulerConfig> c = SchedulerConfigFromFlags(flags_);
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_EQ(c->http.port, 443);
  EXPECT_EQ(c->options.node_policy, NodePolicy::kSpread);
  EXPECT_EQ(c->options.lease_namespace, "kube-system");
  EXPECT_EQ(c->options.node_lock_timeout_seconds, 90);
  EXPECT_EQ(c->verbosity, 4);
  ASSERT_TRUE(c->cert.has_value());
  EXPECT_EQ(c->cert->ns, "hami-system");
  EXPECT_EQ(c->cert->check_interval, std::chrono::minutes(10));
  const std::vector<std::string>& dns = c->cert->policy.dns_names;
  EXPECT_NE(std::find(dns.begin(), dns.end(), "hami.example.com"), dns.end());
  EXPECT_NE(std::find(dns.begin(), dns.end(), "hami-scheduler.hami-system.svc"), dns.end());
  ASSERT_GE(c->warnings.size(), 2u);
  EXPECT_NE(c->warnings[0].find("--profiling"), std::string::npos);
  EXPECT_NE(c->warnings.back().find("left to other schedulers"), std::string::npos)
      << c->warnings.back();
}

TEST_F(SchedulerFlagsTest, EachMistakeIsNamed) {
  flags_.node_policy = "";  // an unknown word means binpack, as upstream reads it
  EXPECT_NE(ErrorOf().find("--node-scheduler-policy \"\""), std::string::npos);
  flags_.node_policy = "binpack";

  flags_.http_bind = "nowhere";
  EXPECT_NE(ErrorOf().find("--http_bind"), std::string::npos);
  flags_.http_bind = ":8080";

  flags_.cert_file = "/tls/tls.crt";
  EXPECT_NE(ErrorOf().find("--cert_file and --key_file go together"), std::string::npos);
  flags_.key_file = "/tls/tls.key";
  flags_.cert_secret = "hami-scheduler-tls";
  EXPECT_NE(ErrorOf().find("use one"), std::string::npos);
  flags_.cert_file = flags_.key_file = "";

  flags_.pod_namespace = "";
  EXPECT_NE(ErrorOf().find("set $POD_NAMESPACE"), std::string::npos);
  flags_.cert_namespace = "hami-system";
  flags_.cert_check = "0s";
  EXPECT_NE(ErrorOf().find("--webhook-cert-check-interval must be > 0"), std::string::npos);
  flags_.cert_check = "1h";
  flags_.cert_validity = "forever";
  EXPECT_NE(ErrorOf().find("--webhook-cert-validity"), std::string::npos);
  flags_.cert_secret = "";

  flags_.node_lock_retry = "later";
  EXPECT_NE(ErrorOf().find("--node-lock-retry-timeout"), std::string::npos);
  flags_.node_lock_retry = "28s";
  flags_.kube_timeout = "x";
  EXPECT_NE(ErrorOf().find("--kube-timeout"), std::string::npos);
  flags_.kube_timeout = "30s";

  flags_.device_config_file = dir_.path() + "/missing.yaml";
  EXPECT_NE(ErrorOf().find("--device-config-file"), std::string::npos);
}

}  // namespace
}  // namespace hami::extender
