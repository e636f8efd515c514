#include "sim/node/sim_runtime_hook.h"

#include <gtest/gtest.h>

#include <climits>

#include <nlohmann/json.hpp>

namespace hami::sim {
namespace {

SimRuntimeConfig Config() {
  SimRuntimeConfig c;
  c.lib_dir = "/b/sim";
  c.gpu_config = "/w/node/gpu.conf";
  c.gpu_state = "/w/node/gpu-state";
  c.nvidia_smi = "/b/bin/hamictl";
  return c;
}

std::string Spec(const std::vector<std::string>& env) {
  nlohmann::json s = {{"ociVersion", "1.0.2"},
                      {"process", {{"args", {"sh"}}, {"env", env}}},
                      {"mounts", {{{"destination", "/proc"}, {"type", "proc"}}}}};
  return s.dump();
}

TEST(SimRuntimeConfigTest, ReadsKeysAndRefusesWhatItDoesNotKnow) {
  auto c = ParseSimRuntimeConfig(
      "# the node's driver\nlib_dir = /b/sim\ngpu_config=/w/gpu.conf\n"
      "gpu_state = /w/state  # shared\nrunc = /usr/bin/runc\n");
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_EQ(c->lib_dir, "/b/sim");
  EXPECT_EQ(c->gpu_state, "/w/state");
  EXPECT_EQ(c->runc, "/usr/bin/runc");
  EXPECT_EQ(c->nvidia_smi, "");

  auto unknown = ParseSimRuntimeConfig("lib_dir=/a\ngpu_config=/b\ngpu_state=/c\ncolour = red\n");
  ASSERT_FALSE(unknown.ok());
  EXPECT_NE(unknown.status().message().find("line 4: unknown key 'colour'"), std::string::npos);
  auto no_eq = ParseSimRuntimeConfig("lib_dir /a\n");
  ASSERT_FALSE(no_eq.ok());
  EXPECT_NE(no_eq.status().message().find("line 1"), std::string::npos);
  auto relative = ParseSimRuntimeConfig("lib_dir=sim\ngpu_config=/b\ngpu_state=/c\n");
  ASSERT_FALSE(relative.ok());
  EXPECT_NE(relative.status().message().find("lib_dir must be an absolute path"),
            std::string::npos);
  EXPECT_FALSE(ParseSimRuntimeConfig("lib_dir=/a\ngpu_config=/b\n").ok()) << "no gpu_state";
}

TEST(SimRuntimeHookTest, FindsTheBundleOfACreateOnly) {
  EXPECT_EQ(CreateBundle({"--root", "/run/r", "--log", "/x/log.json", "--log-format", "json",
                          "create", "--bundle", "/b/1", "--pid-file", "/b/1/pid", "c1"}),
            std::optional<std::string>("/b/1"));
  EXPECT_EQ(CreateBundle({"--systemd-cgroup", "run", "-b", "/b/2", "c2"}),
            std::optional<std::string>("/b/2"));
  EXPECT_EQ(CreateBundle({"create", "--bundle=/b/3", "c3"}), std::optional<std::string>("/b/3"));
  EXPECT_EQ(CreateBundle({"create", "c4"}), std::optional<std::string>("."));
  EXPECT_EQ(CreateBundle({"--root", "create", "start", "c5"}), std::nullopt)
      << "'create' as the value of --root is not the command";
  EXPECT_EQ(CreateBundle({"--root", "/r", "delete", "--force", "c6"}), std::nullopt);
  EXPECT_EQ(CreateBundle({"state", "c7"}), std::nullopt);
  EXPECT_EQ(CreateBundle({}), std::nullopt);
}

TEST(SimRuntimeHookTest, AGpuContainerGetsTheDriverTheStateAndTheHostsProcfs) {
  auto out = AddSimulatedDriver(
      Spec({"PATH=/bin", "NVIDIA_VISIBLE_DEVICES=GPU-1", "HAMI_SIM_STATE=/elsewhere"}), Config());
  ASSERT_TRUE(out.ok()) << out.status().ToString();
  ASSERT_TRUE(out->has_value());
  nlohmann::json s = nlohmann::json::parse(**out);
  std::map<std::string, nlohmann::json> by_dest;
  for (const auto& m : s["mounts"]) by_dest[m["destination"]] = m;
  ASSERT_TRUE(by_dest.count("/proc")) << "the container's own mounts stay";
  EXPECT_EQ(by_dest["/usr/lib/x86_64-linux-gnu/libcuda.so.1"]["source"], "/b/sim/libcuda.so.1");
  EXPECT_EQ(by_dest["/usr/lib/x86_64-linux-gnu/libnvidia-ml.so.1"]["source"],
            "/b/sim/libnvidia-ml.so.1");
  EXPECT_EQ(by_dest["/w/node/gpu-state"]["source"], "/w/node/gpu-state");
  EXPECT_EQ(by_dest[kHostProcMount]["source"], "/proc");
  EXPECT_EQ(by_dest["/usr/bin/nvidia-smi"]["source"], "/b/bin/hamictl");
  const auto ro = [&](const std::string& d) {
    for (const auto& o : by_dest[d]["options"]) {
      if (o == "ro") return true;
    }
    return false;
  };
  EXPECT_TRUE(ro(kHostProcMount));
  EXPECT_TRUE(ro("/usr/lib/x86_64-linux-gnu/libcuda.so.1"));
  EXPECT_FALSE(ro("/w/node/gpu-state")) << "every container's driver writes the shared state";
  std::vector<std::string> env = s["process"]["env"];
  EXPECT_EQ(env, (std::vector<std::string>{"PATH=/bin", "NVIDIA_VISIBLE_DEVICES=GPU-1",
                                           "HAMI_SIM_STATE=/w/node/gpu-state",
                                           "HAMI_SIM_CONFIG=/w/node/gpu.conf",
                                           std::string("HAMI_SIM_HOST_PROC=") + kHostProcMount}));
}

TEST(SimRuntimeHookTest, AContainerWithoutGpusIsLeftAlone) {
  for (const auto& env : std::vector<std::vector<std::string>>{
           {"PATH=/bin"}, {"NVIDIA_VISIBLE_DEVICES="}, {"NVIDIA_VISIBLE_DEVICES=void"}}) {
    auto out = AddSimulatedDriver(Spec(env), Config());
    ASSERT_TRUE(out.ok());
    EXPECT_FALSE(out->has_value()) << env.back();
  }
  auto no_process = AddSimulatedDriver(R"({"ociVersion":"1.0.2"})", Config());
  ASSERT_TRUE(no_process.ok());
  EXPECT_FALSE(no_process->has_value());
  // `none`: no GPU, but the driver (as the NVIDIA runtime does: nvidia-smi works, sees nothing).
  auto none = AddSimulatedDriver(Spec({"NVIDIA_VISIBLE_DEVICES=none"}), Config());
  ASSERT_TRUE(none.ok());
  EXPECT_TRUE(none->has_value());
}

TEST(SimRuntimeHookTest, ABrokenSpecIsRefusedWithTheReason) {
  for (const char* bad : {"", "[1,2]", "{\"process\":{\"env\":\"PATH=/bin\"}}",
                          "{\"process\":{\"env\":[1]}}", "{not json"}) {
    auto out = AddSimulatedDriver(bad, Config());
    EXPECT_FALSE(out.ok()) << bad;
    EXPECT_EQ(out.status().code(), StatusCode::kInvalidArgument) << bad;
  }
  auto mounts = AddSimulatedDriver(
      R"({"process":{"env":["NVIDIA_VISIBLE_DEVICES=all"]},"mounts":{}})", Config());
  ASSERT_FALSE(mounts.ok());
  EXPECT_NE(mounts.status().message().find("mounts"), std::string::npos);
}

}  // namespace
}  // namespace hami::sim

