#include "net/http_server.h"

#include <arpa/inet.h>
#include <httplib.h>
#include <netinet/in.h>
#include <openssl/pem.h>
#include <openssl/ssl.h>
#include <openssl/x509.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <future>
#include <stdexcept>
#include <thread>
#include <vector>

#include "common/clock.h"
#include "common/file_util.h"
#include "gtest/gtest.h"
#include "net/tls.h"

namespace hami::net {
namespace {

class TempDir {
 public:
  TempDir() {
    std::string tmpl = (std::filesystem::temp_directory_path() / "hami_net_XXXXXX").string();
    path_ = ::mkdtemp(tmpl.data());
  }
  ~TempDir() { std::filesystem::remove_all(path_); }
  std::string File(const std::string& name) const { return path_ + "/" + name; }

 private:
  std::string path_;
};

std::unique_ptr<HttpServer> MakeServer(HttpServerOptions opts = {}) {
  opts.worker_threads = 8;
  opts.keep_alive_timeout = std::chrono::seconds(1);
  auto server = HttpServer::Create(std::move(opts));
  EXPECT_TRUE(server.ok()) << server.status().ToString();
  return std::move(server).value();
}

void WriteCert(const TempDir& dir, const std::string& cn) {
  auto pem = GenerateSelfSignedCertificate(cn, {"localhost"}, {"127.0.0.1"});
  ASSERT_TRUE(pem.ok()) << pem.status().ToString();
  ASSERT_TRUE(WriteFileAtomically(dir.File("tls.crt"), pem->cert_pem).ok());
  ASSERT_TRUE(WriteFileAtomically(dir.File("tls.key"), pem->key_pem).ok());
}

std::string ReadAll(const std::string& path) {
  FILE* f = std::fopen(path.c_str(), "rb");
  std::string out;
  char buf[4096];
  size_t n;
  while (f && (n = std::fread(buf, 1, sizeof buf, f)) > 0) out.append(buf, n);
  if (f) std::fclose(f);
  return out;
}

int Connect(int port) {
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(port));
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) {
    ::close(fd);
    return -1;
  }
  return fd;
}

// Sends raw bytes and returns the first line of the reply ("" if the server just closed).
std::string RawExchange(int port, const std::string& bytes) {
  int fd = Connect(port);
  if (fd < 0) return "connect failed";
  (void)::send(fd, bytes.data(), bytes.size(), MSG_NOSIGNAL);
  ::shutdown(fd, SHUT_WR);
  std::string reply;
  char buf[1024];
  ssize_t n;
  while ((n = ::recv(fd, buf, sizeof buf, 0)) > 0) reply.append(buf, static_cast<size_t>(n));
  ::close(fd);
  return reply.substr(0, reply.find("\r\n"));
}

// Handshakes with the server (no verification) and returns the peer certificate's CN; "" on a
// failed handshake. `max_version` 0 = library default.
std::string PeerCommonName(int port, int max_version = 0) {
  SSL_CTX* ctx = SSL_CTX_new(TLS_client_method());
  if (max_version) {
    SSL_CTX_set_min_proto_version(ctx, 0);
    SSL_CTX_set_max_proto_version(ctx, max_version);
    SSL_CTX_set_security_level(ctx, 0);
  }
  int fd = Connect(port);
  SSL* ssl = SSL_new(ctx);
  SSL_set_fd(ssl, fd);
  std::string cn;
  if (SSL_connect(ssl) == 1) {
    X509* peer = SSL_get1_peer_certificate(ssl);
    char buf[256] = {0};
    X509_NAME_get_text_by_NID(X509_get_subject_name(peer), NID_commonName, buf, sizeof buf);
    cn = buf;
    X509_free(peer);
    SSL_shutdown(ssl);
  }
  SSL_free(ssl);
  ::close(fd);
  SSL_CTX_free(ctx);
  return cn;
}

TEST(HttpServerTest, PlainRoundTripAndRouting) {
  auto server = MakeServer();
  server->Handle("POST", "/echo", [](const HttpRequest& req, HttpResponse& res) {
    res.SetJson(200, req.body + "|" + req.Param("q") + "|" + req.Header("x-test"));
  });
  server->HandlePrefix("GET", "/api/", [](const HttpRequest& req, HttpResponse& res) {
    res.SetText(200, "short:" + req.path);
  });
  server->HandlePrefix("GET", "/api/v1/", [](const HttpRequest& req, HttpResponse& res) {
    res.SetText(200, "long:" + req.path);
  });
  server->Handle("GET", "/throw",
                 [](const HttpRequest&, HttpResponse&) { throw std::runtime_error("boom"); });
  auto port = server->Start();
  ASSERT_TRUE(port.ok());
  ASSERT_GT(*port, 0);
  {
    httplib::Client cli("127.0.0.1", *port);
    auto r = cli.Post("/echo?q=1", httplib::Headers{{"X-Test", "hdr"}}, "hello", "text/plain");
    ASSERT_TRUE(r);
    EXPECT_EQ(r->status, 200);
    EXPECT_EQ(r->body, "hello|1|hdr");
    EXPECT_EQ(r->get_header_value("Content-Type"), "application/json");
    EXPECT_EQ(cli.Get("/api/v1/pods")->body, "long:/api/v1/pods");
    EXPECT_EQ(cli.Get("/api/other")->body, "short:/api/other");
    EXPECT_EQ(cli.Get("/nope")->status, 404);
    EXPECT_EQ(cli.Get("/echo")->status, 405);
    EXPECT_EQ(cli.Get("/throw")->status, 500);
    EXPECT_EQ(cli.Get("/healthz")->body, "ok");
    EXPECT_EQ(cli.Head("/healthz")->status, 200);
    // A very long path must not upset the router.
    EXPECT_EQ(cli.Get("/" + std::string(7000, 'a'))->status, 404);
  }
  server->Stop();
  server->Stop();  // idempotent
}

