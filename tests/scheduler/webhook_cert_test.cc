// hami-scheduler --webhook-cert-secret against the simulated API server: the real binary in a
// subprocess creates or reuses the Secret, patches the caBundle, and serves the pair, so the API
// server's own TLS verification of the webhook call (against that caBundle, host 127.0.0.1) is
// the proof. Plus the controller in-process on a fake clock for the CA rollover, which would take
// a real CA's lifetime otherwise. Waits are event-driven (tests/event_wait.h): on the watch events
// of the objects a condition reads, or on the requests the scheduler makes; a deadline only bounds
// a failing test.
#include "extender/webhook_cert.h"

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <openssl/err.h>
#include <openssl/pem.h>
#include <openssl/ssl.h>
#include <openssl/x509_vfy.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "common/base64.h"
#include "common/clock.h"
#include "common/subprocess.h"
#include "k8s/api_error.h"
#include "k8s/object.h"
#include "k8s/rest_client.h"
#include "net/http_server.h"
#include "net/tls.h"
#include "sim/apiserver/api_server.h"
#include "tests/event_wait.h"

namespace hami::extender {
namespace {

using k8s::Object;

const k8s::Resource kSecrets{"v1", "secrets", true};
const k8s::Resource kWebhookConfigs{"admissionregistration.k8s.io/v1",
                                    "mutatingwebhookconfigurations", false};
constexpr char kNs[] = "hami-system";
constexpr char kSecret[] = "hami-scheduler-tls";

constexpr std::chrono::seconds kTimeout(15);  // bounds a failing wait

size_t Count(const std::string& text, const std::string& needle) {
  size_t n = 0;
  for (size_t at = text.find(needle); at != std::string::npos; at = text.find(needle, at + 1)) ++n;
  return n;
}

// The leaf certificate a TLS server on 127.0.0.1:`port` presents, as PEM; "" when the handshake
// fails. With `ca_pem`, the handshake also verifies the chain and the IP name as a client would.
std::string PeerCertificate(int port, const std::string& ca_pem = "") {
  std::unique_ptr<SSL_CTX, decltype(&SSL_CTX_free)> ctx(SSL_CTX_new(TLS_client_method()),
                                                        SSL_CTX_free);
  if (!ca_pem.empty()) {
    X509_STORE* store = SSL_CTX_get_cert_store(ctx.get());
    const std::vector<std::string> cas =
        net::SplitCertificateBundle(ca_pem).value_or(std::vector<std::string>{});
    for (const std::string& ca : cas) {
      BIO* bio = BIO_new_mem_buf(ca.data(), static_cast<int>(ca.size()));
      X509* cert = PEM_read_bio_X509(bio, nullptr, nullptr, nullptr);
      X509_STORE_add_cert(store, cert);
      X509_free(cert);
      BIO_free(bio);
    }
    SSL_CTX_set_verify(ctx.get(), SSL_VERIFY_PEER, nullptr);
    X509_VERIFY_PARAM_set1_ip_asc(SSL_CTX_get0_param(ctx.get()), "127.0.0.1");
  }
  int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(port));
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  std::string pem;
  if (connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0) {
    SSL* ssl = SSL_new(ctx.get());
    SSL_set_fd(ssl, fd);
    if (SSL_connect(ssl) == 1) {
      if (X509* peer = SSL_get1_peer_certificate(ssl)) {
        BIO* bio = BIO_new(BIO_s_mem());
        PEM_write_bio_X509(bio, peer);
        char* data = nullptr;
        long n = BIO_get_mem_data(bio, &data);  // NOLINT(runtime/int)
        pem.assign(data, static_cast<size_t>(n));
        BIO_free(bio);
        X509_free(peer);
      }
      SSL_shutdown(ssl);
    }
    SSL_free(ssl);
  }
  ERR_clear_error();
  close(fd);
  return pem;
}

Object GpuPod(const std::string& name) {
  return {{"apiVersion", "v1"},
          {"kind", "Pod"},
          {"metadata", {{"name", name}}},
          {"spec",
           {{"containers",
             {{{"name", "main"},
               {"image", "cuda"},
               {"resources", {{"limits", {{"nvidia.com/gpu", "1"}}}}}}}}}}};
}

class WebhookCertTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string tmpl = (std::filesystem::temp_directory_path() / "hami_cert_XXXXXX").string();
    ASSERT_NE(mkdtemp(tmpl.data()), nullptr);
    dir_ = tmpl;
    api_ = sim::ApiServer::Start({}).value();
    kubeconfig_ = dir_ + "/kubeconfig";
    ASSERT_TRUE(api_->WriteKubeconfig(kubeconfig_).ok());
    k8s::RestConfig config;
    config.server = api_->url();
    config.qps = 0;
    client_ = k8s::RestClient::Create(config).value();
    Object ns = {{"apiVersion", "v1"}, {"kind", "Namespace"}, {"metadata", {{"name", kNs}}}};
    ASSERT_TRUE(client_->Create({"v1", "namespaces", false}, "", ns).ok());
  }
  void TearDown() override {
    client_.reset();
    api_->Stop();  // ends the watches the tap is relaying, so it can stop
    if (tap_) tap_->Stop();
    std::filesystem::remove_all(dir_);
  }

  // Points the schedulers launched from now on at a front door to the API server that serves each
  // request in process (same routes, counts and watches) and notifies tap_served_ after it: the
  // event for conditions on requests that change no object, which no watch reports.
  void ServeThroughTap() {
    tap_ = net::HttpServer::Create({}).value();
    for (const char* method : {"GET", "POST", "PUT", "PATCH", "DELETE"}) {
      tap_->HandlePrefix(method, "/", [this](const net::HttpRequest& req, net::HttpResponse& res) {
        api_->ServeInProcess(req, res);
        tap_served_.Notify();
      });
    }
    const std::string url = "http://127.0.0.1:" + std::to_string(tap_->Start().value());
    std::string config = api_->Kubeconfig();
    config.replace(config.find(api_->url()), api_->url().size(), url);
    kubeconfig_ = dir_ + "/tap-kubeconfig";
    std::ofstream(kubeconfig_) << config;
  }

  std::vector<std::string> Argv(const std::vector<std::string>& extra) const {
    std::vector<std::string> argv = {
        HAMI_SCHEDULER, "--kubeconfig=" + kubeconfig_, "--http_bind=127.0.0.1:0",
        "--metrics-bind-address=127.0.0.1:0", std::string("--webhook-cert-secret=") + kSecret};
    argv.insert(argv.end(), extra.begin(), extra.end());
    return argv;
  }
  // Starts the scheduler and returns its extender port (-1 when it exited instead).
  int Launch(std::unique_ptr<Subprocess>& proc, const std::vector<std::string>& extra = {}) {
    proc = std::make_unique<Subprocess>(
        Argv(extra), std::vector<std::string>{std::string("POD_NAMESPACE=") + kNs});
    return Port(*proc);
  }
  static int Port(Subprocess& proc) {
    const std::string& out = proc.ReadUntil("(metrics on");
    const std::string prefix = "listening on https://127.0.0.1:";
    size_t at = out.find(prefix);
    if (at == std::string::npos || out.find("(metrics on", at) == std::string::npos) return -1;
    return std::atoi(out.c_str() + at + prefix.size());
  }
  // Stops the scheduler and returns its log. SIGKILL unless `graceful`: a graceful stop waits
  // about a second per informer for its watch to notice (the API client's cancellation tick), and
  // what these tests check is already in the log.
  static std::string Stop(std::unique_ptr<Subprocess>& proc, bool graceful = false) {
    proc->Signal(graceful ? SIGTERM : SIGKILL);
    ProcessResult r = proc->Wait();
    EXPECT_EQ(r.exit_code, graceful ? 0 : 128 + SIGKILL) << r.err;
    proc.reset();
    return r.err;
  }

  // hami-webhook as the chart writes it, without a caBundle, calling 127.0.0.1:`port`.
  void CreateWebhookConfig(int port) {
    Object hook = {{"name", "vgpu.hami.io"},
                   {"clientConfig", {{"url", WebhookUrl(port)}}},
                   {"rules",
                    {{{"operations", {"CREATE"}},
                      {"apiGroups", {""}},
                      {"apiVersions", {"v1"}},
                      {"resources", {"pods"}}}}},
                   {"failurePolicy", "Fail"},
                   {"sideEffects", "None"},
                   {"timeoutSeconds", 10},
                   {"admissionReviewVersions", {"v1beta1"}}};
    Object config = {{"apiVersion", "admissionregistration.k8s.io/v1"},
                     {"kind", "MutatingWebhookConfiguration"},
                     {"metadata", {{"name", "hami-webhook"}}},
                     {"webhooks", {hook}}};
    Result<Object> created = client_->Create(kWebhookConfigs, "", config);
    ASSERT_TRUE(created.ok()) << created.status().ToString();
  }
  static std::string WebhookUrl(int port) {
    return "https://127.0.0.1:" + std::to_string(port) + "/webhook";
  }
  // Points the webhook at a (re)started scheduler, leaving the caBundle alone.
  void SetWebhookPort(int port) {
    Object patch = Object::array({{{"op", "replace"},
                                   {"path", "/webhooks/0/clientConfig/url"},
                                   {"value", WebhookUrl(port)}}});
    Result<k8s::WriteAck> r = client_->PatchAck(kWebhookConfigs, "", "hami-webhook",
                                                k8s::PatchType::kJsonPatch, patch.dump());
    ASSERT_TRUE(r.ok()) << r.status().ToString();
  }
  // Waits for a condition on the MutatingWebhookConfigurations, or on the Secrets of kNs.
  bool WaitForWebhookConfig(const std::function<bool()>& done) {
    return eventwait::WatchUntil(*client_, kWebhookConfigs, "", done, kTimeout);
  }
  bool WaitForSecret(const std::function<bool()>& done) {
    return eventwait::WatchUntil(*client_, kSecrets, kNs, done, kTimeout);
  }

  // The decoded caBundle of the webhook, "" when unset.
  std::string CaBundle() {
    Result<Object> config = client_->Get(kWebhookConfigs, "", "hami-webhook");
    if (!config.ok() || !(*config)["webhooks"].is_array() || (*config)["webhooks"].empty()) {
      return "";
    }
    return Base64Decode(k8s::GetString((*config)["webhooks"][0], "/clientConfig/caBundle"))
        .value_or("");
  }
  // The UID of the Secret's (only) owner, "" for none; of the webhook configuration.
  std::string SecretOwnerUid() {
    Result<Object> secret = client_->Get(kSecrets, kNs, kSecret);
    if (!secret.ok()) return "error: " + secret.status().ToString();
    const Object& refs = (*secret)["metadata"].value("ownerReferences", Object::array());
    if (refs.size() != 1) return refs.empty() ? "" : "several: " + refs.dump();
    if (refs[0].value("kind", "") != "MutatingWebhookConfiguration") return refs.dump();
    return refs[0].value("uid", "");
  }
  std::string WebhookConfigUid() {
    Result<Object> config = client_->Get(kWebhookConfigs, "", "hami-webhook");
    return config.ok() ? k8s::GetString(*config, "/metadata/uid") : "";
  }
  struct SecretView {
    std::string rv, type;
    WebhookCertBundle bundle;
  };
  std::optional<SecretView> ReadSecret() {
    Result<Object> s = client_->Get(kSecrets, kNs, kSecret);
    if (!s.ok()) return std::nullopt;
    auto key = [&](const char* k) {
      return Base64Decode(k8s::GetString(*s, std::string("/data/") + k)).value_or("");
    };
    return SecretView{k8s::ResourceVersion(*s),
                      k8s::GetString(*s, "/type"),
                      {key("ca.crt"), key("ca.key"), key("tls.crt"), key("tls.key")}};
  }
  // Creates a GPU pod; the webhook's mutation is only there if the API server called it over TLS
  // verified against the caBundle.
  std::string AdmittedSchedulerName(const std::string& pod) {
    Result<Object> created = client_->Create({"v1", "pods", true}, "default", GpuPod(pod));
    EXPECT_TRUE(created.ok()) << created.status().ToString();
    return created.ok() ? k8s::GetString(*created, "/spec/schedulerName") : "";
  }

  std::string dir_;
  std::string kubeconfig_;  // what Launch() gives the scheduler
  std::unique_ptr<sim::ApiServer> api_;
  std::unique_ptr<k8s::RestClient> client_;
  eventwait::ChangeSignal tap_served_;
  std::unique_ptr<net::HttpServer> tap_;  // set by ServeThroughTap()
};

