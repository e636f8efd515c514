// Loopback tests of both production transports (SocketTransport, CurlTransport) and of
// RestClient::Create against a cpp-httplib server, or a raw socket server where a test needs a
// misbehaving peer, on ephemeral ports; TLS material is generated with the openssl CLI into a
// temporary directory.
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <httplib.h>
#include <netinet/in.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <unistd.h>

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
#include "k8s/socket_transport.h"
#include "net/http_server.h"

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

// Runs an httplib server on 127.0.0.1:<ephemeral> for the test's lifetime. Register routes on
// server() before the first port() call: that call starts the server, so the routes are written
// before its threads exist (httplib reads them without a lock).
class ServerThread {
 public:
  explicit ServerThread(std::unique_ptr<httplib::Server> server) : server_(std::move(server)) {
    port_ = server_->bind_to_any_port("127.0.0.1");
  }
  ~ServerThread() {
    if (!thread_.joinable()) return;
    server_->stop();
    thread_.join();
  }
  httplib::Server& server() { return *server_; }
  int port() {
    if (!thread_.joinable()) {
      thread_ = std::thread([this] { server_->listen_after_bind(); });
      // httplib 0.11 has no readiness wait; stop() before the accept loop starts would be lost.
      while (!server_->is_running()) std::this_thread::yield();
    }
    return port_;
  }

 private:
  std::unique_ptr<httplib::Server> server_;
  int port_ = 0;
  std::thread thread_;
};

enum class Kind { kSocket, kCurl };

std::unique_ptr<Transport> MakeTransport(Kind kind, const TlsConfig& tls) {
  if (kind == Kind::kCurl) {
    CurlOptions opts;
    opts.tls = tls;
    auto transport = CurlTransport::Create(opts);
    EXPECT_TRUE(transport.ok()) << transport.status().ToString();
    return transport.ok() ? std::move(transport).value() : nullptr;
  }
  SocketOptions opts;
  opts.tls = tls;
  auto transport = SocketTransport::Create(opts);
  EXPECT_TRUE(transport.ok()) << transport.status().ToString();
  return transport.ok() ? std::move(transport).value() : nullptr;
}

std::unique_ptr<RestClient> MakeClient(
    Kind kind, const std::string& server, TlsConfig tls = {}, std::string token = "",
    std::chrono::milliseconds timeout = std::chrono::seconds(10)) {
  static RealClock clock;
  RestConfig cfg;
  cfg.server = server;
  cfg.tls = tls;
  cfg.bearer_token = std::move(token);
  cfg.timeout = timeout;
  RetryPolicy no_retry;
  no_retry.max_attempts = 1;
  return std::make_unique<RestClient>(cfg, MakeTransport(kind, tls), clock, no_retry);
}

// Every behaviour below holds for both transports.
class TransportLoopbackTest : public ::testing::TestWithParam<Kind> {
 protected:
  std::unique_ptr<RestClient> Client(const std::string& server, TlsConfig tls = {},
                                     std::string token = "") {
    return MakeClient(GetParam(), server, std::move(tls), std::move(token));
  }
};

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

TEST_P(TransportLoopbackTest, PlainHttpVerbsAndErrors) {
  ServerThread st(std::make_unique<httplib::Server>());
  InstallApi(st.server());
  std::string base = "http://127.0.0.1:" + std::to_string(st.port());

  auto client = Client(base, {}, "secret");
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

  auto anonymous = Client(base);
  Result<Object> denied = anonymous->Get(kPods, "ns", "p1");
  EXPECT_EQ(denied.status().code(), StatusCode::kPermissionDenied);
  EXPECT_EQ(denied.status().message(), "HTTP 401 Unauthorized: no");
}