TEST(HttpServerTest, ReadinessAndMetrics) {
  auto server = MakeServer();
  std::atomic<bool> ready{false};
  server->AddReadinessCheck("informers", [&] { return ready.load(); });
  server->SetMetricsHandler([] { return std::string("hami_up 1\n"); });
  auto port = server->Start();
  ASSERT_TRUE(port.ok());
  httplib::Client cli("127.0.0.1", *port);
  auto r = cli.Get("/readyz");
  EXPECT_EQ(r->status, 503);
  EXPECT_NE(r->body.find("informers"), std::string::npos);
  ready = true;
  EXPECT_EQ(cli.Get("/readyz")->status, 200);
  r = cli.Get("/metrics");
  EXPECT_EQ(r->body, "hami_up 1\n");
  EXPECT_EQ(r->get_header_value("Content-Type"), "text/plain; version=0.0.4; charset=utf-8");
}

TEST(HttpServerTest, StreamingResponseIsChunked) {
  auto server = MakeServer();
  server->Handle("GET", "/stream", [](const HttpRequest&, HttpResponse& res) {
    res.content_type = "application/json";
    res.stream = [](ChunkWriter& w) {
      for (int i = 0; i < 3; ++i) {
        if (!w.Write("{\"n\":" + std::to_string(i) + "}\n")) return;
      }
    };
  });
  server->Handle("GET", "/plain", [](const HttpRequest&, HttpResponse& res) {
    res.SetJson(200, std::string(4096, ' ') + "{}");
  });
  auto port = server->Start();
  ASSERT_TRUE(port.ok());
  httplib::Client cli("127.0.0.1", *port);
  auto r = cli.Get("/stream");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->get_header_value("Transfer-Encoding"), "chunked");
  EXPECT_EQ(r->body, "{\"n\":0}\n{\"n\":1}\n{\"n\":2}\n");
  // Streams are never compressed (a deflate stream would hold chunks back); plain bodies may be.
  r = cli.Get("/stream", httplib::Headers{{"Accept-Encoding", "gzip, deflate"}});
  ASSERT_TRUE(r);
  EXPECT_EQ(r->get_header_value("Content-Encoding"), "");
  EXPECT_EQ(r->get_header_value("Content-Type"), "application/json");
  r = cli.Get("/plain", httplib::Headers{{"Accept-Encoding", "gzip, deflate"}});
  ASSERT_TRUE(r);
  EXPECT_EQ(r->get_header_value("Content-Encoding"), "gzip");
  EXPECT_EQ(r->body, std::string(4096, ' ') + "{}");  // the client inflated it
  // Small answers are not worth compressing.
  r = cli.Get("/healthz", httplib::Headers{{"Accept-Encoding", "gzip"}});
  ASSERT_TRUE(r);
  EXPECT_EQ(r->get_header_value("Content-Encoding"), "");
  EXPECT_EQ(r->body, "ok");
}

TEST(HttpServerTest, TryWriteHoldsWhatTheSocketCannotTakeAndDrainSendsItInOrder) {
  auto server = MakeServer();
  std::promise<int> written;  // how many TryWrites left something held
  std::string expected;
  constexpr int kChunks = 200;
  for (int i = 0; i < kChunks; ++i) expected += std::string(65536, static_cast<char>('a' + i % 26));
  expected += "end\n";
  server->Handle("GET", "/stream", [&](const HttpRequest&, HttpResponse& res) {
    res.stream = [&](ChunkWriter& w) {
      int held = 0;
      for (int i = 0; i < kChunks; ++i) {
        bool pending = false;
        if (!w.TryWrite(std::string(65536, static_cast<char>('a' + i % 26)), &pending)) break;
        held += pending ? 1 : 0;
      }
      written.set_value(held);  // the peer has not read anything yet
      if (w.Drain()) (void)w.Write("end\n");
    };
  });
  auto port = server->Start();
  ASSERT_TRUE(port.ok());
  int fd = Connect(*port);
  ASSERT_GE(fd, 0);
  std::string req = "GET /stream HTTP/1.1\r\nHost: x\r\n\r\n";
  ASSERT_EQ(::send(fd, req.data(), req.size(), MSG_NOSIGNAL), static_cast<ssize_t>(req.size()));
  // 12.5 MiB cannot fit in the socket buffers while nobody reads: TryWrite never blocked but held
  // the rest.
  EXPECT_GT(written.get_future().get(), 0);
  std::string in;
  char buf[65536];
  ssize_t n;
  while (in.find("\r\n0\r\n\r\n") == std::string::npos &&
         (n = ::recv(fd, buf, sizeof buf, 0)) > 0) {
    in.append(buf, static_cast<size_t>(n));
  }
  ::close(fd);
  // Undo the chunked framing: every byte arrived once, in order.
  size_t body_start = in.find("\r\n\r\n");
  ASSERT_NE(body_start, std::string::npos);
  std::string body;
  size_t at = body_start + 4;
  for (;;) {
    size_t eol = in.find("\r\n", at);
    ASSERT_NE(eol, std::string::npos);
    size_t size = std::stoul(in.substr(at, eol - at), nullptr, 16);
    if (size == 0) break;
    body += in.substr(eol + 2, size);
    at = eol + 2 + size + 2;
  }
  EXPECT_EQ(body.size(), expected.size());
  EXPECT_TRUE(body == expected);
}

