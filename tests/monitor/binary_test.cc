// hami-monitor started the way a DaemonSet starts it, with bad input: it exits 1 with one line
// naming what is wrong (never a crash, never a silent default).
#include <gtest/gtest.h>

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
  };
  for (const Case& c : cases) {
    ProcessResult r = RunMonitor(c.args, c.env);
    EXPECT_NE(r.exit_code, 0) << c.says;
    EXPECT_LT(r.exit_code, 128) << "killed by a signal: " << r.err;
    std::string all = r.out + r.err;
    EXPECT_NE(all.find(c.says), std::string::npos) << all;
  }
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