namespace hami::sim {
namespace {

TEST(SimRuntimeHookTest, OomScoresBelowTheFloorAreRaisedToIt) {
  auto sandbox = RaiseOomScoreAdj(R"({"process":{"args":["/pause"],"oomScoreAdj":-998}})", 0);
  ASSERT_TRUE(sandbox.ok());
  ASSERT_TRUE(sandbox->has_value());
  EXPECT_EQ(nlohmann::json::parse(**sandbox)["process"]["oomScoreAdj"], 0);
  auto best_effort = RaiseOomScoreAdj(R"({"process":{"oomScoreAdj":1000}})", 0);
  ASSERT_TRUE(best_effort.ok());
  EXPECT_FALSE(best_effort->has_value()) << "a score above the floor stays";
  auto allowed = RaiseOomScoreAdj(R"({"process":{"oomScoreAdj":-998}})", INT_MIN);
  ASSERT_TRUE(allowed.ok());
  EXPECT_FALSE(allowed->has_value()) << "a kernel that allows it keeps the kubelet's score";
  auto none = RaiseOomScoreAdj(R"({"process":{"args":["sh"]}})", 0);
  ASSERT_TRUE(none.ok());
  EXPECT_FALSE(none->has_value());
  EXPECT_FALSE(RaiseOomScoreAdj(R"({"process":{"oomScoreAdj":"low"}})", 0).ok());
  EXPECT_FALSE(RaiseOomScoreAdj("[]", 0).ok());
  EXPECT_EQ(SpecOomScoreAdj(R"({"process":{"oomScoreAdj":-998}})"), std::optional<int>(-998));
  EXPECT_EQ(SpecOomScoreAdj(R"({"process":{}})"), std::nullopt);
  EXPECT_EQ(SpecOomScoreAdj("not json"), std::nullopt);
}

}  // namespace
}  // namespace hami::sim

