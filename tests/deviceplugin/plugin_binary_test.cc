// hami-device-plugin's start-up with bad input: every mistake an operator can make in its flags,
// environment or configuration files ends the process with exit status 1 and one line that
// names the input and what is wrong with it (the DaemonSet's pod then shows it in its log).
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "common/subprocess.h"

namespace {

class PluginBinaryTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/dp-bin-XXXXXX";
    ASSERT_NE(mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
    std::filesystem::create_directories(dir_ + "/dp");
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }

  std::string Write(const std::string& name, const std::string& text) {
    std::ofstream(dir_ + "/" + name) << text;
    return dir_ + "/" + name;
  }
  // Runs the plugin with a kubeconfig that points nowhere: every case must fail before the API
  // server matters, or because it does not answer.
  hami::ProcessResult Run(std::vector<std::string> args, bool node_name = true) {
    std::string kc = Write("kubeconfig",
                           "apiVersion: v1\nkind: Config\nclusters:\n- name: c\n  cluster:\n"
                           "    server: http://127.0.0.1:1\nusers:\n- name: u\n  user: {}\n"
                           "contexts:\n- name: x\n  context:\n    cluster: c\n    user: u\n"
                           "current-context: x\n");
    // Defaults, each replaced by a test argument of the same flag.
    std::vector<std::string> defaults = {
        "--kubeconfig=" + kc, "--device-plugin-path=" + dir_ + "/dp",
        "--hook-path=" + dir_ + "/hook", "--libvgpu=" + std::string(HAMI_LIBVGPU),
        "--node-config-file=" + dir_ + "/none.json"};
    std::vector<std::string> argv = {HAMI_PLUGIN};
    for (const std::string& d : defaults) {
      std::string flag = d.substr(0, d.find('=') + 1);
      bool replaced = false;
      for (const std::string& a : args) replaced |= a.rfind(flag, 0) == 0;
      if (!replaced) argv.push_back(d);
    }
    argv.insert(argv.end(), args.begin(), args.end());
    std::vector<std::string> env = {"LD_LIBRARY_PATH=" HAMI_SIM_DIR,
                                    "HAMI_SIM_STATE=" + dir_ + "/gpu-state"};
    if (node_name) env.push_back("NODE_NAME=node-a");
    return hami::RunProcess(argv, env);
  }
  std::string dir_;
};

TEST_F(PluginBinaryTest, NoNodeName) {
  hami::ProcessResult r = Run({}, false);
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.err.find("NODE_NAME"), std::string::npos) << r.err;
}

TEST_F(PluginBinaryTest, BrokenDeviceConfig) {
  std::string path = Write("device-config.yaml", "nvidia:\n  deviceSplitCount: [1, 2\n");
  hami::ProcessResult r = Run({"--config-file=" + path});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.err.find(path), std::string::npos) << r.err;

  path = Write("device-config.yaml", "nvidia:\n  deviceSplitCount: 0\n");
  r = Run({"--config-file=" + path});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.err.find("deviceSplitCount"), std::string::npos) << r.err;

  path = Write("device-config.yaml", "cambricon:\n  resourceCountName: x\n");
  r = Run({"--config-file=" + path});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.err.find("no nvidia: section"), std::string::npos) << r.err;

  r = Run({"--config-file=" + dir_ + "/missing.yaml"});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.err.find("missing.yaml"), std::string::npos) << r.err;
}

TEST_F(PluginBinaryTest, BrokenNodeConfig) {
  std::string path =
      Write("config.json", "{\"nodeconfig\": [{\"name\": \"node-a\", \"devicesplitcount\": -3}]}");
  hami::ProcessResult r = Run({"--node-config-file=" + path});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.err.find("devicesplitcount"), std::string::npos) << r.err;
  path = Write("config.json", "{not json");
  r = Run({"--node-config-file=" + path});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.err.find(path), std::string::npos) << r.err;
  // A MIG strategy that does not exist stops the plugin, naming the file and the value.
  path = Write("config.json",
               "{\"nodeconfig\": [{\"name\": \"node-a\", \"migstrategy\": \"dynamic\"}]}");
  r = Run({"--node-config-file=" + path});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.err.find(path + ": node node-a: mig strategy \"dynamic\""), std::string::npos)
      << r.err;
  r = Run({"--mig-strategy=dynamic"});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.err.find("--mig-strategy: mig strategy \"dynamic\""), std::string::npos) << r.err;
}

TEST_F(PluginBinaryTest, BadFlagsAndMissingPieces) {
  hami::ProcessResult r = Run({"--register-interval=soon"});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.err.find("--register-interval"), std::string::npos) << r.err;
  r = Run({"--nvml-library=libnvidia-ml-absent.so.1"});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.err.find("libnvidia-ml-absent.so.1"), std::string::npos) << r.err;
  r = Run({"--libvgpu=" + dir_ + "/no-libvgpu.so"});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.err.find("no-libvgpu.so"), std::string::npos) << r.err;
  r = Run({"--device-list-strategy=envvar,volume_mounts"});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.err.find("\"volume_mounts\""), std::string::npos) << r.err;
  r = Run({"--gds-enabled=maybe"});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.err.find("--gds-enabled \"maybe\""), std::string::npos) << r.err;
}

}  // namespace
