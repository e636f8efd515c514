// Loopback tests of CurlTransport and RestClient::Create against a cpp-httplib server on an
// ephemeral port; TLS material is generated with the openssl CLI into a temporary directory.
#include <gtest/gtest.h>
#include <httplib.h>
#include <stdlib.h>

#include <atomic>
#include <condition_variable>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <sstream>
#include <thread>

#include "common/base64.h"
#include "k8s/api_error.h"
#include "k8s/config.h"
#include "k8s/curl_transport.h"
#include "k8s/object.h"
#include "k8s/rest_client.h"

namespace hami::k8s {
namespace {

std::string ReadAll(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// A self-signed certificate for 127.0.0.1/localhost, generated once for the whole test program.
struct Pki {
  std::string dir;
  std::string cert_path, key_path;
  std::string cert_pem, key_pem;
};

const Pki& TestPki() {
  static const Pki* pki = [] {
    auto* p = new Pki();
    std::string tmpl = ::testing::TempDir() + "/k8s_pki_XXXXXX";
    p->dir = mkdtemp(tmpl.data());
    p->cert_path = p->dir + "/cert.pem";
    p->key_path = p->dir + "/key.pem";
    std::string cmd =
        "openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes "
        "-days 2 -subj /CN=localhost -addext "
        "subjectAltName=IP:127.0.0.1,DNS:localhost -keyout " +
        p->key_path + " -out " + p->cert_path + " >/dev/null 2>&1";
    if (std::system(cmd.c_str()) != 0) return p;
    p->cert_pem = ReadAll(p->cert_path);
    p->key_pem = ReadAll(p->key_path);
    return p;
  }();
  return *pki;
}

// Runs an httplib server on 127.0.0.1:<ephemeral> for the test's lifetime.
class ServerThread {
 public:
  explicit ServerThread(std::unique_ptr<httplib::Server> server) : server_(std::move(server)) {
    port_ = server_->bind_to_any_port("127.0.0.1");
    thread_ = std::thread([this] { server_->listen_after_bind(); });
    // httplib 0.11 has no readiness wait; stop() before the accept loop starts would be lost.
    while (!server_->is_running()) std::this_thread::yield();
  }
  ~ServerThread() {
    server_->stop();
    thread_.join();
  }
  httplib::Server& server() { return *server_; }
  int port() const { return port_; }

 private:
  std::unique_ptr<httplib::Server> server_;
  int port_ = 0;
  std::thread thread_;
};

std::unique_ptr<RestClient> MakeClient(const std::string& server, TlsConfig tls = {},
                                       std::string token = "") {
  static RealClock clock;
  RestConfig cfg;
  cfg.server = server;
  cfg.tls = tls;
  cfg.bearer_token = std::move(token);
  cfg.timeout = std::chrono::milliseconds(10000);
  CurlOptions opts;
  opts.tls = tls;
  auto transport = CurlTransport::Create(opts);
  EXPECT_TRUE(transport.ok()) << transport.status().ToString();
  RetryPolicy no_retry;
  no_retry.max_attempts = 1;
  return std::make_unique<RestClient>(cfg, std::move(transport).value(), clock, no_retry);
}

void InstallApi(httplib::Server& s) {
  s.Get("/api/v1/namespaces/ns/pods/p1", [](const httplib::Request& req, httplib::Response& res) {
    if (req.get_header_value("Authorization") != "Bearer secret") {
      res.status = 401;
      res.set_content(R"({"kind":"Status","reason":"Unauthorized","message":"no"})",
                      "application/json");
      return;
    }
    res.set_content(R"({"metadata":{"name":"p1","resourceVersion":"3"}})", "application/json");
  });
  s.Patch("/api/v1/namespaces/ns/pods/p1", [](const httplib::Request& req, httplib::Response& res) {
    res.set_content(
        R"({"ct":")" + req.get_header_value("Content-Type") + R"(","body":)" + req.body + "}",
        "application/json");
  });
  s.Put("/api/v1/namespaces/ns/pods/p1", [](const httplib::Request&, httplib::Response& res) {
    res.status = 409;
    res.set_content(R"({"kind":"Status","reason":"Conflict","message":"modified"})",
                    "application/json");
  });
  s.Post("/api/v1/namespaces/ns/pods/p1/binding",
         [](const httplib::Request& req, httplib::Response& res) {
           res.status = 201;
           res.set_content(req.body, "application/json");
         });
}

TEST(CurlLoopbackTest, PlainHttpVerbsAndErrors) {
  ServerThread st(std::make_unique<httplib::Server>());
  InstallApi(st.server());
  std::string base = "http://127.0.0.1:" + std::to_string(st.port());

  auto client = MakeClient(base, {}, "secret");
  Result<Object> pod = client->Get(kPods, "ns", "p1");
  ASSERT_TRUE(pod.ok()) << pod.status().ToString();
  EXPECT_EQ(ResourceVersion(*pod), "3");

  Result<Object> patched =
      client->Patch(kPods, "ns", "p1", PatchType::kJsonPatch, R"([{"op":"add"}])");
  ASSERT_TRUE(patched.ok()) << patched.status().ToString();
  EXPECT_EQ((*patched)["ct"], "application/json-patch+json");
  EXPECT_EQ((*patched)["body"][0]["op"], "add");

  Object obj = {{"metadata", {{"name", "p1"}, {"resourceVersion", "2"}}}};
  EXPECT_TRUE(IsConflict(client->Update(kPods, "ns", obj).status()));

  Object binding = {{"metadata", {{"name", "p1"}}}, {"target", {{"name", "n1"}}}};
  Result<Object> bound = client->Create(kPods, "ns", binding, "binding");
  ASSERT_TRUE(bound.ok());
  EXPECT_EQ((*bound)["target"]["name"], "n1");

  auto anonymous = MakeClient(base);
  Result<Object> denied = anonymous->Get(kPods, "ns", "p1");
  EXPECT_EQ(denied.status().code(), StatusCode::kPermissionDenied);
  EXPECT_EQ(denied.status().message(), "HTTP 401 Unauthorized: no");
}

TEST(CurlLoopbackTest, WatchStreamsChunkedEvents) {
  ServerThread st(std::make_unique<httplib::Server>());
  std::string events =
      R"({"type":"ADDED","object":{"metadata":{"name":"a","resourceVersion":"5"}}})"
      "\n"
      R"({"type":"BOOKMARK","object":{"metadata":{"resourceVersion":"9"}}})"
      "\n";
  std::string query;
  st.server().Get("/api/v1/pods", [&](const httplib::Request& req, httplib::Response& res) {
    query = req.get_param_value("resourceVersion") + "|" + req.get_param_value("watch");
    res.set_chunked_content_provider("application/json", [events](size_t, httplib::DataSink& sink) {
      // Split the first event across two chunks.
      sink.write(events.data(), 20);
      sink.write(events.data() + 20, events.size() - 20);
      sink.done();
      return true;
    });
  });
  auto client = MakeClient("http://127.0.0.1:" + std::to_string(st.port()));
  std::vector<std::string> seen;
  ListOptions o;
  o.resource_version = "4";
  Status s = client->Watch(kPods, "", o, [&](const WatchEvent& ev) {
    seen.push_back(std::string(WatchEventTypeName(ev.type)) + "@" + ResourceVersion(*ev.object));
    return true;
  });
  ASSERT_TRUE(s.ok()) << s.ToString();
  EXPECT_EQ(seen, (std::vector<std::string>{"ADDED@5", "BOOKMARK@9"}));
  EXPECT_EQ(query, "4|true");
}

TEST(CurlLoopbackTest, WatchGoneAndCancellation) {
  ServerThread st(std::make_unique<httplib::Server>());
  std::mutex mu;
  std::condition_variable cv;
  bool release = false;
  st.server().Get("/api/v1/nodes", [&](const httplib::Request& req, httplib::Response& res) {
    if (req.get_param_value("resourceVersion") == "1") {
      res.status = 410;
      res.set_content(R"({"kind":"Status","reason":"Expired","code":410})", "application/json");
      return;
    }
    res.set_chunked_content_provider("application/json", [&](size_t off, httplib::DataSink& sink) {
      if (off == 0) {
        std::string ev = R"({"type":"ADDED","object":{"metadata":{"name":"n"}}})"
                         "\n";
        sink.write(ev.data(), ev.size());
        return true;
      }
      // Hold the stream open until the test ends (the client cancels first).
      std::unique_lock<std::mutex> lock(mu);
      cv.wait(lock, [&] { return release; });
      sink.done();
      return true;
    });
  });
  auto client = MakeClient("http://127.0.0.1:" + std::to_string(st.port()));
  ListOptions gone;
  gone.resource_version = "1";
  EXPECT_TRUE(IsGone(client->Watch(kNodes, "", gone, [](const WatchEvent&) { return true; })));

  Cancellation cancel;
  int events = 0;
  Status s = client->Watch(
      kNodes, "", {},
      [&](const WatchEvent&) {
        ++events;
        cancel.Cancel();  // noticed by the transport's progress callback
        return true;
      },
      &cancel);
  EXPECT_EQ(s.code(), StatusCode::kCancelled) << s.ToString();
  EXPECT_EQ(events, 1);
  {
    std::lock_guard<std::mutex> lock(mu);
    release = true;
  }
  cv.notify_all();
}

TEST(CurlLoopbackTest, ConnectionRefusedIsUnavailable) {
  int port;
  {
    ServerThread st(std::make_unique<httplib::Server>());
    port = st.port();
  }
  auto client = MakeClient("http://127.0.0.1:" + std::to_string(port));
  EXPECT_EQ(client->Get(kNodes, "", "n").status().code(), StatusCode::kUnavailable);
}

std::unique_ptr<httplib::Server> TlsServer(bool require_client_cert) {
  const Pki& pki = TestPki();
  if (require_client_cert) {
    return std::make_unique<httplib::SSLServer>(pki.cert_path.c_str(), pki.key_path.c_str(),
                                                pki.cert_path.c_str());
  }
  return std::make_unique<httplib::SSLServer>(pki.cert_path.c_str(), pki.key_path.c_str());
}

TEST(CurlLoopbackTest, TlsWithCaFromMemoryAndInsecure) {
  const Pki& pki = TestPki();
  if (pki.cert_pem.empty()) GTEST_SKIP() << "openssl CLI could not generate a certificate";
  ServerThread st(TlsServer(false));
  st.server().Get("/api/v1/nodes/n", [](const httplib::Request&, httplib::Response& res) {
    res.set_content(R"({"metadata":{"name":"n"}})", "application/json");
  });
  std::string base = "https://127.0.0.1:" + std::to_string(st.port());

  TlsConfig with_ca;
  with_ca.ca_pem = pki.cert_pem;
  Result<Object> ok = MakeClient(base, with_ca)->Get(kNodes, "", "n");
  ASSERT_TRUE(ok.ok()) << ok.status().ToString();
  EXPECT_EQ(Name(*ok), "n");

  // The system trust store does not know our self-signed certificate.
  Result<Object> untrusted = MakeClient(base)->Get(kNodes, "", "n");
  EXPECT_EQ(untrusted.status().code(), StatusCode::kFailedPrecondition)
      << untrusted.status().ToString();

  TlsConfig insecure;
  insecure.insecure_skip_verify = true;
  EXPECT_TRUE(MakeClient(base, insecure)->Get(kNodes, "", "n").ok());
}

TEST(CurlLoopbackTest, ClientCertificateFromKubeconfigData) {
  const Pki& pki = TestPki();
  if (pki.cert_pem.empty()) GTEST_SKIP() << "openssl CLI could not generate a certificate";
  ServerThread st(TlsServer(true));
  st.server().Get("/api/v1/nodes/n", [](const httplib::Request&, httplib::Response& res) {
    res.set_content(R"({"metadata":{"name":"n"}})", "application/json");
  });
  std::string base = "https://127.0.0.1:" + std::to_string(st.port());
  std::string kubeconfig =
      "current-context: c\n"
      "clusters: [{name: k, cluster: {server: \"" +
      base + "\", certificate-authority-data: " + Base64Encode(pki.cert_pem) +
      "}}]\n"
      "contexts: [{name: c, context: {cluster: k, user: u}}]\n"
      "users: [{name: u, user: {client-certificate-data: " +
      Base64Encode(pki.cert_pem) + ", client-key-data: " + Base64Encode(pki.key_pem) + "}}]\n";
  std::string path = pki.dir + "/kubeconfig";
  std::ofstream(path) << kubeconfig;
  Result<RestConfig> cfg = LoadKubeconfigFile(path);
  ASSERT_TRUE(cfg.ok()) << cfg.status().ToString();
  Result<std::unique_ptr<RestClient>> client = RestClient::Create(*cfg);
  ASSERT_TRUE(client.ok()) << client.status().ToString();
  Result<Object> node = (*client)->Get(kNodes, "", "n");
  ASSERT_TRUE(node.ok()) << node.status().ToString();
  EXPECT_EQ(Name(*node), "n");

  // Without the client certificate the handshake is refused.
  TlsConfig ca_only;
  ca_only.ca_pem = pki.cert_pem;
  EXPECT_FALSE(MakeClient(base, ca_only)->Get(kNodes, "", "n").ok());
}

}  // namespace
}  // namespace hami::k8s
