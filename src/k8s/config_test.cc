#include "k8s/config.h"

#include <gtest/gtest.h>

#include "common/base64.h"
#include "k8s/test_util.h"

namespace hami::k8s {
namespace {

using testing::FakeClient;
using testing::TempDir;

constexpr char kTokenConfig[] = R"(
apiVersion: v1
kind: Config
current-context: dev
clusters:
- name: c1
  cluster:
    server: https://10.0.0.1:6443/
    certificate-authority-data: Q0EtUEVN
contexts:
- name: dev
  context: {cluster: c1, user: u1, namespace: team-a}
- name: other
  context: {cluster: c2, user: u2}
users:
- name: u1
  user:
    token: abc123
)";

TEST(KubeconfigTest, TokenAndCaData) {
  Result<RestConfig> cfg = ParseKubeconfig(kTokenConfig, "/nonexistent");
  ASSERT_TRUE(cfg.ok()) << cfg.status().ToString();
  EXPECT_EQ(cfg->server, "https://10.0.0.1:6443");
  EXPECT_EQ(cfg->tls.ca_pem, "CA-PEM");
  EXPECT_EQ(cfg->bearer_token, "abc123");
  EXPECT_EQ(cfg->ns, "team-a");
  EXPECT_FALSE(cfg->tls.insecure_skip_verify);
}

TEST(KubeconfigTest, ContextOverrideNamesMissingCluster) {
  Result<RestConfig> cfg = ParseKubeconfig(kTokenConfig, "/x", "other");
  ASSERT_FALSE(cfg.ok());
  EXPECT_EQ(cfg.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(cfg.status().message().find("clusters: no entry named \"c2\""), std::string::npos)
      << cfg.status().message();
}

TEST(KubeconfigTest, ClientCertificateFilesRelativeToKubeconfig) {
  TempDir dir;
  dir.Write("ca.crt", "CA");
  dir.Write("client.crt", "CERT");
  dir.Write("client.key", "KEY");
  std::string path = dir.Write("config", R"(
current-context: x
clusters:
- name: c
  cluster: {server: "https://h:1", certificate-authority: ca.crt}
contexts:
- name: x
  context: {cluster: c, user: u}
users:
- name: u
  user: {client-certificate: client.crt, client-key: client.key}
)");
  Result<RestConfig> cfg = LoadKubeconfigFile(path);
  ASSERT_TRUE(cfg.ok()) << cfg.status().ToString();
  EXPECT_EQ(cfg->tls.ca_pem, "CA");
  EXPECT_EQ(cfg->tls.client_cert_pem, "CERT");
  EXPECT_EQ(cfg->tls.client_key_pem, "KEY");
  EXPECT_EQ(cfg->ns, "default");
}

TEST(KubeconfigTest, ClientCertificateData) {
  Result<RestConfig> cfg = ParseKubeconfig(R"(
current-context: x
clusters: [{name: c, cluster: {server: "https://h"}}]
contexts: [{name: x, context: {cluster: c, user: u}}]
users: [{name: u, user: {client-certificate-data: Q0VSVA==, client-key-data: S0VZ}}]
)",
                                           "");
  ASSERT_TRUE(cfg.ok()) << cfg.status().ToString();
  EXPECT_EQ(cfg->tls.client_cert_pem, "CERT");
  EXPECT_EQ(cfg->tls.client_key_pem, "KEY");
}

TEST(KubeconfigTest, InsecureAndTokenFile) {
  TempDir dir;
  dir.Write("tok", "file-token\n");
  std::string yaml = R"(
current-context: x
clusters: [{name: c, cluster: {server: "https://h", insecure-skip-tls-verify: true}}]
contexts: [{name: x, context: {cluster: c, user: u}}]
users: [{name: u, user: {tokenFile: tok}}]
)";
  Result<RestConfig> cfg = ParseKubeconfig(yaml, dir.path());
  ASSERT_TRUE(cfg.ok()) << cfg.status().ToString();
  EXPECT_TRUE(cfg->tls.insecure_skip_verify);
  EXPECT_EQ(cfg->bearer_token_file, dir.path() + "/tok");
}

struct BadCase {
  const char* yaml;
  const char* needle;
};

