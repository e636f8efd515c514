// The API client (both production transports) and an informer against an API server that
// misbehaves on the wire: 429 with Retry-After, 5xx with and without it, answers reset in the
// middle of their body, answers that never come, watch streams reset mid-event, 410 Gone, and a
// watch that goes silent. What the rest of the system relies on:
//   - a request the server did not process (429, 5xx with Retry-After) is repeated after the
//     delay the server asked for; a write whose answer was lost is never repeated by the
//     client, and its error says the outcome is unknown (the scheduler keeps such a pod's
//     devices reserved); an idempotent read is repeated;
//   - an informer lives through list errors, resets, Gone and silence, and converges on the
//     server's state after each (it relists, it never stalls).
// The server is a raw socket server (one request per connection, one thread per connection) so
// that each fault is exactly what the test asks for.
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <condition_variable>
#include <functional>
#include <map>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "k8s/api_error.h"
#include "k8s/curl_transport.h"
#include "k8s/informer.h"
#include "k8s/object.h"
#include "k8s/rest_client.h"
#include "k8s/socket_transport.h"

namespace hami::k8s {
namespace {

using std::chrono::milliseconds;
using std::chrono::seconds;

struct Request {
  std::string method, target, body;
  int index = 0;  // the server's request count before this one
};

// What the server does with one request: write to the socket (and optionally not return until
// the peer is gone). The connection is closed (or reset) afterwards.
class Wire {
 public:
  Wire(int fd, const std::atomic<bool>& stopping) : fd_(fd), stopping_(stopping) {}
  void Send(const std::string& bytes) {
    (void)::send(fd_, bytes.data(), bytes.size(), MSG_NOSIGNAL);
  }
  // A complete answer with Connection: close.
  void Reply(int status, const std::string& body, const std::string& extra_headers = "") {
    Send("HTTP/1.1 " + std::to_string(status) + " X\r\nContent-Type: application/json\r\n" +
         "Content-Length: " + std::to_string(body.size()) + "\r\nConnection: close\r\n" +
         extra_headers + "\r\n" + body);
  }
  // The head and part of the body, then a reset (RST, not FIN).
  void ResetMidBody(int status, const std::string& body) {
    Send("HTTP/1.1 " + std::to_string(status) + " X\r\nContent-Type: application/json\r\n" +
         "Content-Length: " + std::to_string(body.size()) + "\r\n\r\n" +
         body.substr(0, body.size() / 2));
    Reset();
  }
  void Reset() {
    linger l{1, 0};
    ::setsockopt(fd_, SOL_SOCKET, SO_LINGER, &l, sizeof l);
    ::shutdown(fd_, SHUT_RDWR);
    reset_ = true;
  }
  // A chunked watch answer's head, events as chunks.
  void StartStream() {
    Send("HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n");
  }
  void Event(const std::string& type, const std::string& name, int rv) {
    std::string line = R"({"type":")" + type + R"(","object":{"metadata":{"name":")" + name +
                       R"(","namespace":"ns","resourceVersion":")" + std::to_string(rv) + "\"}}}\n";
    char size[16];
    std::snprintf(size, sizeof size, "%zx\r\n", line.size());
    Send(size + line + "\r\n");
  }
  void EndStream() { Send("0\r\n\r\n"); }
  // Sends nothing more until the client goes away (or the server stops).
  void Silence() {
    char buf[256];
    while (!stopping_.load()) {
      pollfd p{fd_, POLLIN, 0};
      if (::poll(&p, 1, 50) > 0 && ::recv(fd_, buf, sizeof buf, 0) <= 0) return;
    }
  }
  bool reset() const { return reset_; }