namespace hami::sim {
namespace {

TEST(SimRuntimeHookTest, AnExecInAGpuContainerGetsTheDriversEnvironmentAgain) {
  EXPECT_EQ(ExecProcessFile({"--root", "/r", "--log", "/l", "exec", "--process", "/t/p.json",
                             "--detach", "--pid-file", "/t/pid", "c1"}),
            std::optional<std::string>("/t/p.json"));
  EXPECT_EQ(ExecProcessFile({"exec", "--process=/t/q.json", "c1"}),
            std::optional<std::string>("/t/q.json"));
  EXPECT_EQ(ExecProcessFile({"exec", "c1", "ls"}), std::nullopt) << "no process file";
  EXPECT_EQ(ExecProcessFile({"create", "--bundle", "/b", "c1"}), std::nullopt);

  auto gpu = ProcessWithDriverEnv(
      R"({"args":["nvidia-smi"],"env":["PATH=/bin","NVIDIA_VISIBLE_DEVICES=GPU-1"]})", Config());
  ASSERT_TRUE(gpu.ok()) << gpu.status().ToString();
  ASSERT_TRUE(gpu->has_value());
  std::vector<std::string> env = nlohmann::json::parse(**gpu)["env"];
  EXPECT_EQ(env, (std::vector<std::string>{"PATH=/bin", "NVIDIA_VISIBLE_DEVICES=GPU-1",
                                           "HAMI_SIM_CONFIG=/w/node/gpu.conf",
                                           "HAMI_SIM_STATE=/w/node/gpu-state",
                                           std::string("HAMI_SIM_HOST_PROC=") + kHostProcMount}));
  auto plain = ProcessWithDriverEnv(R"({"args":["ls"],"env":["PATH=/bin"]})", Config());
  ASSERT_TRUE(plain.ok());
  EXPECT_FALSE(plain->has_value());
  EXPECT_FALSE(ProcessWithDriverEnv(R"({"env":"PATH=/bin"})", Config()).ok());
  EXPECT_FALSE(ProcessWithDriverEnv("", Config()).ok());
}

}  // namespace
}  // namespace hami::sim