TEST(KubeconfigTest, InvalidFilesNameTheFieldAndReason) {
  const BadCase cases[] = {
      {"[1, 2]", "not a YAML map"},
      {"clusters: {", "kubeconfig:"},
      {"kind: Config", "current-context: not set"},
      {"current-context: x\ncontexts: []", "contexts: no entry named \"x\""},
      {"current-context: x\ncontexts: [{name: x, context: {user: u}}]",
       "contexts[x].context.cluster: missing"},
      {"current-context: x\ncontexts: [{name: x, context: {cluster: c}}]\n"
       "clusters: [{name: c, cluster: {server: ftp://h}}]",
       "clusters[c].cluster.server: \"ftp://h\" is not an http:// or https:// URL"},
      {"current-context: x\ncontexts: [{name: x, context: {cluster: c}}]\n"
       "clusters: [{name: c, cluster: {server: https://h, certificate-authority-data: \"!!\"}}]",
       "clusters[c].cluster.certificate-authority-data: invalid base64"},
      {"current-context: x\ncontexts: [{name: x, context: {cluster: c}}]\n"
       "clusters: [{name: c, cluster: {server: https://h, insecure-skip-tls-verify: maybe}}]",
       "insecure-skip-tls-verify: expected true or false"},
      {"current-context: x\ncontexts: [{name: x, context: {cluster: c}}]\n"
       "clusters: [{name: c, cluster: {server: https://h, certificate-authority: /no/such}}]",
       "clusters[c].cluster.certificate-authority: /no/such"},
      {"current-context: x\ncontexts: [{name: x, context: {cluster: c, user: u}}]\n"
       "clusters: [{name: c, cluster: {server: https://h}}]\n"
       "users: [{name: u, user: {client-certificate-data: QQ==}}]",
       "users[u].user: client-certificate and client-key must be given together"},
      {"current-context: x\ncontexts: [{name: x, context: {cluster: c, user: u}}]\n"
       "clusters: [{name: c, cluster: {server: https://h}}]\n"
       "users: [{name: u, user: {token: [1]}}]",
       "users[u].user.token: not a string"},
      {"current-context: x\ncontexts: [{name: x, context: {cluster: c}}]\n"
       "clusters: [{name: c, cluster: {server: https://h, insecure-skip-tls-verify: true, "
       "certificate-authority-data: QQ==}}]",
       "mutually exclusive"},
  };
  for (const BadCase& c : cases) {
    Result<RestConfig> cfg = ParseKubeconfig(c.yaml, "/");
    ASSERT_FALSE(cfg.ok()) << c.yaml;
    EXPECT_EQ(cfg.status().code(), StatusCode::kInvalidArgument) << c.yaml;
    EXPECT_NE(cfg.status().message().find(c.needle), std::string::npos)
        << c.yaml << " -> " << cfg.status().message();
  }
}

TEST(KubeconfigTest, MissingFileIsNotFound) {
  Result<RestConfig> cfg = LoadKubeconfigFile("/no/such/kubeconfig");
  EXPECT_EQ(cfg.status().code(), StatusCode::kNotFound);
}

TEST(Base64Test, DecodesWithAndWithoutPadding) {
  EXPECT_EQ(*Base64Decode("aGVsbG8="), "hello");
  EXPECT_EQ(*Base64Decode("aGVsbG8"), "hello");
  EXPECT_EQ(*Base64Decode("aGVs\nbG8h"), "hello!");
  EXPECT_EQ(*Base64Decode(""), "");
  EXPECT_FALSE(Base64Decode("a").ok());
  EXPECT_FALSE(Base64Decode("aGVs*").ok());
  EXPECT_FALSE(Base64Decode("aG=Vs").ok());
}

InClusterOptions Env(const std::string& dir, std::map<std::string, std::string> env) {
  InClusterOptions o;
  o.dir = dir;
  o.getenv = [env](const std::string& k) -> std::optional<std::string> {
    auto it = env.find(k);
    if (it == env.end()) return std::nullopt;
    return it->second;
  };
  return o;
}

TEST(InClusterTest, ReadsServiceAccount) {
  TempDir dir;
  dir.Write("token", "sa-token\n");
  dir.Write("ca.crt", "SA-CA");
  dir.Write("namespace", "hami-system\n");
  Result<RestConfig> cfg = LoadInClusterConfig(Env(
      dir.path(), {{"KUBERNETES_SERVICE_HOST", "10.96.0.1"}, {"KUBERNETES_SERVICE_PORT", "443"}}));
  ASSERT_TRUE(cfg.ok()) << cfg.status().ToString();
  EXPECT_EQ(cfg->server, "https://10.96.0.1:443");
  EXPECT_EQ(cfg->tls.ca_pem, "SA-CA");
  EXPECT_EQ(cfg->bearer_token_file, dir.path() + "/token");
  EXPECT_EQ(cfg->ns, "hami-system");
}