// Reads from `fd` until `count` complete responses (each with a Content-Length) have arrived;
// returns their bodies ("!" + what was left when the peer closed early).
std::vector<std::string> ReadResponses(int fd, size_t count) {
  std::string in;
  std::vector<std::string> bodies;
  char buf[4096];
  while (bodies.size() < count) {
    size_t head_end = in.find("\r\n\r\n");
    if (head_end != std::string::npos) {
      std::string head = in.substr(0, head_end);
      size_t cl = head.find("Content-Length: ");
      size_t len = cl == std::string::npos ? 0 : std::stoul(head.substr(cl + 16));
      if (in.size() >= head_end + 4 + len) {
        if (head.rfind("HTTP/1.1 100", 0) == 0) {
          in.erase(0, head_end + 4);
          continue;
        }
        bodies.push_back(in.substr(head_end + 4, len));
        in.erase(0, head_end + 4 + len);
        continue;
      }
    }
    ssize_t n = ::recv(fd, buf, sizeof buf, 0);
    if (n <= 0) {
      bodies.push_back("!" + in);
      break;
    }
    in.append(buf, static_cast<size_t>(n));
  }
  return bodies;
}

TEST(HttpServerTest, PipelinedChunkedAndContinueRequests) {
  auto server = MakeServer();
  server->Handle("POST", "/len", [](const HttpRequest& req, HttpResponse& res) {
    res.SetText(200, std::to_string(req.body.size()) + ":" + req.body.substr(0, 8));
  });
  auto port = server->Start();
  ASSERT_TRUE(port.ok());
  int fd = Connect(*port);
  ASSERT_GE(fd, 0);
  // Three requests in one write: Content-Length, chunked, and a GET; answered in order.
  std::string reqs =
      "POST /len HTTP/1.1\r\nContent-Length: 5\r\n\r\nhello"
      "POST /len HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n2;x=y\r\nde\r\n0\r\n\r\n"
      "GET /healthz HTTP/1.1\r\n\r\n";
  ASSERT_EQ(::send(fd, reqs.data(), reqs.size(), MSG_NOSIGNAL), static_cast<ssize_t>(reqs.size()));
  EXPECT_EQ(ReadResponses(fd, 3), (std::vector<std::string>{"5:hello", "5:abcde", "ok"}));
  // Expect: 100-continue gets the interim answer before the body is sent.
  std::string head = "POST /len HTTP/1.1\r\nContent-Length: 3\r\nExpect: 100-continue\r\n\r\n";
  ASSERT_GT(::send(fd, head.data(), head.size(), MSG_NOSIGNAL), 0);
  char buf[64];
  ssize_t n = ::recv(fd, buf, sizeof buf, 0);
  ASSERT_GT(n, 0);
  EXPECT_EQ(std::string(buf, static_cast<size_t>(n)), "HTTP/1.1 100 Continue\r\n\r\n");
  ASSERT_EQ(::send(fd, "xyz", 3, MSG_NOSIGNAL), 3);
  EXPECT_EQ(ReadResponses(fd, 1), (std::vector<std::string>{"3:xyz"}));
  // HEAD: headers with the length, no body; the connection stays usable.
  std::string head_req = "HEAD /healthz HTTP/1.1\r\n\r\nGET /healthz HTTP/1.1\r\n\r\n";
  ASSERT_GT(::send(fd, head_req.data(), head_req.size(), MSG_NOSIGNAL), 0);
  std::string got;
  while (got.find("\r\n\r\nok") == std::string::npos) {
    n = ::recv(fd, buf, sizeof buf, 0);
    ASSERT_GT(n, 0);
    got.append(buf, static_cast<size_t>(n));
  }
  EXPECT_EQ(got.find("HTTP/1.1 200 OK"), 0u);
  EXPECT_NE(got.find("Content-Length: 2\r\n\r\nHTTP/1.1 200 OK"), std::string::npos) << got;
  ::close(fd);
}

TEST(HttpServerTest, ConnectionCloseHttp10AndOversizedHeads) {
  auto server = MakeServer();
  auto port = server->Start();
  ASSERT_TRUE(port.ok());
  // Connection: close and HTTP/1.0 get one answer, then the server closes.
  for (const char* req :
       {"GET /healthz HTTP/1.1\r\nConnection: close\r\n\r\n", "GET /healthz HTTP/1.0\r\n\r\n"}) {
    int fd = Connect(*port);
    ASSERT_GE(fd, 0);
    ASSERT_GT(::send(fd, req, std::strlen(req), MSG_NOSIGNAL), 0);
    std::vector<std::string> got = ReadResponses(fd, 2);
    ASSERT_EQ(got.size(), 2u) << req;
    EXPECT_EQ(got[0], "ok");
    EXPECT_EQ(got[1], "!");  // closed by the server
    ::close(fd);
  }
  EXPECT_EQ(RawExchange(*port, "GET / HTTP/1.1\r\nX: " + std::string(70000, 'a') + "\r\n\r\n"),
            "HTTP/1.1 431 Request Header Fields Too Large");
  EXPECT_EQ(RawExchange(*port, "GET / HTTP/1.1\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\n"),
            "HTTP/1.1 400 Bad Request");
  EXPECT_EQ(RawExchange(*port, "POST /x HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\nZZ\r\n"),
            "HTTP/1.1 400 Bad Request");
}