TEST_F(WebhookCertTest, CreatesTheSecretPatchesTheCaBundleAndReusesItAfterARestart) {
  CreateWebhookConfig(1);  // the real port is known once the scheduler listens
  std::unique_ptr<Subprocess> proc;
  int port = Launch(proc, {"--webhook-cert-check-interval=200ms"});
  ASSERT_GT(port, 0) << proc->Wait().err;
  SetWebhookPort(port);

  // (1) The Secret, with the layout and names the chart's consumers expect.
  std::optional<SecretView> secret = ReadSecret();
  ASSERT_TRUE(secret.has_value());
  EXPECT_EQ(secret->type, "kubernetes.io/tls");
  const WebhookCertBundle& b = secret->bundle;
  const auto now = std::chrono::system_clock::now();
  EXPECT_TRUE(net::VerifyCertificate(b.tls_crt, b.ca_crt, now).ok());
  EXPECT_TRUE(net::CheckKeyPair({b.tls_crt, b.tls_key}).ok());
  EXPECT_TRUE(net::CheckKeyPair({b.ca_crt, b.ca_key}).ok());
  net::CertificateInfo leaf = net::InspectCertificate(b.tls_crt).value();
  EXPECT_EQ(leaf.ip_addresses, std::vector<std::string>{"127.0.0.1"});
  for (const char* name :
       {"hami-scheduler", "hami-scheduler.hami-system", "hami-scheduler.hami-system.svc",
        "hami-scheduler.hami-system.svc.cluster.local", "localhost"}) {
    EXPECT_NE(std::find(leaf.dns_names.begin(), leaf.dns_names.end(), name), leaf.dns_names.end())
        << name;
  }
  EXPECT_GT(leaf.not_after - now, std::chrono::hours(24 * 364));
  net::CertificateInfo ca = net::InspectCertificate(b.ca_crt).value();
  EXPECT_GT(ca.not_after - now, std::chrono::hours(24 * 3649));
  // ...owned by the webhook configuration (deleted with it)...
  EXPECT_EQ(SecretOwnerUid(), WebhookConfigUid());
  EXPECT_FALSE(WebhookConfigUid().empty());
  // ...the caBundle...
  ASSERT_TRUE(WaitForWebhookConfig([&] { return CaBundle() == b.ca_crt; })) << CaBundle();
  // ...and the pair served.
  EXPECT_EQ(PeerCertificate(port, b.ca_crt), b.tls_crt);

  // (2) The API server trusts the webhook through that caBundle.
  EXPECT_EQ(AdmittedSchedulerName("gpu-1"), "hami-scheduler");
  std::string log = Stop(proc, /*graceful=*/true);  // the certificate loop stops with the rest
  EXPECT_EQ(Count(log,
                  "webhook certificate: created Secret hami-system/hami-scheduler-tls (CA "
                  "valid until "),
            1u)
      << log;
  EXPECT_EQ(Count(log, "webhook certificate: patched caBundle of hami-webhook (1 webhook)"), 1u)
      << log;

  // (3) A restart reuses the Secret as it is: same bytes, same version, no new CA, no patch.
  port = Launch(proc, {"--webhook-cert-check-interval=200ms"});
  ASSERT_GT(port, 0) << proc->Wait().err;
  SetWebhookPort(port);
  EXPECT_EQ(PeerCertificate(port, b.ca_crt), b.tls_crt);
  EXPECT_EQ(AdmittedSchedulerName("gpu-2"), "hami-scheduler");
  std::optional<SecretView> again = ReadSecret();
  ASSERT_TRUE(again.has_value());
  EXPECT_EQ(again->rv, secret->rv);
  EXPECT_EQ(again->bundle.tls_crt, b.tls_crt);
  EXPECT_EQ(again->bundle.ca_crt, b.ca_crt);
  EXPECT_EQ(CaBundle(), b.ca_crt);
  log = Stop(proc);
  EXPECT_EQ(Count(log, "webhook certificate: reused Secret hami-system/hami-scheduler-tls"), 1u)
      << log;
  EXPECT_EQ(Count(log, "created Secret"), 0u) << log;
  EXPECT_EQ(Count(log, "renewed"), 0u) << log;
  EXPECT_EQ(Count(log, "patched caBundle"), 0u) << log;
}