TEST_P(TransportLoopbackTest, WatchStreamsChunkedEvents) {
  ServerThread st(std::make_unique<httplib::Server>());
  std::string events =
      R"({"type":"ADDED","object":{"metadata":{"name":"a","resourceVersion":"5"}}})"
      "\n"
      R"({"type":"BOOKMARK","object":{"metadata":{"resourceVersion":"9"}}})"
      "\n";
  std::mutex mu;  // the handler runs on the server's thread
  std::string query;
  st.server().Get("/api/v1/pods", [&](const httplib::Request& req, httplib::Response& res) {
    std::lock_guard<std::mutex> lock(mu);
    query = req.get_param_value("resourceVersion") + "|" + req.get_param_value("watch");
    res.set_chunked_content_provider("application/json", [events](size_t, httplib::DataSink& sink) {
      // Split the first event across two chunks.
      sink.write(events.data(), 20);
      sink.write(events.data() + 20, events.size() - 20);
      sink.done();
      return true;
    });
  });
  auto client = Client("http://127.0.0.1:" + std::to_string(st.port()));
  std::vector<std::string> seen;
  ListOptions o;
  o.resource_version = "4";
  Status s = client->Watch(kPods, "", o, [&](const WatchEvent& ev) {
    seen.push_back(std::string(WatchEventTypeName(ev.type)) + "@" + ResourceVersion(*ev.object));
    return true;
  });
  ASSERT_TRUE(s.ok()) << s.ToString();
  EXPECT_EQ(seen, (std::vector<std::string>{"ADDED@5", "BOOKMARK@9"}));
  std::lock_guard<std::mutex> lock(mu);
  EXPECT_EQ(query, "4|true");
}