TEST(HttpServerTest, ADeferredAnswerFreesItsWorkerAndKeepsTheConnectionsOrder) {
  HttpServerOptions opts;
  opts.worker_threads = 1;  // a worker held by the deferred request would starve the others
  opts.keep_alive_timeout = std::chrono::seconds(5);
  auto server = HttpServer::Create(opts).value();
  std::promise<std::shared_ptr<Responder>> deferred;
  server->Handle("POST", "/later",
                 [&](const HttpRequest&, HttpResponse& res) { deferred.set_value(res.Defer()); });
  server->Handle("POST", "/now", [](const HttpRequest& req, HttpResponse& res) {
    res.SetText(200, "now:" + req.body);
  });
  auto port = server->Start();
  ASSERT_TRUE(port.ok());
  int fd = Connect(*port);
  ASSERT_GE(fd, 0);
  timeval patience{5, 0};  // an answer that never comes fails the test instead of hanging it
  ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &patience, sizeof patience);
  // A deferred request between two others pipelined on the same connection.
  std::string reqs =
      "POST /now HTTP/1.1\r\nContent-Length: 1\r\n\r\na"
      "POST /later HTTP/1.1\r\nContent-Length: 1\r\n\r\nx"
      "POST /now HTTP/1.1\r\nContent-Length: 1\r\n\r\ny";
  ASSERT_EQ(::send(fd, reqs.data(), reqs.size(), MSG_NOSIGNAL), static_cast<ssize_t>(reqs.size()));
  std::shared_ptr<Responder> responder = deferred.get_future().get();
  // The answer before the deferred one leaves without waiting for it.
  EXPECT_EQ(ReadResponses(fd, 1), (std::vector<std::string>{"now:a"}));
  // The only worker is free meanwhile: another connection is answered.
  EXPECT_EQ(RawExchange(*port, "POST /now HTTP/1.1\r\nContent-Length: 1\r\n\r\nz"),
            "HTTP/1.1 200 OK");
  std::thread sender([responder] {
    HttpResponse r;
    r.SetText(200, "later:x");
    responder->Send(std::move(r));
    responder->Send(HttpResponse());  // only the first answer counts
  });
  sender.join();
  // Answers in the order of the requests: the deferred one first.
  EXPECT_EQ(ReadResponses(fd, 2), (std::vector<std::string>{"later:x", "now:y"}));
  ::close(fd);
}

TEST(HttpServerTest, StopClosesConnectionsWaitingForADeferredAnswer) {
  auto server = MakeServer();
  std::promise<std::shared_ptr<Responder>> deferred;
  server->Handle("GET", "/never",
                 [&](const HttpRequest&, HttpResponse& res) { deferred.set_value(res.Defer()); });
  auto port = server->Start();
  ASSERT_TRUE(port.ok());
  int fd = Connect(*port);
  ASSERT_GE(fd, 0);
  std::string req = "GET /never HTTP/1.1\r\n\r\n";
  ASSERT_GT(::send(fd, req.data(), req.size(), MSG_NOSIGNAL), 0);
  std::shared_ptr<Responder> responder = deferred.get_future().get();
  server->Stop();
  char buf[64];
  EXPECT_EQ(::recv(fd, buf, sizeof buf, 0), 0);  // closed without an answer
  ::close(fd);
  HttpResponse late;
  late.SetText(200, "too late");
  responder->Send(late);  // reaches nothing
  server.reset();
  responder->Send(late);  // nor after the server is gone
}

TEST(HttpServerTest, InProcessServeWaitsForADeferredAnswer) {
  auto server = MakeServer();
  server->Handle("GET", "/later", [](const HttpRequest&, HttpResponse& res) {
    std::shared_ptr<Responder> r = res.Defer();
    std::thread([r] {
      HttpResponse out;
      out.SetText(202, "later");
      r->Send(std::move(out));
    }).detach();
  });
  HttpRequest req;
  req.method = "GET";
  req.path = "/later";
  HttpResponse res;
  server->Serve(req, res);
  EXPECT_EQ(res.status, 202);
  EXPECT_EQ(res.body, "later");
  EXPECT_EQ(res.deferred, nullptr);
}

TEST(HttpServerTest, StopWakesIdleKeepAliveConnections) {
  HttpServerOptions opts;
  opts.worker_threads = 2;
  auto made = HttpServer::Create(opts);
  ASSERT_TRUE(made.ok());
  std::unique_ptr<HttpServer> server = std::move(made).value();
  server->Handle("GET", "/x", [](const HttpRequest&, HttpResponse& res) { res.SetText(200, "x"); });
  auto port = server->Start();
  ASSERT_TRUE(port.ok());
  // Two idle keep-alive connections hold both workers (keep-alive timeout 5 s); Stop must not
  // wait for that timeout: ctest's limit would catch a hang.
  int a = Connect(*port), b = Connect(*port);
  ASSERT_GE(a, 0);
  ASSERT_GE(b, 0);
  std::string req = "GET /x HTTP/1.1\r\n\r\n";
  for (int fd : {a, b}) {
    ASSERT_GT(::send(fd, req.data(), req.size(), MSG_NOSIGNAL), 0);
    EXPECT_EQ(ReadResponses(fd, 1), (std::vector<std::string>{"x"}));
  }
  auto t0 = std::chrono::steady_clock::now();
  server->Stop();
  EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::seconds(4));
  EXPECT_EQ(ReadResponses(a, 1), (std::vector<std::string>{"!"}));
  ::close(a);
  ::close(b);
  // The server can be started again.
  port = server->Start();
  ASSERT_TRUE(port.ok());
  httplib::Client cli("127.0.0.1", *port);
  auto r = cli.Get("/x");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->body, "x");
}

