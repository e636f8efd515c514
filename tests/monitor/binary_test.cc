// hami-monitor started the way a DaemonSet starts it, with bad input: it exits 1 with one line
// naming what is wrong (never a crash, never a silent default).
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "common/subprocess.h"

namespace hami {
namespace {

ProcessResult RunMonitor(std::vector<std::string> args, std::vector<std::string> env) {
  args.insert(args.begin(), HAMI_MONITOR_BIN);
  env.push_back("PATH=/usr/bin:/bin");
  return RunProcess(args, env);
}

// A kubeconfig that loads but names an API server nobody answers at.
void WriteUnreachableKubeconfig(const std::string& path) {
  std::ofstream(path) << "apiVersion: v1\nkind: Config\nclusters:\n- name: c\n  cluster:\n"
                         "    server: http://127.0.0.1:1\nusers:\n- name: u\n  user: {}\n"
                         "contexts:\n- name: x\n  context: {cluster: c, user: u}\n"
                         "current-context: x\n";
}

TEST(MonitorBinary, BadInputExitsWithAReason) {
  struct Case {
    std::vector<std::string> args, env;
    std::string says;
  } cases[] = {
      {{}, {"NODE_NAME=n"}, "HOOK_PATH"},
      {{}, {"HOOK_PATH=/tmp"}, "NODE_NAME"},
      {{"--update-interval=soon"}, {"HOOK_PATH=/tmp", "NODE_NAME=n"}, "--update-interval"},
      {{}, {"HOOK_PATH=/tmp", "NODE_NAME=n", "HAMI_RESYNC_INTERVAL=-3"}, "resync interval"},
      {{"--kubeconfig=/nonexistent/kc"}, {"HOOK_PATH=/tmp", "NODE_NAME=n"}, "/nonexistent/kc"},
      {{"--metrics-bind-address=localhost"},
       {"HOOK_PATH=/tmp", "NODE_NAME=n", "KUBECONFIG=/nonexistent"},
       "--metrics-bind-address"},
      {{"--no-such-flag"}, {"HOOK_PATH=/tmp", "NODE_NAME=n"}, "no-such-flag"},
      {{"--hook-path-wait=0s"},
       {"HOOK_PATH=/nonexistent/vgpu", "NODE_NAME=n"},
       "/nonexistent/vgpu is not a directory"},
      {{"--hook-path-wait=soon"}, {"HOOK_PATH=/tmp", "NODE_NAME=n"}, "--hook-path-wait"},
  };
  for (const Case& c : cases) {
    ProcessResult r = RunMonitor(c.args, c.env);
    EXPECT_NE(r.exit_code, 0) << c.says;
    EXPECT_LT(r.exit_code, 128) << "killed by a signal: " << r.err;
    std::string all = r.out + r.err;
    EXPECT_NE(all.find(c.says), std::string::npos) << all;
  }
}

// A metrics port already taken: exit 1 naming it (it once died in std::terminate, its update
// thread still running).
TEST(MonitorBinary, ATakenPortExitsWithTheReason) {
  char tmpl[] = "/tmp/hami-monitor-bin-XXXXXX";
  ASSERT_NE(mkdtemp(tmpl), nullptr);
  const std::string dir = tmpl;
  WriteUnreachableKubeconfig(dir + "/kc");
  int taken = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ASSERT_EQ(bind(taken, reinterpret_cast<sockaddr*>(&a), sizeof(a)), 0);
  ASSERT_EQ(listen(taken, 1), 0);
  socklen_t len = sizeof(a);
  ASSERT_EQ(getsockname(taken, reinterpret_cast<sockaddr*>(&a), &len), 0);
  ProcessResult r = RunMonitor(
      {"--metrics-bind-address=127.0.0.1:" + std::to_string(ntohs(a.sin_port))},
      {"HOOK_PATH=" + dir, "NODE_NAME=n", "KUBECONFIG=" + dir + "/kc"});
  close(taken);
  std::filesystem::remove_all(dir);
  EXPECT_EQ(r.exit_code, 1) << r.out << r.err;
  EXPECT_NE((r.out + r.err).find("metrics server"), std::string::npos) << r.out << r.err;
}

// /metrics keeps answering with 300 idle connections and 20 stalled requests held open (the API
// server is unreachable: the monitor serves what it has meanwhile).
TEST(MonitorBinary, MetricsAnswerWithHundredsOfIdleClients) {
  char tmpl[] = "/tmp/hami-monitor-bin-XXXXXX";
  ASSERT_NE(mkdtemp(tmpl), nullptr);
  const std::string dir = tmpl;
  WriteUnreachableKubeconfig(dir + "/kc");
  Subprocess monitor(
      {HAMI_MONITOR_BIN, "--metrics-bind-address=127.0.0.1:0"},
      {"PATH=/usr/bin:/bin", "HOOK_PATH=" + dir, "NODE_NAME=n", "KUBECONFIG=" + dir + "/kc"});
  std::string out = monitor.ReadUntil("metrics on ");
  size_t at = out.find("metrics on 127.0.0.1:");
  ASSERT_NE(at, std::string::npos) << out;
  int port = std::atoi(out.c_str() + at + 21);
  auto connect_to = [&] {
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_port = htons(static_cast<uint16_t>(port));
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    EXPECT_EQ(connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a)), 0);
    return fd;
  };
  std::vector<int> held;
  for (int i = 0; i < 300; ++i) held.push_back(connect_to());
  for (int i = 0; i < 20; ++i) {
    int fd = connect_to();
    const char partial[] = "GET /metrics HTTP/1.1\r\nHost: x\r\n";  // never finished
    EXPECT_GT(write(fd, partial, sizeof(partial) - 1), 0);
    held.push_back(fd);
  }
  auto start = std::chrono::steady_clock::now();
  int fd = connect_to();
  const char req[] = "GET /metrics HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n";
  ASSERT_GT(write(fd, req, sizeof(req) - 1), 0);
  std::string page;
  char buf[65536];
  struct timeval tv = {5, 0};
  setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
  for (ssize_t n; (n = read(fd, buf, sizeof(buf))) > 0;) page.append(buf, static_cast<size_t>(n));
  double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  close(fd);
  EXPECT_NE(page.find("HTTP/1.1 200"), std::string::npos) << page.substr(0, 200);
  EXPECT_NE(page.find("hami_build_info{"), std::string::npos);
  EXPECT_LT(seconds, 2.0) << "the scrape waited for a free worker";
  for (int h : held) close(h);
  monitor.Signal(SIGTERM);
  EXPECT_EQ(monitor.Wait().exit_code, 0);
  std::filesystem::remove_all(dir);
}

TEST(MonitorBinary, HelpNamesTheUpstreamFlags) {
  ProcessResult r = RunMonitor({"--help"}, {});
  EXPECT_EQ(r.exit_code, 0);
  for (const char* flag : {"--metrics-bind-address", "--legacy-metrics", "--hook-path"}) {
    EXPECT_NE(r.out.find(flag), std::string::npos) << r.out;
  }
}

}  // namespace
}  // namespace hami
