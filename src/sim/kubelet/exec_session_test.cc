#include "sim/kubelet/exec_session.h"

#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>

#include <chrono>
#include <condition_variable>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "common/thread_annotations.h"
#include "net/http_server.h"
#include "net/websocket.h"
#include "net/websocket_test_util.h"

namespace hami::sim {
namespace {

using nlohmann::json;
using net::testing::WsTestClient;

// An HTTP server whose /exec runs the session as the kubelet does, in a scratch directory.
class ExecSessionTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::filesystem::temp_directory_path() /
           ("exec-session-" + std::to_string(::getpid()) + "-" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    std::filesystem::create_directories(dir_);
    server_ = net::HttpServer::Create(net::HttpServerOptions{}).value();
    server_->Handle("GET", "/exec", [this](const net::HttpRequest& req, net::HttpResponse& res) {
      Result<ExecRequest> r = ParseExecRequest(req);
      if (!r.ok()) return res.SetText(400, r.status().message());
      std::string protocol = ChooseExecProtocol(net::ws::OfferedProtocols(req));
      if (protocol.empty()) return res.SetText(400, "no protocol");
      ExecProcess p{r->command, {"PATH=/usr/bin:/bin", "MARK=container-env"}, dir_.string()};
      res.status = 101;
      res.headers = {{"Upgrade", "websocket"},
                     {"Sec-WebSocket-Accept", net::ws::AcceptKey(req.Header("Sec-WebSocket-Key"))},
                     {"Sec-WebSocket-Protocol", protocol}};
      res.upgrade = [this, r = *r, p, protocol](net::UpgradedConnection& conn) {
        RunExecSession(conn, protocol, r, p);
        {
          MutexLock lock(mu_);
          ++sessions_ended_;
        }
        session_ended_.notify_all();
      };
    });
    port_ = server_->Start().value();
  }
  void TearDown() override {
    server_->Stop();
    std::filesystem::remove_all(dir_);
  }
  static std::string Query(const std::vector<std::string>& command, const std::string& flags) {
    std::string q = "/exec?" + flags;
    for (const std::string& c : command) {
      q += "&command=";
      for (unsigned char ch : c) {
        char hex[4];
        std::snprintf(hex, sizeof hex, "%%%02X", ch);
        q += hex;
      }
    }
    return q;
  }

  // Waits until `n` sessions have returned from RunExecSession (whose contract is that the
  // process it started is then gone, reaped); false once `timeout` passes first.
  bool WaitSessionsEnded(int n, std::chrono::milliseconds timeout) {
    UniqueLock lock(mu_);
    return session_ended_.wait_for(lock.native(), timeout,
                                   [&]() REQUIRES(mu_) { return sessions_ended_ >= n; });
  }