TEST(HttpServerTest, MoreConnectionsThanWorkersAreServedInTurn) {
  HttpServerOptions opts;
  opts.worker_threads = 2;
  auto server = HttpServer::Create(opts).value();
  server->Handle("GET", "/x", [](const HttpRequest&, HttpResponse& res) { res.SetText(200, "x"); });
  auto port = server->Start();
  ASSERT_TRUE(port.ok());
  std::vector<std::thread> clients;
  std::atomic<int> ok{0};
  for (int i = 0; i < 6; ++i) {
    clients.emplace_back([&] {
      httplib::Client cli("127.0.0.1", *port);
      cli.set_keep_alive(false);
      for (int k = 0; k < 5; ++k) {
        auto r = cli.Get("/x");
        if (r && r->body == "x") ++ok;
      }
    });
  }
  for (std::thread& t : clients) t.join();
  EXPECT_EQ(ok.load(), 30);
}

TEST(HttpServerTest, RequestsBeyondTheWaitingQueueAreClosed) {
  HttpServerOptions opts;
  opts.worker_threads = 1;
  opts.listen_backlog = 1;
  auto server = HttpServer::Create(opts).value();
  std::promise<void> release;
  std::shared_future<void> released = release.get_future().share();
  std::promise<void> entered;
  server->Handle("GET", "/block", [&](const HttpRequest&, HttpResponse& res) {
    entered.set_value();
    released.wait();
    res.SetText(200, "b");
  });
  server->Handle("GET", "/x", [](const HttpRequest&, HttpResponse& res) { res.SetText(200, "x"); });
  auto port = server->Start();
  ASSERT_TRUE(port.ok());
  int a = Connect(*port);
  const std::string block = "GET /block HTTP/1.1\r\n\r\n", req = "GET /x HTTP/1.1\r\n\r\n";
  ASSERT_GT(::send(a, block.data(), block.size(), MSG_NOSIGNAL), 0);
  entered.get_future().wait();  // the only worker is in `a`'s handler
  int b = Connect(*port);       // a whole request: waits for the worker
  ASSERT_GT(::send(b, req.data(), req.size(), MSG_NOSIGNAL), 0);
  // `c` connects after `b` sent its request, so the reactor hands `b` over first: the queue (1)
  // is full and `c` is closed unanswered. (A receive timeout keeps a failure from hanging.)
  int c = Connect(*port);
  timeval tv{10, 0};
  ::setsockopt(c, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  (void)::send(c, req.data(), req.size(), MSG_NOSIGNAL);
  EXPECT_EQ(ReadResponses(c, 1), (std::vector<std::string>{"!"}));
  ::close(c);
  release.set_value();
  EXPECT_EQ(ReadResponses(a, 1), (std::vector<std::string>{"b"}));
  EXPECT_EQ(ReadResponses(b, 1), (std::vector<std::string>{"x"}));
  ::close(a);
  ::close(b);
}

// Waits (up to `limit`) for the server to close `fd`: true when it did (end of stream or a
// reset), false when the connection was still open at the limit.
bool ClosedByServerWithin(int fd, std::chrono::seconds limit) {
  timeval tv{static_cast<time_t>(limit.count()), 0};
  ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  char c;
  for (;;) {
    ssize_t n = ::recv(fd, &c, 1, 0);
    if (n == 0) return true;
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return errno == ECONNRESET;
    // Data (an error answer) before the close: keep reading.
  }
}

// A TLS client handshake on `fd` (no verification); false when it fails.
bool TlsHandshake(int fd, SSL_CTX* ctx, SSL** out) {
  SSL* ssl = SSL_new(ctx);
  SSL_set_fd(ssl, fd);
  if (SSL_connect(ssl) != 1) {
    SSL_free(ssl);
    return false;
  }
  *out = ssl;
  return true;
}

TEST(HttpServerTest, IdleAndStalledConnectionsCostNoWorker) {
  HttpServerOptions opts;
  opts.worker_threads = 2;
  opts.keep_alive_timeout = std::chrono::seconds(60);
  opts.read_timeout = std::chrono::seconds(60);
  auto server = HttpServer::Create(opts).value();
  server->Handle("POST", "/echo",
                 [](const HttpRequest& req, HttpResponse& res) { res.SetText(200, req.body); });
  auto port = server->Start();
  ASSERT_TRUE(port.ok());
  std::vector<int> held;
  for (int i = 0; i < 300; ++i) held.push_back(Connect(*port));  // idle
  for (int i = 0; i < 20; ++i) {                                 // half a head
    int fd = Connect(*port);
    (void)::send(fd, "GET /healthz HTTP/1.1\r\nHost: x", 30, MSG_NOSIGNAL);
    held.push_back(fd);
  }
  for (int i = 0; i < 20; ++i) {  // a head and part of its body
    int fd = Connect(*port);
    std::string part = "POST /echo HTTP/1.1\r\nContent-Length: 100\r\n\r\n0123456789";
    (void)::send(fd, part.data(), part.size(), MSG_NOSIGNAL);
    held.push_back(fd);
  }
  for (int fd : held) ASSERT_GE(fd, 0);
  // With the two workers tied to none of them, fresh requests are answered at once.
  EXPECT_EQ(RawExchange(*port, "GET /healthz HTTP/1.1\r\n\r\n"), "HTTP/1.1 200 OK");
  EXPECT_EQ(RawExchange(*port, "POST /echo HTTP/1.1\r\nContent-Length: 2\r\n\r\nhi"),
            "HTTP/1.1 200 OK");
  // The stalled ones are still served once they finish.
  std::string rest(90, 'x');
  ASSERT_GT(::send(held.back(), rest.data(), rest.size(), MSG_NOSIGNAL), 0);
  EXPECT_EQ(ReadResponses(held.back(), 1), (std::vector<std::string>{"0123456789" + rest}));
  ASSERT_GT(::send(held[300], "\r\n\r\n", 4, MSG_NOSIGNAL), 0);
  EXPECT_EQ(ReadResponses(held[300], 1), (std::vector<std::string>{"ok"}));
  for (int fd : held) ::close(fd);
}

TEST(HttpServerTest, StalledTlsHandshakesCostNoWorker) {
  auto pem = GenerateSelfSignedCertificate("tls-stall", {"localhost"}, {"127.0.0.1"}).value();
  HttpServerOptions opts;
  opts.worker_threads = 1;
  opts.certificate = CertificateSource::FromPem(pem).value();
  opts.handshake_timeout = std::chrono::seconds(60);
  opts.keep_alive_timeout = std::chrono::seconds(60);
  auto server = HttpServer::Create(opts).value();
  auto port = server->Start();
  ASSERT_TRUE(port.ok());
  std::vector<int> held;
  for (int i = 0; i < 20; ++i) held.push_back(Connect(*port));  // no ClientHello at all
  for (int i = 0; i < 20; ++i) {                                // the start of a record only
    int fd = Connect(*port);
    (void)::send(fd, "\x16\x03\x01\x02\x00\x01", 6, MSG_NOSIGNAL);
    held.push_back(fd);
  }
  SSL_CTX* ctx = SSL_CTX_new(TLS_client_method());
  std::vector<SSL*> idle;  // finished handshakes that never send a request
  for (int i = 0; i < 20; ++i) {
    int fd = Connect(*port);
    SSL* ssl = nullptr;
    ASSERT_TRUE(TlsHandshake(fd, ctx, &ssl));
    idle.push_back(ssl);
    held.push_back(fd);
  }
  EXPECT_EQ(PeerCommonName(*port), "tls-stall");
  // One of the idle TLS connections sends a request: answered too.
  const std::string req = "GET /healthz HTTP/1.1\r\n\r\n";
  ASSERT_EQ(SSL_write(idle[3], req.data(), static_cast<int>(req.size())),
            static_cast<int>(req.size()));
  char buf[512];
  int n = SSL_read(idle[3], buf, sizeof buf);
  ASSERT_GT(n, 0);
  EXPECT_EQ(std::string(buf, static_cast<size_t>(n)).substr(0, 15), "HTTP/1.1 200 OK");
  for (SSL* ssl : idle) SSL_free(ssl);
  SSL_CTX_free(ctx);
  for (int fd : held) ::close(fd);
}

// Whether the server still holds `fd` open at this moment (what it sent is read and dropped).
bool StillOpen(int fd) {
  char buf[4096];
  for (;;) {
    ssize_t n = ::recv(fd, buf, sizeof buf, MSG_DONTWAIT);
    if (n > 0 || (n < 0 && errno == EINTR)) continue;
    return n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK);
  }
}

