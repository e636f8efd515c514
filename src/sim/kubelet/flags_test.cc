#include "sim/kubelet/flags.h"

#include <gtest/gtest.h>
#include <stdlib.h>
#include <sys/stat.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <string>
#include <vector>

namespace hami::sim {
namespace {

// A bin directory of its own per test: hamictl and vgpu_probe are looked for there.
class KubeletFlagsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/hami-kubelet-flags-XXXXXX";
    ASSERT_NE(mkdtemp(tmpl), nullptr);
    bin_ = std::filesystem::path(tmpl) / "bin";
    std::filesystem::create_directory(bin_);
  }
  void TearDown() override { std::filesystem::remove_all(bin_.parent_path()); }

  std::string Touch(const std::string& name, bool executable) {
    const std::string path = (bin_ / name).string();
    std::ofstream(path) << "#!/bin/sh\n";
    chmod(path.c_str(), executable ? 0755 : 0644);
    return path;
  }
  KubeletFlags Given() {
    KubeletFlags f = DefaultKubeletFlags(bin_);
    f.node_name = "node-a";
    return f;
  }
  KubeletHost Host() {
    return {.bin_dir = bin_, .path = "/opt/bin:/usr/bin", .sanitizer_preload = ""};
  }

  std::filesystem::path bin_;
};

TEST_F(KubeletFlagsTest, DefaultsGiveANodeWithoutProgramsBesideTheBinary) {
  Result<KubeletOptions> o = KubeletOptionsFromFlags(Given(), Host());
  ASSERT_TRUE(o.ok()) << o.status().ToString();
  EXPECT_EQ(o->node_name, "node-a");
  EXPECT_EQ(o->root_dir, "/tmp/hami-sim-kubelet/node-a");
  EXPECT_EQ(o->address, "127.0.0.1");
  EXPECT_EQ(o->heartbeat, std::chrono::seconds(10));
  EXPECT_EQ(o->capacity, KubeletOptions().capacity);
  const std::string sim = (bin_.parent_path() / "sim").string();
  EXPECT_EQ(o->node_env, (std::vector<std::string>{"PATH=/opt/bin:/usr/bin", "HOME=/tmp",
                                                   "LD_LIBRARY_PATH=" + sim}));
  EXPECT_EQ(o->nvidia_smi, "");
  EXPECT_TRUE(o->stand_in.empty());
  EXPECT_FALSE(o->pid_namespaces);
  EXPECT_FALSE(o->stand_in_for_gpu_containers);
}

TEST_F(KubeletFlagsTest, TheContainersEnvironmentComesInItsOrder) {
  KubeletFlags f = Given();
  f.sim_config = "/w/a.conf";
  f.sim_state = "/w/state";
  f.env = {"A=1", "B=x=y"};
  KubeletHost host = Host();
  host.path.reset();
  host.sanitizer_preload = "/lib/libasan.so.8";
  Result<KubeletOptions> o = KubeletOptionsFromFlags(f, host);
  ASSERT_TRUE(o.ok()) << o.status().ToString();
  EXPECT_EQ(o->node_env,
            (std::vector<std::string>{"PATH=/usr/local/bin:/usr/bin:/bin", "HOME=/tmp",
                                      "LD_LIBRARY_PATH=" + f.sim_lib_dir,
                                      "HAMI_SIM_CONFIG=/w/a.conf", "HAMI_SIM_STATE=/w/state",
                                      "LD_PRELOAD=/lib/libasan.so.8",
                                      "ASAN_OPTIONS=detect_leaks=0:verify_asan_link_order=0",
                                      "A=1", "B=x=y"}));
}

TEST_F(KubeletFlagsTest, LabelsAndCapacityAreKeyValuesTheLastOneWinning) {
  KubeletFlags f = Given();
  f.labels = {"gpu=on", "zone=a", "gpu=off"};
  f.capacity = {"cpu=64", "nvidia.com/gpu=2"};
  f.heartbeat = "250ms";
  f.root_dir = "/w/node-a";
  f.pid_namespaces = true;
  Result<KubeletOptions> o = KubeletOptionsFromFlags(f, Host());
  ASSERT_TRUE(o.ok()) << o.status().ToString();
  EXPECT_EQ(o->labels, (std::map<std::string, std::string>{{"gpu", "off"}, {"zone", "a"}}));
  EXPECT_EQ(o->capacity.at("cpu"), "64");
  EXPECT_EQ(o->capacity.at("memory"), "256Gi");
  EXPECT_EQ(o->capacity.at("nvidia.com/gpu"), "2");
  EXPECT_EQ(o->heartbeat, std::chrono::milliseconds(250));
  EXPECT_EQ(o->root_dir, "/w/node-a");
  EXPECT_TRUE(o->pid_namespaces);
}