  std::filesystem::path dir_;
  std::unique_ptr<net::HttpServer> server_;
  int port_ = 0;
  Mutex mu_;
  std::condition_variable session_ended_;
  int sessions_ended_ GUARDED_BY(mu_) = 0;
};

json StatusOf(const std::map<int, std::string>& ch) {
  auto it = ch.find(3);
  return it == ch.end() ? json() : json::parse(it->second, nullptr, false);
}

TEST_F(ExecSessionTest, RelaysTheStreamsAndReportsTheExitCode) {
  WsTestClient c;
  ASSERT_EQ(c.Connect(port_,
                      Query({"sh", "-c", "echo out; echo err >&2; read x; echo \"got $x $MARK\";"
                                         " pwd; exit 3"},
                            "stdin=true&stdout=true&stderr=true"),
                      "v5.channel.k8s.io, v4.channel.k8s.io"),
            101);
  ASSERT_TRUE(c.SendChannel(0, "hi\n"));
  ASSERT_TRUE(c.Send(net::ws::kBinary, std::string("\xff\x00", 2)));  // v5: stdin closed
  bool closed = false;
  auto ch = c.ReadChannelsUntilClose(std::chrono::seconds(20), &closed);
  EXPECT_TRUE(closed) << "the session ends with a normal close";
  EXPECT_EQ(ch[1], "out\ngot hi container-env\n" + std::filesystem::canonical(dir_).string() +
                       "\n");
  EXPECT_EQ(ch[2], "err\n");
  json s = StatusOf(ch);
  EXPECT_EQ(s.value("status", ""), "Failure") << ch[3];
  EXPECT_EQ(s.value("reason", ""), "NonZeroExitCode");
  EXPECT_EQ(s["details"]["causes"][0].value("reason", ""), "ExitCode");
  EXPECT_EQ(s["details"]["causes"][0].value("message", ""), "3");
}

TEST_F(ExecSessionTest, StdinClosedEndsACat) {
  WsTestClient c;
  ASSERT_EQ(c.Connect(port_, Query({"cat"}, "stdin=1&stdout=1"), "v5.channel.k8s.io"), 101);
  std::string big(300000, 'z');  // more than a pipe holds: the session must not block on it
  ASSERT_TRUE(c.SendChannel(0, big));
  ASSERT_TRUE(c.Send(net::ws::kBinary, std::string("\xff\x00", 2)));
  auto ch = c.ReadChannelsUntilClose(std::chrono::seconds(20));
  EXPECT_EQ(ch[1].size(), big.size());
  EXPECT_EQ(StatusOf(ch).value("status", ""), "Success") << ch[3];
}

TEST_F(ExecSessionTest, V4WithoutStdinSucceeds) {
  WsTestClient c;
  std::string head;
  ASSERT_EQ(c.Connect(port_, Query({"echo", "v4"}, "stdout=true"), "v4.channel.k8s.io", &head),
            101);
  EXPECT_NE(head.find("Sec-WebSocket-Protocol: v4.channel.k8s.io"), std::string::npos) << head;
  auto ch = c.ReadChannelsUntilClose(std::chrono::seconds(20));
  EXPECT_EQ(ch[1], "v4\n");
  EXPECT_EQ(StatusOf(ch).value("status", ""), "Success");
}

TEST_F(ExecSessionTest, ATerminalGetsItsSizeAndMergesStderr) {
  WsTestClient c;
  ASSERT_EQ(c.Connect(port_, Query({"sh", "-c", "read x; stty size; echo e >&2; tty"},
                                   "stdin=true&stdout=true&stderr=true&tty=true"),
                      "v5.channel.k8s.io"),
            101);
  ASSERT_TRUE(c.SendChannel(4, R"({"Width":100,"Height":40})"));
  ASSERT_TRUE(c.SendChannel(0, "go\n"));
  auto ch = c.ReadChannelsUntilClose(std::chrono::seconds(20));
  EXPECT_NE(ch[1].find("40 100"), std::string::npos) << ch[1];
  EXPECT_NE(ch[1].find("e\r\n"), std::string::npos) << ch[1];
  EXPECT_NE(ch[1].find("/dev/pts/"), std::string::npos) << ch[1];
  EXPECT_EQ(ch.count(2), 0u);
  EXPECT_EQ(StatusOf(ch).value("status", ""), "Success") << ch[3];
}

TEST_F(ExecSessionTest, AMissingProgramIsAFailureWithTheRuntimesWords) {
  WsTestClient c;
  ASSERT_EQ(c.Connect(port_, Query({"no-such-program-here"}, "stdout=true"), "v5.channel.k8s.io"),
            101);
  auto ch = c.ReadChannelsUntilClose(std::chrono::seconds(20));
  json s = StatusOf(ch);
  EXPECT_EQ(s.value("status", ""), "Failure");
  EXPECT_EQ(s.value("message", ""),
            "exec: \"no-such-program-here\": executable file not found in $PATH");
}

TEST_F(ExecSessionTest, AClientThatGoesAwayTakesItsProcessWithIt) {
  std::string pidfile = (dir_ / "pid").string();
  pid_t pid = 0;
  {
    WsTestClient c;
    ASSERT_EQ(c.Connect(port_, Query({"sh", "-c", "echo $$ > " + pidfile + "; echo started;"
                                                  " exec sleep 1000"},
                                     "stdout=true"),
                        "v5.channel.k8s.io"),
              101);
    // Waits for the process to say it started (its pid is then in the file).
    std::string out;
    auto until = std::chrono::steady_clock::now() + std::chrono::seconds(20);
    while (out.find("started") == std::string::npos && std::chrono::steady_clock::now() < until) {
      out += c.ReadChannelsUntilClose(std::chrono::milliseconds(100))[1];
    }
    std::ifstream in(pidfile);
    in >> pid;
    ASSERT_GT(pid, 0);
    EXPECT_EQ(::kill(pid, 0), 0);
  }  // the client's socket closes here
  // The session notices the close, kills the process group and reaps it before it returns.
  ASSERT_TRUE(WaitSessionsEnded(1, std::chrono::seconds(20))) << "the session outlived its client";
  EXPECT_NE(::kill(pid, 0), 0) << "the exec'd process outlived its client";
}

TEST(ExecRequest, ParsesKubeletsQuery) {
  net::HttpRequest req;
  req.params = {{"command", "nvidia-smi"}, {"command", "-L"}, {"output", "1"},
                {"stderr", "true"}, {"tty", "false"}};
  Result<ExecRequest> r = ParseExecRequest(req);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->command, (std::vector<std::string>{"nvidia-smi", "-L"}));
  EXPECT_TRUE(r->out);
  EXPECT_TRUE(r->err);
  EXPECT_FALSE(r->in);
  EXPECT_FALSE(r->tty);
  net::HttpRequest none;
  none.params = {{"stdout", "true"}};
  EXPECT_EQ(ParseExecRequest(none).status().code(), StatusCode::kInvalidArgument);
  net::HttpRequest mute;
  mute.params = {{"command", "ls"}};
  EXPECT_EQ(ParseExecRequest(mute).status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(ChooseExecProtocol({"channel.k8s.io", "v4.channel.k8s.io", "v5.channel.k8s.io"}),
            "v4.channel.k8s.io");
  EXPECT_EQ(ChooseExecProtocol({"base64.channel.k8s.io"}), "");
}

TEST(ExecStatus, ExitCodesAndSignals) {
  EXPECT_EQ(json::parse(ExitStatusJson(0)).value("status", ""), "Success");
  json killed = json::parse(ExitStatusJson(SIGKILL));  // a wait status for "killed by 9"
  EXPECT_EQ(killed["details"]["causes"][0].value("message", ""), "137");
}

}  // namespace
}  // namespace hami::sim