 private:
  int fd_;
  const std::atomic<bool>& stopping_;
  bool reset_ = false;
};

class ScriptedServer {
 public:
  using Handler = std::function<void(const Request&, Wire&)>;
  explicit ScriptedServer(Handler handler) : handler_(std::move(handler)) {
    fd_ = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    EXPECT_EQ(::bind(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof addr), 0);
    EXPECT_EQ(::listen(fd_, 64), 0);
    socklen_t len = sizeof addr;
    ::getsockname(fd_, reinterpret_cast<sockaddr*>(&addr), &len);
    port_ = ntohs(addr.sin_port);
    acceptor_ = std::thread([this] { Accept(); });
  }
  ~ScriptedServer() {
    stopping_ = true;
    ::shutdown(fd_, SHUT_RDWR);
    acceptor_.join();
    std::vector<std::thread> threads;
    {
      std::lock_guard<std::mutex> l(mu_);
      threads.swap(threads_);
    }
    for (std::thread& t : threads) t.join();
    ::close(fd_);
  }
  std::string url() const { return "http://127.0.0.1:" + std::to_string(port_); }
  // "METHOD target" of every request so far, in arrival order.
  std::vector<std::string> seen() const {
    std::lock_guard<std::mutex> l(mu_);
    return seen_;
  }

 private:
  void Accept() {
    for (;;) {
      int c = ::accept4(fd_, nullptr, nullptr, SOCK_CLOEXEC);
      if (c < 0) return;
      std::lock_guard<std::mutex> l(mu_);
      threads_.emplace_back([this, c] { Serve(c); });
    }
  }
  void Serve(int c) {
    std::string in;
    char buf[4096];
    size_t end;
    while ((end = in.find("\r\n\r\n")) == std::string::npos) {
      ssize_t n = ::recv(c, buf, sizeof buf, 0);
      if (n <= 0) return (void)::close(c);
      in.append(buf, static_cast<size_t>(n));
    }
    Request req;
    size_t sp1 = in.find(' '), sp2 = in.find(' ', sp1 + 1);
    req.method = in.substr(0, sp1);
    req.target = in.substr(sp1 + 1, sp2 - sp1 - 1);
    size_t want = 0;
    for (const char* h : {"Content-Length: ", "content-length: "}) {
      if (size_t p = in.find(h); p != std::string::npos) want = std::stoul(in.substr(p + 16));
    }
    while (in.size() < end + 4 + want) {
      ssize_t n = ::recv(c, buf, sizeof buf, 0);
      if (n <= 0) break;
      in.append(buf, static_cast<size_t>(n));
    }
    req.body = in.substr(end + 4);
    {
      std::lock_guard<std::mutex> l(mu_);
      req.index = static_cast<int>(seen_.size());
      seen_.push_back(req.method + " " + req.target);
    }
    Wire wire(c, stopping_);
    handler_(req, wire);
    if (!wire.reset()) ::shutdown(c, SHUT_WR);
    ::close(c);
  }