TEST_F(WebhookCertTest, RenewsAShortLivedServingCertificateWithoutARestart) {
  CreateWebhookConfig(1);
  std::unique_ptr<Subprocess> proc;
  // Renewed with a third of 3s left, checked every 100ms.
  int port = Launch(proc, {"--webhook-cert-validity=3s", "--webhook-ca-validity=1h",
                           "--webhook-cert-check-interval=100ms"});
  ASSERT_GT(port, 0) << proc->Wait().err;
  SetWebhookPort(port);
  const WebhookCertBundle first = ReadSecret().value().bundle;
  ASSERT_TRUE(WaitForWebhookConfig([&] { return CaBundle() == first.ca_crt; }));

  // (4) The Secret gets a new serving certificate from the same CA...
  std::optional<SecretView> renewed;
  ASSERT_TRUE(WaitForSecret([&] {
    renewed = ReadSecret();
    return renewed && renewed->bundle.tls_crt != first.tls_crt;
  }));
  EXPECT_EQ(renewed->bundle.ca_crt, first.ca_crt);
  EXPECT_EQ(renewed->bundle.ca_key, first.ca_key);
  // ...and new handshakes present whatever the Secret holds now (it keeps renewing every ~2s).
  // The pair a server presents emits no event; the scheduler swaps it in right after its write of
  // the Secret returns, so the Secret's watch event precedes it by that much, and a handshake that
  // loses this race is tried again at the next renewal's event.
  ASSERT_TRUE(WaitForSecret([&] {
    std::string served = PeerCertificate(port, first.ca_crt);
    std::optional<SecretView> now = ReadSecret();
    return !served.empty() && served != first.tls_crt && now && served == now->bundle.tls_crt;
  }));
  EXPECT_EQ(AdmittedSchedulerName("gpu-after-renewal"), "hami-scheduler");
  EXPECT_EQ(CaBundle(), first.ca_crt);
  std::string log = Stop(proc);
  EXPECT_GE(Count(log,
                  "webhook certificate: renewed Secret hami-system/hami-scheduler-tls "
                  "because the serving certificate expires at "),
            1u)
      << log;
  EXPECT_EQ(Count(log, "patched caBundle"), 1u) << log;
}