TEST_F(KubeletFlagsTest, EachMistakeIsNamedWithTheValueGiven) {
  struct Case {
    std::function<void(KubeletFlags&)> change;
    std::string message;
  } cases[] = {
      {[](KubeletFlags& f) { f.heartbeat = "0s"; }, "--heartbeat \"0s\": not a duration"},
      {[](KubeletFlags& f) { f.heartbeat = "soon"; }, "--heartbeat \"soon\": not a duration"},
      {[](KubeletFlags& f) { f.labels = {"gpu"}; }, "--label \"gpu\": expected k=v"},
      {[](KubeletFlags& f) { f.labels = {"=on"}; }, "--label \"=on\": expected k=v"},
      {[](KubeletFlags& f) { f.capacity = {"cpu"}; }, "--capacity \"cpu\": expected k=v"},
      {[](KubeletFlags& f) { f.env = {"A=1", "X"}; }, "--env \"X\": expected K=V"},
      {[](KubeletFlags& f) {
         f.nvidia_smi = "/nonexistent/smi";
         f.nvidia_smi_given = true;
       },
       "--nvidia-smi /nonexistent/smi: not an executable (give \"\" for none)"},
  };
  for (const Case& c : cases) {
    KubeletFlags f = Given();
    c.change(f);
    Result<KubeletOptions> o = KubeletOptionsFromFlags(f, Host());
    ASSERT_FALSE(o.ok()) << c.message;
    EXPECT_EQ(o.status().code(), StatusCode::kInvalidArgument);
    EXPECT_EQ(o.status().message(), c.message);
  }
}

TEST_F(KubeletFlagsTest, HamictlAndVgpuProbeBesideTheBinaryAreTheDefaults) {
  const std::string hamictl = Touch("hamictl", true);
  const std::string probe = Touch("vgpu_probe", false);  // found by existence alone
  Result<KubeletOptions> o = KubeletOptionsFromFlags(Given(), Host());
  ASSERT_TRUE(o.ok()) << o.status().ToString();
  EXPECT_EQ(o->nvidia_smi, hamictl);
  EXPECT_EQ(o->stand_in, (std::vector<std::string>{probe, "workload"}));

  KubeletFlags f = Given();
  f.nvidia_smi_given = true;  // --nvidia-smi ""
  f.stand_in = "  /bin/sleep   60 ";
  o = KubeletOptionsFromFlags(f, Host());
  ASSERT_TRUE(o.ok()) << o.status().ToString();
  EXPECT_EQ(o->nvidia_smi, "");
  EXPECT_EQ(o->stand_in, (std::vector<std::string>{"/bin/sleep", "60"}));
}

TEST_F(KubeletFlagsTest, AHamictlThatIsNotExecutableIsNoDefault) {
  Touch("hamictl", false);
  Result<KubeletOptions> o = KubeletOptionsFromFlags(Given(), Host());
  ASSERT_TRUE(o.ok()) << o.status().ToString();
  EXPECT_EQ(o->nvidia_smi, "");
}

TEST_F(KubeletFlagsTest, ParsingTellsAnEmptyNvidiaSmiFromNone) {
  for (bool given : {false, true}) {
    CLI::App app;
    KubeletFlags f = DefaultKubeletFlags(bin_);
    AddKubeletFlags(app, &f);
    std::vector<std::string> args = {"--node-name", "node-a", "--label", "a=b", "--label", "c=d"};
    if (given) args.insert(args.begin(), {"--nvidia-smi", ""});
    std::reverse(args.begin(), args.end());  // CLI::App::parse(vector) takes them reversed
    app.parse(args);
    EXPECT_EQ(f.node_name, "node-a");
    EXPECT_EQ(f.labels, (std::vector<std::string>{"a=b", "c=d"}));
    EXPECT_EQ(f.nvidia_smi_given, given);
    EXPECT_EQ(f.nvidia_smi, "");
  }
}

TEST_F(KubeletFlagsTest, RelativePathsAreTakenFromTheWorkingDirectory) {
  KubeletFlags f = Given();
  f.root_dir = "w/../node-a";
  f.sim_config = "/etc/./a.conf";
  f.sim_lib_dir = "";
  MakeKubeletPathsAbsolute(&f);
  EXPECT_EQ(f.root_dir, (std::filesystem::current_path() / "node-a").string());
  EXPECT_EQ(f.sim_config, "/etc/a.conf");
  EXPECT_EQ(f.sim_state, "");
  EXPECT_EQ(f.sim_lib_dir, "");
}

}  // namespace
}  // namespace hami::sim