// With the server's time in `clock`: `fd`, whose deadline of `timeout` started at the clock's
// present, is still open 1 ms before the deadline and closed by the server once the clock is
// past it by the reactor's resolution (100 ms).
void ExpectClosedAtDeadline(const HttpServer& server, FakeClock& clock, int fd,
                            std::chrono::milliseconds timeout) {
  clock.Advance(timeout - std::chrono::milliseconds(1));
  ASSERT_TRUE(server.SyncForTesting());
  EXPECT_TRUE(StillOpen(fd));
  clock.Advance(std::chrono::milliseconds(101));
  ASSERT_TRUE(server.SyncForTesting());
  EXPECT_TRUE(ClosedByServerWithin(fd, std::chrono::seconds(10)));
}

TEST(HttpServerTest, DeadlinesCloseSlowConnections) {
  auto pem = GenerateSelfSignedCertificate("deadlines", {"localhost"}, {"127.0.0.1"}).value();
  for (bool tls : {false, true}) {
    SCOPED_TRACE(tls ? "TLS" : "plain");
    // The deadlines run on this clock: the test moves time, nothing waits for it. Each sync
    // below makes the reactor take in what the test just did before time moves on (bytes sent
    // over loopback are in the server's socket when send returns).
    FakeClock clock;
    constexpr std::chrono::seconds kTimeout(1);
    HttpServerOptions opts;
    if (tls) opts.certificate = CertificateSource::FromPem(pem).value();
    opts.handshake_timeout = kTimeout;
    opts.read_timeout = kTimeout;
    opts.keep_alive_timeout = kTimeout;
    opts.clock = &clock;
    auto server = HttpServer::Create(opts).value();
    server->Handle("POST", "/len", [](const HttpRequest& req, HttpResponse& res) {
      res.SetText(200, std::to_string(req.body.size()));
    });
    auto port = server->Start();
    ASSERT_TRUE(port.ok());
    SSL_CTX* ctx = SSL_CTX_new(TLS_client_method());
    // A connection that does not talk: closed by the handshake deadline (TLS) or the idle one.
    int quiet = Connect(*port);
    ASSERT_TRUE(server->SyncForTesting(1));  // accepted: its deadline runs from the present
    ExpectClosedAtDeadline(*server, clock, quiet, kTimeout);
    ::close(quiet);
    // A head that never ends, and a body with a gap longer than the read timeout.
    for (const std::string& bytes :
         {std::string("GET /healthz HTTP/1.1\r\nHost: x"),
          std::string("POST /len HTTP/1.1\r\nContent-Length: 10\r\n\r\n12")}) {
      int fd = Connect(*port);
      ASSERT_TRUE(server->SyncForTesting(1));
      SSL* ssl = nullptr;
      if (tls) {
        ASSERT_TRUE(TlsHandshake(fd, ctx, &ssl));
        ASSERT_EQ(SSL_write(ssl, bytes.data(), static_cast<int>(bytes.size())),
                  static_cast<int>(bytes.size()));
      } else {
        ASSERT_GT(::send(fd, bytes.data(), bytes.size(), MSG_NOSIGNAL), 0);
      }
      ASSERT_TRUE(server->SyncForTesting());  // the bytes are read: the read deadline runs
      ExpectClosedAtDeadline(*server, clock, fd, kTimeout);
      if (ssl) SSL_free(ssl);
      ::close(fd);
    }
    SSL_CTX_free(ctx);
    if (tls) continue;
    // A body that keeps moving is not cut off, however long it takes in all: each gap stays
    // under the read timeout, 2.4 s pass in all.
    int fd = Connect(*port);
    ASSERT_TRUE(server->SyncForTesting(1));
    std::string head = "POST /len HTTP/1.1\r\nContent-Length: 6\r\n\r\n";
    ASSERT_GT(::send(fd, head.data(), head.size(), MSG_NOSIGNAL), 0);
    ASSERT_TRUE(server->SyncForTesting());
    for (int i = 0; i < 6; ++i) {
      clock.Advance(std::chrono::milliseconds(400));
      ASSERT_TRUE(server->SyncForTesting());  // the deadlines are checked at the new time
      ASSERT_GT(::send(fd, "x", 1, MSG_NOSIGNAL), 0);
      ASSERT_TRUE(server->SyncForTesting());
    }
    EXPECT_EQ(ReadResponses(fd, 1), (std::vector<std::string>{"6"}));
    ::close(fd);
  }
}