TEST_F(WebhookCertTest, TwoReplicasStartedTogetherShareOneSecret) {
  CreateWebhookConfig(1);
  std::unique_ptr<Subprocess> a, b;
  const std::vector<std::string> flags = {"--webhook-cert-check-interval=200ms"};
  a = std::make_unique<Subprocess>(Argv(flags),
                                   std::vector<std::string>{std::string("POD_NAMESPACE=") + kNs});
  b = std::make_unique<Subprocess>(Argv(flags),
                                   std::vector<std::string>{std::string("POD_NAMESPACE=") + kNs});
  int port_a = Port(*a), port_b = Port(*b);
  ASSERT_GT(port_a, 0) << a->Wait().err;
  ASSERT_GT(port_b, 0) << b->Wait().err;
  // (5) Both serve the one pair the Secret holds, and the caBundle names its CA.
  const WebhookCertBundle secret = ReadSecret().value().bundle;
  EXPECT_EQ(PeerCertificate(port_a, secret.ca_crt), secret.tls_crt);
  EXPECT_EQ(PeerCertificate(port_b, secret.ca_crt), secret.tls_crt);
  ASSERT_TRUE(WaitForWebhookConfig([&] { return CaBundle() == secret.ca_crt; }));
  SetWebhookPort(port_b);
  EXPECT_EQ(AdmittedSchedulerName("gpu-b"), "hami-scheduler");
  std::string log = Stop(a) + Stop(b);
  EXPECT_EQ(Count(log, "created Secret"), 1u) << log;
  EXPECT_EQ(Count(log, "reused Secret"), 1u) << log;
  EXPECT_EQ(Count(log, "renewed"), 0u) << log;
}