  Handler handler_;
  int fd_ = -1;
  int port_ = 0;
  std::atomic<bool> stopping_{false};
  std::thread acceptor_;
  mutable std::mutex mu_;
  std::vector<std::string> seen_;     // guarded by mu_
  std::vector<std::thread> threads_;  // guarded by mu_
};

enum class Kind { kSocket, kCurl };

class MisbehavingServerTest : public ::testing::TestWithParam<Kind> {
 protected:
  // Retries on a fake clock (its sleeps are recorded, not waited); requests time out after
  // `timeout` of real time.
  std::unique_ptr<RestClient> Client(const std::string& url, milliseconds timeout = seconds(5)) {
    RestConfig cfg;
    cfg.server = url;
    cfg.timeout = timeout;
    cfg.qps = 0;  // no rate-limiter sleeps among the recorded ones
    std::unique_ptr<Transport> transport;
    if (GetParam() == Kind::kCurl) {
      transport = CurlTransport::Create({}).value();
    } else {
      transport = SocketTransport::Create({}).value();
    }
    RetryPolicy retry;
    retry.max_attempts = 4;
    return std::make_unique<RestClient>(cfg, std::move(transport), clock_, retry);
  }
  FakeClock clock_;
};

const char kPod[] = R"({"metadata":{"name":"p","namespace":"ns","resourceVersion":"7"}})";

TEST_P(MisbehavingServerTest, RequestsTheServerRefusedAreRepeatedAfterTheDelayItAskedFor) {
  ScriptedServer server([](const Request& r, Wire& w) {
    switch (r.index) {
      case 0:
        return w.Reply(429, R"({"reason":"TooManyRequests"})", "Retry-After: 3\r\n");
      case 1:
        return w.Reply(503, R"({"reason":"ServiceUnavailable"})");
      default:
        return w.Reply(200, kPod);
    }
  });
  auto client = Client(server.url());
  Result<Object> pod = client->Get(kPods, "ns", "p");
  ASSERT_TRUE(pod.ok()) << pod.status().ToString();
  EXPECT_EQ(ResourceVersion(*pod), "7");
  EXPECT_EQ(server.seen().size(), 3u);
  // Retry-After as asked, then the backoff's second step (it counts every attempt).
  std::vector<Duration> expected = {seconds(3), milliseconds(200)};
  EXPECT_EQ(clock_.sleeps(), expected);
}

TEST_P(MisbehavingServerTest, AWriteIsRepeatedOnlyWhenTheServerDidNotProcessIt) {
  ScriptedServer server([](const Request& r, Wire& w) {
    if (r.target.find("/a/") != std::string::npos) {  // 503 asking for a retry, then created
      return r.index == 0 ? w.Reply(503, "{}", "Retry-After: 1\r\n") : w.Reply(201, kPod);
    }
    if (r.target.find("/b/") != std::string::npos) return w.Reply(500, R"({"message":"boom"})");
    return w.ResetMidBody(201, kPod);  // /c/: applied, answer lost
  });
  auto client = Client(server.url());
  Object binding = {{"metadata", {{"name", "p"}}}, {"target", {{"name", "n1"}}}};
  EXPECT_TRUE(client->Create(kPods, "a", binding, "binding").ok());
  // A 500 without Retry-After may have been applied: not repeated.
  Status b = client->Create(kPods, "b", binding, "binding").status();
  EXPECT_EQ(b.code(), StatusCode::kUnavailable) << b.ToString();
  // Reset in the middle of the answer: not repeated, and not mistaken for "never sent".
  Status c = client->Create(kPods, "c", binding, "binding").status();
  EXPECT_EQ(c.code(), StatusCode::kUnknown) << c.ToString();
  std::vector<std::string> seen = server.seen();
  std::map<std::string, int> per_ns;
  for (const std::string& s : seen) per_ns[s.substr(s.find("namespaces/") + 11, 1)]++;
  EXPECT_EQ(per_ns["a"], 2);
  EXPECT_EQ(per_ns["b"], 1);
  EXPECT_EQ(per_ns["c"], 1) << "a write whose answer was lost must not be sent twice";
}

TEST_P(MisbehavingServerTest, AReadIsRepeatedAfterAResetAndAnAnswerThatNeverCame) {
  ScriptedServer server([](const Request& r, Wire& w) {
    switch (r.index) {
      case 0:
        return w.ResetMidBody(200, kPod);
      case 1:
        return w.Silence();  // until the client's deadline closes it
      default:
        return w.Reply(200, kPod);
    }
  });
  auto client = Client(server.url(), milliseconds(1000));
  Result<Object> pod = client->Get(kPods, "ns", "p");
  ASSERT_TRUE(pod.ok()) << pod.status().ToString();
  EXPECT_EQ(server.seen().size(), 3u);

  // The same silence for a write: DeadlineExceeded (outcome unknown), sent once.
  ScriptedServer silent([](const Request&, Wire& w) { w.Silence(); });
  auto writer = Client(silent.url(), milliseconds(1000));
  Status s = writer->PatchAck(kPods, "ns", "p", PatchType::kMerge, "{}").status();
  EXPECT_EQ(s.code(), StatusCode::kDeadlineExceeded) << s.ToString();
  EXPECT_EQ(silent.seen().size(), 1u);
}

// An informer through a server that fails in every way in turn, then behaves. It must end with
// exactly the server's final set of pods.
TEST_P(MisbehavingServerTest, AnInformerRelistsThroughErrorsResetsGoneAndSilence) {
  std::atomic<int> lists{0}, watches{0};
  ScriptedServer server([&](const Request& r, Wire& w) {
    auto item = [](const std::string& name, int rv) {
      return R"({"metadata":{"name":")" + name + R"(","namespace":"ns","resourceVersion":")" +
             std::to_string(rv) + "\"}}";
    };
    if (r.target.find("watch=") == std::string::npos) {
      switch (lists++) {
        case 0:
          return w.Reply(500, R"({"message":"etcd leader changed"})");
        case 1:
          return w.ResetMidBody(
              200, R"({"metadata":{"resourceVersion":"10"},"items":[)" + item("a", 5) + "]}");
        case 2:
          return w.Reply(200,
                         R"({"metadata":{"resourceVersion":"10"},"items":[)" + item("a", 5) + "]}");
        default:  // after Gone: b was added and a deleted meanwhile
          return w.Reply(200, R"({"metadata":{"resourceVersion":"20"},"items":[)" + item("b", 11) +
                                  "," + item("c", 15) + "]}");
      }
    }
    switch (watches++) {
      case 0:  // an event, then reset in the middle of the next one
        w.StartStream();
        w.Event("ADDED", "b", 11);
        w.Send("40\r\n{\"type\":\"DELE");
        return w.Reset();
      case 1:  // resumed from 11: too old now
        return w.Reply(410, R"({"kind":"Status","reason":"Expired","code":410})");
      case 2:  // after the relist: one event, then silence (no bytes, no close)
        w.StartStream();
        w.Event("ADDED", "d", 21);
        return w.Silence();
      default:  // resumed from 21: a normal stream
        w.StartStream();
        w.Event("ADDED", "e", 22);
        return w.Silence();
    }
  });
  auto client = Client(server.url());
  InformerOptions opts;
  opts.ns = "ns";
  opts.watch_timeout = seconds(1);  // the silent watch is given up 1 s + 2 s of grace later
  Informer informer(*client, kPods, opts);
  std::mutex mu;
  std::condition_variable changed;
  std::set<std::string> names;  // guarded by mu: what the handlers were told
  InformerHandler h;
  h.on_add = [&](const ObjectPtr& o) {
    std::lock_guard<std::mutex> l(mu);
    names.insert(Name(*o));
    changed.notify_all();
  };
  h.on_update = [&](const ObjectPtr&, const ObjectPtr& o) { h.on_add(o); };
  h.on_delete = [&](const ObjectPtr& o) {
    std::lock_guard<std::mutex> l(mu);
    names.erase(Name(*o));
    changed.notify_all();
  };
  informer.AddEventHandler(h);
  informer.Start();
  const std::set<std::string> want = {"b", "c", "d", "e"};
  {
    std::unique_lock<std::mutex> l(mu);
    changed.wait_for(l, seconds(30), [&] { return names == want; });
  }
  informer.Stop();
  std::set<std::string> cached;
  for (const ObjectPtr& o : informer.List()) cached.insert(Name(*o));
  EXPECT_EQ(cached, want);
  std::lock_guard<std::mutex> l(mu);
  EXPECT_EQ(names, want) << "the handlers were told a different story than the cache holds";
  EXPECT_EQ(lists.load(), 4) << "list errors and Gone each cost exactly one more list";
  EXPECT_GE(watches.load(), 4);
  // Resumed watches ask for the last version seen: 11 after the reset, 21 after the silence.
  std::vector<std::string> seen = server.seen();
  std::vector<std::string> resumed;
  for (const std::string& s : seen) {
    if (s.find("watch=") == std::string::npos) continue;
    size_t p = s.find("resourceVersion=");
    resumed.push_back(s.substr(p + 16, s.find('&', p) - p - 16));
  }
  ASSERT_GE(resumed.size(), 4u);
  EXPECT_EQ(resumed[0], "10");
  EXPECT_EQ(resumed[1], "11");
  EXPECT_EQ(resumed[2], "20");
  EXPECT_EQ(resumed[3], "21");
}

std::string KindName(const ::testing::TestParamInfo<Kind>& p) {
  return p.param == Kind::kSocket ? "Socket" : "Curl";
}

INSTANTIATE_TEST_SUITE_P(Transports, MisbehavingServerTest,
                         ::testing::Values(Kind::kSocket, Kind::kCurl), KindName);

}  // namespace
}  // namespace hami::k8s