TEST(HttpServerTest, ConnectionCapsCloseTheLeastRecentlyActive) {
  for (bool per_address : {false, true}) {
    SCOPED_TRACE(per_address ? "per address" : "in all");
    HttpServerOptions opts;
    opts.keep_alive_timeout = std::chrono::seconds(60);
    opts.keep_alive_linger = std::chrono::milliseconds(0);  // answered connections wait at once
    (per_address ? opts.max_connections_per_address : opts.max_connections) = 4;
    auto server = HttpServer::Create(opts).value();
    auto port = server->Start();
    ASSERT_TRUE(port.ok());
    const std::string req = "GET /healthz HTTP/1.1\r\n\r\n";
    std::vector<int> conns;
    for (int i = 0; i < 4; ++i) {  // each answered once, so the order of activity is known
      int fd = Connect(*port);
      ASSERT_GT(::send(fd, req.data(), req.size(), MSG_NOSIGNAL), 0);
      ASSERT_EQ(ReadResponses(fd, 1), (std::vector<std::string>{"ok"}));
      conns.push_back(fd);
    }
    // The first becomes the most recently active.
    ASSERT_GT(::send(conns[0], req.data(), req.size(), MSG_NOSIGNAL), 0);
    ASSERT_EQ(ReadResponses(conns[0], 1), (std::vector<std::string>{"ok"}));
    // A client has its answer a moment before the worker gives the connection back; only
    // connections the server holds between requests can be closed for a newcomer. Wait until
    // all four are back (on a loaded machine a worker may be descheduled in between).
    ASSERT_TRUE(server->SyncForTesting(4));
    ASSERT_EQ(server->WaitingConnections(), 4u);
    // A fifth connection is admitted; the least recently active (the second) is closed.
    int fifth = Connect(*port);
    ASSERT_GT(::send(fifth, req.data(), req.size(), MSG_NOSIGNAL), 0);
    EXPECT_EQ(ReadResponses(fifth, 1), (std::vector<std::string>{"ok"}));
    EXPECT_TRUE(ClosedByServerWithin(conns[1], std::chrono::seconds(10)));
    ASSERT_GT(::send(conns[0], req.data(), req.size(), MSG_NOSIGNAL), 0);
    EXPECT_EQ(ReadResponses(conns[0], 1), (std::vector<std::string>{"ok"}));
    for (int fd : conns) ::close(fd);
    ::close(fifth);
  }
}