TEST(InClusterTest, Ipv6HostIsBracketed) {
  TempDir dir;
  dir.Write("token", "t");
  dir.Write("ca.crt", "c");
  Result<RestConfig> cfg = LoadInClusterConfig(Env(
      dir.path(), {{"KUBERNETES_SERVICE_HOST", "fd00::1"}, {"KUBERNETES_SERVICE_PORT", "6443"}}));
  ASSERT_TRUE(cfg.ok());
  EXPECT_EQ(cfg->server, "https://[fd00::1]:6443");
  EXPECT_EQ(cfg->ns, "default");
}

TEST(InClusterTest, Errors) {
  TempDir dir;
  EXPECT_EQ(LoadInClusterConfig(Env(dir.path(), {})).status().code(),
            StatusCode::kFailedPrecondition);
  Result<RestConfig> no_token = LoadInClusterConfig(
      Env(dir.path(), {{"KUBERNETES_SERVICE_HOST", "h"}, {"KUBERNETES_SERVICE_PORT", "443"}}));
  EXPECT_NE(no_token.status().message().find("service account token"), std::string::npos);
  Result<RestConfig> bad_port = LoadInClusterConfig(
      Env(dir.path(), {{"KUBERNETES_SERVICE_HOST", "h"}, {"KUBERNETES_SERVICE_PORT", "http"}}));
  EXPECT_NE(bad_port.status().message().find("KUBERNETES_SERVICE_PORT"), std::string::npos);
}

// --- Auth variants as seen on the wire (fake transport) ---

TEST(AuthTest, StaticTokenSentAsBearer) {
  RestConfig cfg = FakeClient::DefaultConfig();
  cfg.bearer_token = "abc";
  FakeClient fc(cfg);
  fc.fake->Push("GET", "/api/v1/nodes/n1", FakeTransport::Json(200, R"({"metadata":{}})"));
  ASSERT_TRUE(fc.client->Get(kNodes, "", "n1").ok());
  EXPECT_EQ(testing::Header(fc.fake->requests().at(0), "Authorization"), "Bearer abc");
}

TEST(AuthTest, NoCredentialsNoAuthorizationHeader) {
  FakeClient fc;
  fc.fake->Push("GET", "/api/v1/nodes/n1", FakeTransport::Json(200, "{}"));
  ASSERT_TRUE(fc.client->Get(kNodes, "", "n1").ok());
  EXPECT_EQ(testing::Header(fc.fake->requests().at(0), "Authorization"), "");
}

TEST(AuthTest, TokenFileIsReReadAfterAMinute) {
  TempDir dir;
  std::string tok = dir.Write("token", "one\n");
  RestConfig cfg = FakeClient::DefaultConfig();
  cfg.bearer_token = "ignored";
  cfg.bearer_token_file = tok;
  FakeClient fc(cfg);
  for (int i = 0; i < 3; ++i) fc.fake->Push("GET", "/nodes", FakeTransport::Json(200, "{}"));
  ASSERT_TRUE(fc.client->Get(kNodes, "", "a").ok());
  dir.Write("token", "two");                          // rotated
  ASSERT_TRUE(fc.client->Get(kNodes, "", "a").ok());  // still cached
  fc.clock.Advance(std::chrono::seconds(61));
  ASSERT_TRUE(fc.client->Get(kNodes, "", "a").ok());
  auto reqs = fc.fake->requests();
  EXPECT_EQ(testing::Header(reqs[0], "Authorization"), "Bearer one");
  EXPECT_EQ(testing::Header(reqs[1], "Authorization"), "Bearer one");
  EXPECT_EQ(testing::Header(reqs[2], "Authorization"), "Bearer two");
}

TEST(AuthTest, UnreadableTokenFileFailsTheRequest) {
  RestConfig cfg = FakeClient::DefaultConfig();
  cfg.bearer_token_file = "/no/such/token";
  FakeClient fc(cfg);
  Result<Object> r = fc.client->Get(kNodes, "", "a");
  EXPECT_EQ(r.status().code(), StatusCode::kNotFound);
  EXPECT_TRUE(fc.fake->requests().empty());
}

}  // namespace
}  // namespace hami::k8s