// A watch response that sends one ADDED event, then holds the stream open (no bytes, no close)
// until Release(): a server gone silent, or one the client must cancel.
class SilentAfterOneEvent {
 public:
  ~SilentAfterOneEvent() { Release(); }
  void Serve(httplib::Response& res) {
    res.set_chunked_content_provider(
        "application/json", [this](size_t off, httplib::DataSink& sink) {
          if (off == 0) {
            std::string ev = R"({"type":"ADDED","object":{"metadata":{"name":"n"}}})"
                             "\n";
            sink.write(ev.data(), ev.size());
            return true;
          }
          std::unique_lock<std::mutex> lock(mu_);
          cv_.wait(lock, [&] { return release_; });
          sink.done();
          return true;
        });
  }
  void Release() {
    {
      std::lock_guard<std::mutex> lock(mu_);
      release_ = true;
    }
    cv_.notify_all();
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  bool release_ = false;
};

TEST_P(TransportLoopbackTest, WatchGoneAndCancellation) {
  ServerThread st(std::make_unique<httplib::Server>());
  SilentAfterOneEvent stream;  // held open until the test ends (the client cancels first)
  st.server().Get("/api/v1/nodes", [&](const httplib::Request& req, httplib::Response& res) {
    if (req.get_param_value("resourceVersion") == "1") {
      res.status = 410;
      res.set_content(R"({"kind":"Status","reason":"Expired","code":410})", "application/json");
      return;
    }
    stream.Serve(res);
  });
  auto client = Client("http://127.0.0.1:" + std::to_string(st.port()));
  ListOptions gone;
  gone.resource_version = "1";
  EXPECT_TRUE(IsGone(client->Watch(kNodes, "", gone, [](const WatchEvent&) { return true; })));

  Cancellation cancel;
  int events = 0;
  Status s = client->Watch(
      kNodes, "", {},
      [&](const WatchEvent&) {
        ++events;
        cancel.Cancel();  // noticed by the transport within a second
        return true;
      },
      &cancel);
  EXPECT_EQ(s.code(), StatusCode::kCancelled) << s.ToString();
  EXPECT_EQ(events, 1);
  stream.Release();
}

TEST_P(TransportLoopbackTest, ASilentWatchEndsAfterItsTimeoutAndAGrace) {
  ServerThread st(std::make_unique<httplib::Server>());
  SilentAfterOneEvent stream;  // then silence, whatever timeoutSeconds asked for
  st.server().Get("/api/v1/nodes",
                  [&](const httplib::Request&, httplib::Response& res) { stream.Serve(res); });
  auto client = Client("http://127.0.0.1:" + std::to_string(st.port()));
  ListOptions opts;
  opts.timeout_seconds = 1;  // the client gives up after 1 s + 2 s of grace
  int events = 0;
  auto t0 = std::chrono::steady_clock::now();
  Status s = client->Watch(kNodes, "", opts, [&](const WatchEvent&) {
    ++events;
    return true;
  });
  double waited = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  EXPECT_EQ(s.code(), StatusCode::kDeadlineExceeded) << s.ToString();
  EXPECT_EQ(events, 1);
  EXPECT_LT(waited, 20.0) << "a silent watch must not hang its caller";
  stream.Release();
}

TEST_P(TransportLoopbackTest, ConnectionRefusedIsUnavailable) {
  int port;
  {
    ServerThread st(std::make_unique<httplib::Server>());
    port = st.port();
  }
  auto client = Client("http://127.0.0.1:" + std::to_string(port));
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

// GET /api/v1/nodes/n answers a node named n.
void ServeNodeN(httplib::Server& s) {
  s.Get("/api/v1/nodes/n", [](const httplib::Request&, httplib::Response& res) {
    res.set_content(R"({"metadata":{"name":"n"}})", "application/json");
  });
}

TEST_P(TransportLoopbackTest, TlsWithCaFromMemoryAndInsecure) {
  const Pki& pki = TestPki();
  if (pki.cert_pem.empty()) GTEST_SKIP() << "openssl CLI could not generate a certificate";
  ServerThread st(TlsServer(false));
  ServeNodeN(st.server());
  std::string base = "https://127.0.0.1:" + std::to_string(st.port());

  TlsConfig with_ca;
  with_ca.ca_pem = pki.cert_pem;
  Result<Object> ok = Client(base, with_ca)->Get(kNodes, "", "n");
  ASSERT_TRUE(ok.ok()) << ok.status().ToString();
  EXPECT_EQ(Name(*ok), "n");

  // The system trust store does not know our self-signed certificate.
  Result<Object> untrusted = Client(base)->Get(kNodes, "", "n");
  EXPECT_EQ(untrusted.status().code(), StatusCode::kFailedPrecondition)
      << untrusted.status().ToString();

  TlsConfig insecure;
  insecure.insecure_skip_verify = true;
  EXPECT_TRUE(Client(base, insecure)->Get(kNodes, "", "n").ok());
}

TEST_P(TransportLoopbackTest, ClientCertificateFromKubeconfigData) {
  const Pki& pki = TestPki();
  if (pki.cert_pem.empty()) GTEST_SKIP() << "openssl CLI could not generate a certificate";
  ServerThread st(TlsServer(true));
  ServeNodeN(st.server());
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
  EXPECT_FALSE(Client(base, ca_only)->Get(kNodes, "", "n").ok());
}

std::string KindName(const ::testing::TestParamInfo<Kind>& p) {
  return p.param == Kind::kSocket ? "Socket" : "Curl";
}
INSTANTIATE_TEST_SUITE_P(Transports, TransportLoopbackTest,
                         ::testing::Values(Kind::kSocket, Kind::kCurl), KindName);

// A raw HTTP/1.1 server for peers httplib will not imitate: each connection reads one request,
// sends `reply` and closes without saying so (no "Connection: close").
class OneShotServer {
 public:
  explicit OneShotServer(std::string reply) : reply_(std::move(reply)) {
    fd_ = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    EXPECT_EQ(::bind(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof addr), 0);
    EXPECT_EQ(::listen(fd_, 16), 0);
    socklen_t len = sizeof addr;
    ::getsockname(fd_, reinterpret_cast<sockaddr*>(&addr), &len);
    port_ = ntohs(addr.sin_port);
    thread_ = std::thread([this] { Serve(); });
  }
  ~OneShotServer() {
    ::shutdown(fd_, SHUT_RDWR);
    thread_.join();
    ::close(fd_);
  }
  int port() const { return port_; }
  int accepted() const { return accepted_.load(); }

 private:
  void Serve() {
    for (;;) {
      int c = ::accept(fd_, nullptr, nullptr);
      if (c < 0) return;
      ++accepted_;
      std::string in;
      char buf[4096];
      size_t end;
      while ((end = in.find("\r\n\r\n")) == std::string::npos) {
        ssize_t n = ::recv(c, buf, sizeof buf, 0);
        if (n <= 0) break;
        in.append(buf, static_cast<size_t>(n));
      }
      size_t cl = in.find("Content-Length: ");
      size_t want = cl == std::string::npos ? 0 : std::stoul(in.substr(cl + 16));
      while (end != std::string::npos && in.size() < end + 4 + want) {
        ssize_t n = ::recv(c, buf, sizeof buf, 0);
        if (n <= 0) break;
        in.append(buf, static_cast<size_t>(n));
      }
      (void)::send(c, reply_.data(), reply_.size(), MSG_NOSIGNAL);
      ::close(c);
    }
  }
  std::string reply_;
  int fd_ = -1;
  int port_ = 0;
  std::atomic<int> accepted_{0};
  std::thread thread_;
};

TEST(SocketTransportTest, ReusesOneConnectionForSequentialRequests) {
  auto server = std::make_unique<httplib::Server>();
  server->set_keep_alive_max_count(1000);  // httplib closes after 5 requests by default
  server->set_tcp_nodelay(true);
  ServerThread st(std::move(server));
  InstallApi(st.server());
  auto transport = SocketTransport::Create({}).value();
  SocketTransport* raw = transport.get();
  static RealClock clock;
  RestConfig cfg;
  cfg.server = "http://127.0.0.1:" + std::to_string(st.port());
  cfg.bearer_token = "secret";
  RestClient client(cfg, std::move(transport), clock);
  for (int i = 0; i < 20; ++i) {
    ASSERT_TRUE(client.Get(kPods, "ns", "p1").ok());
    ASSERT_TRUE(client.Patch(kPods, "ns", "p1", PatchType::kMerge, R"({"a":1})").ok());
  }
  EXPECT_EQ(raw->connections_opened(), 1u);
}

// A server whose POSTs answer with their own sequence number as the resourceVersion, so the
// order of the answers can be checked.
std::unique_ptr<net::HttpServer> SequenceServer(size_t keep_alive_max_requests, int* port) {
  net::HttpServerOptions opts;
  opts.keep_alive_max_requests = keep_alive_max_requests;
  auto server = net::HttpServer::Create(opts).value();
  auto counter = std::make_shared<std::atomic<int>>(0);
  server->HandlePrefix("POST", "/api/v1/namespaces/",
                       [counter](const net::HttpRequest& req, net::HttpResponse& res) {
                         int n = ++*counter;
                         res.SetJson(201, "{\"metadata\":{\"resourceVersion\":\"" +
                                              std::to_string(n) + "\"},\"echo\":" + req.body + "}");
                       });
  *port = server->Start().value();
  return server;
}

TEST_P(TransportLoopbackTest, BatchedCreatesAreAnsweredInOrder) {
  int port = 0;
  auto server = SequenceServer(100000, &port);
  auto client = MakeClient(GetParam(), "http://127.0.0.1:" + std::to_string(port));
  std::vector<std::pair<std::string, std::string>> items;
  for (int i = 0; i < 10; ++i) {
    items.emplace_back(i % 2 ? "a" : "b", "{\"i\":" + std::to_string(i) + "}");
  }
  for (int round = 0; round < 2; ++round) {
    std::vector<Result<WriteAck>> got = client->CreateAckBatch(kEvents, items);
    ASSERT_EQ(got.size(), items.size());
    for (size_t i = 0; i < got.size(); ++i) {
      ASSERT_TRUE(got[i].ok()) << i << ": " << got[i].status().ToString();
      EXPECT_EQ(got[i]->resource_version, std::to_string(round * 10 + static_cast<int>(i) + 1));
    }
  }
  EXPECT_TRUE(client->CreateAckBatch(kEvents, {}).empty());
}

TEST_P(TransportLoopbackTest, BatchedPatchesOfDifferentObjectsAreAnsweredInOrder) {
  net::HttpServerOptions opts;
  auto server = net::HttpServer::Create(opts).value();
  auto counter = std::make_shared<std::atomic<int>>(0);
  // Each answer's resourceVersion says which request it was: sequence, path and content type.
  server->HandlePrefix(
      "PATCH", "/api/v1/", [counter](const net::HttpRequest& req, net::HttpResponse& res) {
        std::string tag =
            std::to_string(++*counter) + "|" + req.path + "|" + req.Header("Content-Type");
        res.SetJson(200, "{\"metadata\":{\"resourceVersion\":\"" + tag + "\"}}");
      });
  int port = server->Start().value();
  auto client = MakeClient(GetParam(), "http://127.0.0.1:" + std::to_string(port));
  RestClient::PatchItem pod{&kPods, "ns", "p1", PatchType::kMerge, R"({"a":1})", ""};
  RestClient::PatchItem node{&kNodes, "", "n1", PatchType::kJsonPatch, R"([])", ""};
  RestClient::PatchItem status{&kPods, "ns", "p1", PatchType::kMerge, R"({})", "status"};
  std::vector<Result<WriteAck>> got = client->PatchAckBatch({pod, node, status});
  ASSERT_EQ(got.size(), 3u);
  for (const auto& g : got) ASSERT_TRUE(g.ok()) << g.status().ToString();
  EXPECT_EQ(got[0]->resource_version,
            "1|/api/v1/namespaces/ns/pods/p1|application/merge-patch+json");
  EXPECT_EQ(got[1]->resource_version, "2|/api/v1/nodes/n1|application/json-patch+json");
  EXPECT_EQ(got[2]->resource_version,
            "3|/api/v1/namespaces/ns/pods/p1/status|application/merge-patch+json");
  // An item that names no object fails the whole batch before anything is sent.
  RestClient::PatchItem nameless{&kPods, "ns", "", PatchType::kMerge, "{}", ""};
  got = client->PatchAckBatch({pod, nameless});
  ASSERT_EQ(got.size(), 2u);
  EXPECT_EQ(got[0].status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(counter->load(), 3);
}

TEST(SocketTransportTest, PipelinedBatchUsesOneConnectionAndReportsALostTail) {
  int port = 0;
  auto server = SequenceServer(100000, &port);
  auto transport = SocketTransport::Create({}).value();
  SocketTransport* raw = transport.get();
  static RealClock clock;
  RestConfig cfg;
  cfg.server = "http://127.0.0.1:" + std::to_string(port);
  RestClient client(cfg, std::move(transport), clock);
  std::vector<std::pair<std::string, std::string>> items(20, {"ns", "{}"});
  for (int round = 0; round < 3; ++round) {
    for (const Result<WriteAck>& r : client.CreateAckBatch(kEvents, items)) {
      ASSERT_TRUE(r.ok()) << r.status().ToString();
    }
  }
  EXPECT_EQ(raw->connections_opened(), 1u);  // 60 creates, one connection, three round trips

  // A server that closes after 3 requests per connection answers 3 of 5; the other 2 are
  // reported lost (never silently retried: POSTs are not idempotent).
  int short_port = 0;
  auto short_lived = SequenceServer(3, &short_port);
  cfg.server = "http://127.0.0.1:" + std::to_string(short_port);
  RestClient short_client(cfg, SocketTransport::Create({}).value(), clock);
  std::vector<Result<WriteAck>> got = short_client.CreateAckBatch(
      kEvents, std::vector<std::pair<std::string, std::string>>(5, {"ns", "{}"}));
  ASSERT_EQ(got.size(), 5u);
  for (int i = 0; i < 3; ++i) EXPECT_TRUE(got[i].ok()) << i << ": " << got[i].status().ToString();
  for (int i = 3; i < 5; ++i) {
    ASSERT_FALSE(got[i].ok()) << i;
    EXPECT_NE(got[i].status().message().find("of 5 pipelined requests"), std::string::npos)
        << got[i].status().ToString();
  }
  // The next batch opens a new connection and succeeds.
  for (const Result<WriteAck>& r :
       short_client.CreateAckBatch(kEvents, {{"ns", "{}"}, {"ns", "{}"}})) {
    EXPECT_TRUE(r.ok()) << r.status().ToString();
  }
}

TEST(SocketTransportTest, ReadToCloseBodyAndSilentlyClosedConnections) {
  OneShotServer server(
      "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n\r\n"
      R"({"metadata":{"name":"n"}})");
  auto transport = SocketTransport::Create({}).value();
  HttpRequest get;
  get.url = "http://127.0.0.1:" + std::to_string(server.port()) + "/api/v1/nodes/n";
  get.timeout = std::chrono::seconds(10);
  // No Content-Length: the body ends with the connection, which is then not pooled.
  for (int i = 0; i < 3; ++i) {
    Result<HttpResponse> r = transport->Do(get);
    ASSERT_TRUE(r.ok()) << r.status().ToString();
    EXPECT_EQ(r->body, R"({"metadata":{"name":"n"}})");
  }
  EXPECT_EQ(server.accepted(), 3);
  EXPECT_EQ(transport->connections_opened(), 3u);
}

TEST(SocketTransportTest, ServerClosingAPooledConnectionRetriesOnlyIdempotentRequests) {
  // Claims a keep-alive response, then closes: the pooled connection is dead when reused.
  OneShotServer server("HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\n{}");
  auto transport = SocketTransport::Create({}).value();
  HttpRequest req;
  req.url = "http://127.0.0.1:" + std::to_string(server.port()) + "/api/v1/nodes/n";
  req.timeout = std::chrono::seconds(10);
  ASSERT_TRUE(transport->Do(req).ok());
  Result<HttpResponse> again = transport->Do(req);  // GET: retried on a new connection
  ASSERT_TRUE(again.ok()) << again.status().ToString();
  EXPECT_EQ(again->body, "{}");
  EXPECT_EQ(server.accepted(), 2);  // the dead pooled one was tried, then a fresh one

  req.method = "POST";
  req.body = "{}";
  Result<HttpResponse> post = transport->Do(req);  // a fresh-looking pooled, dead connection
  EXPECT_EQ(post.status().code(), StatusCode::kUnknown) << post.status().ToString();
  EXPECT_TRUE(transport->Do(req).ok());  // nothing pooled now: a new connection
}

TEST(SocketTransportTest, MalformedResponsesAreErrors) {
  // Found by fuzz_http_response: a status line without the space after the version.
  for (const char* reply :
       {"HTTP/1.200 OK\r\n\r\n", "HTTP/1.1 099 Low\r\n\r\n", "SSH-2.0-OpenSSH\r\n\r\n",
        "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n",
        // Chunk sizes are bare hex digits: no "0x", sign or leading space (strtoull took them).
        "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n0x2\r\n{}\r\n0\r\n\r\n",
        "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n+2\r\n{}\r\n0\r\n\r\n",
        "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n 2\r\n{}\r\n0\r\n\r\n",
        "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n2 x\r\n{}\r\n0\r\n\r\n",
        // Content-Length likewise: digits only (strtoull read "-1" as 2^64 - 1).
        "HTTP/1.1 200 OK\r\nContent-Length: -1\r\n\r\n{}",
        "HTTP/1.1 200 OK\r\nContent-Length: +2\r\n\r\n{}"}) {
    OneShotServer server(reply);
    auto transport = SocketTransport::Create({}).value();
    HttpRequest req;
    req.url = "http://127.0.0.1:" + std::to_string(server.port()) + "/api/v1/nodes/n";
    req.timeout = std::chrono::seconds(10);
    Result<HttpResponse> r = transport->Do(req);
    EXPECT_EQ(r.status().code(), StatusCode::kUnknown) << reply << " -> " << r.status().ToString();
  }
}

TEST(SocketTransportTest, ChunkExtensionsAreSkipped) {
  OneShotServer server(
      "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\nConnection: close\r\n\r\n"
      "1;name=value\r\n{\r\n1 \t;x\r\n}\r\n0\r\n\r\n");
  auto transport = SocketTransport::Create({}).value();
  HttpRequest req;
  req.url = "http://127.0.0.1:" + std::to_string(server.port()) + "/api/v1/nodes/n";
  req.timeout = std::chrono::seconds(10);
  Result<HttpResponse> r = transport->Do(req);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->body, "{}");
}

TEST(SocketTransportTest, DeadlineAndCancellation) {
  ServerThread st(std::make_unique<httplib::Server>());
  std::mutex mu;
  std::condition_variable cv;
  bool release = false;
  st.server().Get("/api/v1/nodes/slow", [&](const httplib::Request&, httplib::Response& res) {
    std::unique_lock<std::mutex> lock(mu);
    cv.wait(lock, [&] { return release; });
    res.set_content("{}", "application/json");
  });
  auto transport = SocketTransport::Create({}).value();
  HttpRequest req;
  req.url = "http://127.0.0.1:" + std::to_string(st.port()) + "/api/v1/nodes/slow";
  req.timeout = std::chrono::milliseconds(100);
  EXPECT_EQ(transport->Do(req).status().code(), StatusCode::kDeadlineExceeded);

  Cancellation cancel;
  cancel.Cancel();
  req.cancel = &cancel;
  EXPECT_EQ(transport->Do(req).status().code(), StatusCode::kCancelled);
  {
    std::lock_guard<std::mutex> lock(mu);
    release = true;
  }
  cv.notify_all();
}

TEST(SocketTransportTest, TlsServerNameOverridesTheVerifiedName) {
  const Pki& pki = TestPki();
  if (pki.cert_pem.empty()) GTEST_SKIP() << "openssl CLI could not generate a certificate";
  ServerThread st(TlsServer(false));
  ServeNodeN(st.server());
  std::string base = "https://127.0.0.1:" + std::to_string(st.port());
  TlsConfig tls;
  tls.ca_pem = pki.cert_pem;
  tls.server_name = "localhost";  // in the certificate's names
  EXPECT_TRUE(MakeClient(Kind::kSocket, base, tls)->Get(kNodes, "", "n").ok());
  tls.server_name = "elsewhere.example";  // not in them
  Status wrong = MakeClient(Kind::kSocket, base, tls)->Get(kNodes, "", "n").status();
  EXPECT_EQ(wrong.code(), StatusCode::kFailedPrecondition) << wrong.ToString();
  // "localhost" by URL is verified by name, 127.0.0.1 by address: both are in the certificate.
  tls.server_name.clear();
  std::string by_name = "https://localhost:" + std::to_string(st.port());
  EXPECT_TRUE(MakeClient(Kind::kSocket, by_name, tls)->Get(kNodes, "", "n").ok());
  // Garbage CA data fails every HTTPS exchange with a clear reason, never a crash.
  tls.ca_pem = "not a certificate";
  Status garbage = MakeClient(Kind::kSocket, base, tls)->Get(kNodes, "", "n").status();
  EXPECT_EQ(garbage.code(), StatusCode::kFailedPrecondition) << garbage.ToString();
  EXPECT_NE(garbage.message().find("no PEM certificate"), std::string::npos);
}

TEST(SocketTransportTest, ProxyVariablesSelectCurl) {
  struct Env {
    const char* name;
    std::string saved;
    bool had;
  };
  std::vector<Env> saved;
  for (const char* n : {"http_proxy", "https_proxy", "HTTPS_PROXY", "all_proxy", "ALL_PROXY",
                        "no_proxy", "NO_PROXY"}) {
    const char* v = std::getenv(n);
    saved.push_back({n, v ? v : "", v != nullptr});
    ::unsetenv(n);
  }
  EXPECT_FALSE(ProxyConfiguredFor("https://10.0.0.1:6443"));
  ::setenv("https_proxy", "http://proxy:3128", 1);
  EXPECT_TRUE(ProxyConfiguredFor("https://10.0.0.1:6443"));
  EXPECT_FALSE(ProxyConfiguredFor("http://10.0.0.1:8080"));  // http:// reads http_proxy
  ::setenv("no_proxy", "example.com, .svc", 1);
  EXPECT_FALSE(ProxyConfiguredFor("https://kubernetes.default.svc"));
  EXPECT_FALSE(ProxyConfiguredFor("https://api.example.com:6443"));
  EXPECT_TRUE(ProxyConfiguredFor("https://notexample.com"));
  ::setenv("no_proxy", "*", 1);
  EXPECT_FALSE(ProxyConfiguredFor("https://anything"));
  for (const Env& e : saved) {
    if (e.had) {
      ::setenv(e.name, e.saved.c_str(), 1);
    } else {
      ::unsetenv(e.name);
    }
  }
}

}  // namespace
}  // namespace hami::k8s