TEST(HttpServerTest, ServeConnectionForTestingOverSocketPair) {
  auto server = MakeServer();
  server->Handle("POST", "/len", [](const HttpRequest& req, HttpResponse& res) {
    res.SetText(200, std::to_string(req.body.size()));
  });
  int sv[2];
  ASSERT_EQ(::socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
  std::string req = "POST /len HTTP/1.1\r\nContent-Length: 4\r\n\r\nabcd";
  ASSERT_GT(::send(sv[1], req.data(), req.size(), MSG_NOSIGNAL), 0);
  ::shutdown(sv[1], SHUT_WR);
  server->ServeConnectionForTesting(sv[0]);
  ::close(sv[0]);
  EXPECT_EQ(ReadResponses(sv[1], 2), (std::vector<std::string>{"4", "!"}));
  ::close(sv[1]);
}

TEST(HttpServerTest, BadInputGets4xxAndServerKeepsRunning) {
  HttpServerOptions opts;
  opts.max_body_bytes = 1024;
  auto server = MakeServer(opts);
  server->Handle("POST", "/in", [](const HttpRequest& req, HttpResponse& res) {
    res.SetText(200, std::to_string(req.body.size()));
  });
  auto port = server->Start();
  ASSERT_TRUE(port.ok());
  {
    httplib::Client cli("127.0.0.1", *port);
    auto r = cli.Post("/in", std::string(4096, 'x'), "application/octet-stream");
    ASSERT_TRUE(r);
    EXPECT_EQ(r->status, 413);
  }
  // A malformed request line is answered with a 4xx or the connection is simply closed.
  std::string reply = RawExchange(*port, "GARBAGE\r\n\r\n");
  EXPECT_TRUE(reply.empty() || reply.find(" 4") != std::string::npos) << reply;
  // httplib reads an unparsable Content-Length as 0; whatever it answers, it is not a 5xx.
  reply = RawExchange(*port, "POST /in HTTP/1.1\r\nContent-Length: zz\r\n\r\nabc");
  EXPECT_EQ(reply.find(" 5"), std::string::npos) << reply;
  reply = RawExchange(*port, "POST /in HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\nZZ\r\n");
  EXPECT_EQ(reply.find(" 5"), std::string::npos) << reply;
  (void)RawExchange(*port, std::string(100000, '\x01'));
  httplib::Client cli("127.0.0.1", *port);
  auto r = cli.Post("/in", "abc", "text/plain");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->body, "3");
}

TEST(HttpServerTest, SecondServerOnSamePortFails) {
  auto first = MakeServer();
  auto port = first->Start();
  ASSERT_TRUE(port.ok());
  HttpServerOptions opts;
  opts.port = *port;
  auto second = MakeServer(opts);
  EXPECT_FALSE(second->Start().ok());
}

TEST(HttpServerTest, TlsRoundTripWithVerification) {
  TempDir dir;
  WriteCert(dir, "server-a");
  HttpServerOptions opts;
  opts.tls = TlsOptions{dir.File("tls.crt"), dir.File("tls.key")};
  auto server = MakeServer(opts);
  server->Handle("GET", "/hello",
                 [](const HttpRequest&, HttpResponse& res) { res.SetText(200, "secure"); });
  auto port = server->Start();
  ASSERT_TRUE(port.ok());
  EXPECT_TRUE(server->tls());

  httplib::SSLClient cli("127.0.0.1", *port);
  std::string ca = ReadAll(dir.File("tls.crt"));
  BIO* bio = BIO_new_mem_buf(ca.data(), static_cast<int>(ca.size()));
  X509* ca_cert = PEM_read_bio_X509(bio, nullptr, nullptr, nullptr);
  BIO_free(bio);
  X509_STORE* store = X509_STORE_new();
  X509_STORE_add_cert(store, ca_cert);
  X509_free(ca_cert);
  cli.set_ca_cert_store(store);  // the client takes ownership
  cli.enable_server_certificate_verification(true);
  auto r = cli.Get("/hello");
  ASSERT_TRUE(r) << httplib::to_string(r.error());
  EXPECT_EQ(r->body, "secure");

  // TLS 1.1 and older are refused.
  EXPECT_EQ(PeerCommonName(*port, TLS1_1_VERSION), "");
  EXPECT_EQ(PeerCommonName(*port), "server-a");
  // Plain HTTP on a TLS port does not take the server down.
  (void)RawExchange(*port, "GET / HTTP/1.1\r\n\r\n");
  EXPECT_EQ(PeerCommonName(*port), "server-a");
}

TEST(HttpServerTest, TlsCertificateReloadWithoutRestart) {
  TempDir dir;
  WriteCert(dir, "before-rotation");
  HttpServerOptions opts;
  opts.tls = TlsOptions{dir.File("tls.crt"), dir.File("tls.key")};
  auto server = MakeServer(opts);
  auto port = server->Start();
  ASSERT_TRUE(port.ok());
  EXPECT_EQ(PeerCommonName(*port), "before-rotation");
  WriteCert(dir, "after-rotation");
  EXPECT_EQ(PeerCommonName(*port), "after-rotation");
  EXPECT_EQ(server->certificate()->generation(), 2);

  // A broken rotation keeps the last good pair.
  ASSERT_TRUE(WriteFileAtomically(dir.File("tls.crt"), "not a certificate").ok());
  EXPECT_EQ(PeerCommonName(*port), "after-rotation");
  EXPECT_FALSE(server->certificate()->ReloadIfChanged().ok() &&
               server->certificate()->generation() != 2);
}

TEST(HttpServerTest, CreateFailsOnMissingCertificate) {
  HttpServerOptions opts;
  opts.tls = TlsOptions{"/nonexistent/tls.crt", "/nonexistent/tls.key"};
  EXPECT_FALSE(HttpServer::Create(opts).ok());
}

}  // namespace
}  // namespace hami::net