TEST_F(WebhookCertTest, AWebhookConfigurationAppliedLaterGetsItsCaBundle) {
  ServeThroughTap();
  std::unique_ptr<Subprocess> proc;
  int port = Launch(proc, {"--webhook-cert-check-interval=100ms"});
  ASSERT_GT(port, 0) << proc->Wait().err;
  // The scheduler keeps looking for the configuration (a missing one is not fatal)...
  ASSERT_TRUE(tap_served_.WaitUntil(
      [&] { return api_->RequestCounts()["GET mutatingwebhookconfigurations"] >= 3; }, kTimeout));
  // ...and patches it once it appears; the Secret, made before it, then becomes its own.
  EXPECT_EQ(SecretOwnerUid(), "");
  CreateWebhookConfig(port);
  const std::string ca = ReadSecret().value().bundle.ca_crt;
  ASSERT_TRUE(WaitForWebhookConfig([&] { return CaBundle() == ca; }));
  ASSERT_TRUE(WaitForSecret([&] { return SecretOwnerUid() == WebhookConfigUid(); }));
  EXPECT_EQ(AdmittedSchedulerName("gpu-late"), "hami-scheduler");
  std::string log = Stop(proc);
  // One warning, not one per retry.
  EXPECT_EQ(Count(log,
                  "MutatingWebhookConfiguration hami-webhook not found; its caBundle is set "
                  "once it exists (retrying every 100ms)"),
            1u)
      << log;
  EXPECT_EQ(Count(log, "patched caBundle of hami-webhook (1 webhook)"), 1u) << log;
  EXPECT_EQ(Count(log,
                  "Secret hami-system/hami-scheduler-tls now belongs to "
                  "MutatingWebhookConfiguration hami-webhook (deleted with it)"),
            1u)
      << log;
}

TEST_F(WebhookCertTest, ConflictingOrIncompleteFlagsAreRefusedAtStart) {
  // (6) Both ways of configuring TLS at once.
  ProcessResult r = RunProcess(Argv({"--cert_file=/tls/tls.crt", "--key_file=/tls/tls.key"}),
                               {std::string("POD_NAMESPACE=") + kNs});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("--webhook-cert-secret and --cert_file/--key_file"), std::string::npos)
      << r.err;
  // No namespace for the Secret.
  r = RunProcess(Argv({}), {});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("$POD_NAMESPACE"), std::string::npos) << r.err;
  // Durations that would renew on every check.
  r = RunProcess(Argv({"--webhook-cert-validity=1h", "--webhook-cert-renew-before=2h"}),
                 {std::string("POD_NAMESPACE=") + kNs});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("renewal window"), std::string::npos) << r.err;
  r = RunProcess(Argv({"--webhook-cert-check-interval=soon"}),
                 {std::string("POD_NAMESPACE=") + kNs});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("--webhook-cert-check-interval"), std::string::npos) << r.err;
  // Nothing was written.
  EXPECT_FALSE(ReadSecret().has_value());
}

// The controller in-process on a fake clock: a CA rollover keeps the old CA in the caBundle until
// it expires, and a second replica loads what the first renewed.
TEST_F(WebhookCertTest, CaRolloverOnAFakeClockAndAReplicaFollowing) {
  hami::FakeClock clock;
  WebhookCertOptions options;
  options.ns = kNs;
  options.secret_name = kSecret;
  SetServingNames("hami-scheduler", kNs, {}, options.policy);
  options.policy.ca_validity = std::chrono::seconds(90);
  options.policy.serving_validity = std::chrono::seconds(30);
  WebhookCertManager a(*client_, clock, options), b(*client_, clock, options);
  ASSERT_TRUE(a.Bootstrap().ok());
  ASSERT_TRUE(b.Bootstrap().ok());
  EXPECT_EQ(a.bundle().tls_crt, b.bundle().tls_crt);
  // No configuration yet: reported, not fatal.
  Status missing = a.SyncOnce();
  EXPECT_EQ(missing.code(), StatusCode::kUnavailable);
  EXPECT_NE(missing.message().find("not found"), std::string::npos);
  CreateWebhookConfig(1);
  ASSERT_TRUE(a.SyncOnce().ok());
  const WebhookCertBundle original = a.bundle();
  EXPECT_EQ(CaBundle(), original.ca_crt);

  clock.Advance(std::chrono::seconds(61));  // the CA has less than a serving validity left
  ASSERT_TRUE(a.SyncOnce().ok());
  const WebhookCertBundle rolled = a.bundle();
  std::vector<std::string> cas = net::SplitCertificateBundle(rolled.ca_crt).value();
  ASSERT_EQ(cas.size(), 2u);
  EXPECT_EQ(cas[1], original.ca_crt);
  EXPECT_EQ(ReadSecret().value().bundle.ca_crt, rolled.ca_crt);
  EXPECT_EQ(CaBundle(), rolled.ca_crt);  // old + new during the overlap
  EXPECT_TRUE(net::VerifyCertificate(rolled.tls_crt, cas[0], clock.WallNow()).ok());

  // The other replica sees the new resourceVersion and serves the new pair; nothing to write.
  const int generation = b.certificate()->generation();
  ASSERT_TRUE(b.SyncOnce().ok());
  EXPECT_EQ(b.bundle().tls_crt, rolled.tls_crt);
  EXPECT_EQ(b.certificate()->generation(), generation + 1);
  EXPECT_EQ(ReadSecret().value().bundle.tls_crt, rolled.tls_crt);

  clock.Advance(std::chrono::seconds(29));  // the old CA expires
  ASSERT_TRUE(b.SyncOnce().ok());
  EXPECT_EQ(ReadSecret().value().bundle.ca_crt, cas[0]);
  EXPECT_EQ(CaBundle(), cas[0]);
  ASSERT_TRUE(a.SyncOnce().ok());
  EXPECT_EQ(a.bundle().ca_crt, cas[0]);

  // Both replicas find the serving certificate due at the same moment: whichever writes second
  // loses on the resourceVersion, re-reads, and serves the winner's pair.
  clock.Advance(std::chrono::seconds(25));
  Status sa, sb;
  std::thread ta([&] { sa = a.SyncOnce(); }), tb([&] { sb = b.SyncOnce(); });
  ta.join();
  tb.join();
  ASSERT_TRUE(sa.ok()) << sa.ToString();
  ASSERT_TRUE(sb.ok()) << sb.ToString();
  const WebhookCertBundle stored = ReadSecret().value().bundle;
  EXPECT_NE(stored.tls_crt, rolled.tls_crt);
  EXPECT_EQ(a.bundle().tls_crt, stored.tls_crt);
  EXPECT_EQ(b.bundle().tls_crt, stored.tls_crt);
  EXPECT_EQ(CaBundle(), stored.ca_crt);
}

}  // namespace
}  // namespace hami::extender
