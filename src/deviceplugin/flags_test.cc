// hami-device-plugin's flags checked into its configuration: what each flag and file becomes,
// and the message for each mistake.
#include "deviceplugin/flags.h"

#include <gtest/gtest.h>

#include <fstream>

#include "k8s/test_util.h"

namespace hami::deviceplugin {
namespace {

class PluginFlagsTest : public ::testing::Test {
 protected:
  PluginFlagsTest() {
    flags_.node_name = "node-a";
    flags_.node_config_file = dir_.path() + "/absent.json";
  }
  std::string Write(const std::string& name, const std::string& text) {
    std::string path = dir_.path() + "/" + name;
    std::ofstream(path) << text;
    return path;
  }
  std::string ErrorOf() {
    Result<PluginConfig> c = PluginConfigFromFlags(flags_);
    EXPECT_FALSE(c.ok());
    EXPECT_EQ(c.status().code(), StatusCode::kInvalidArgument);
    return c.ok() ? "" : c.status().message();
  }

  k8s::testing::TempDir dir_;
  PluginFlags flags_;
};

TEST_F(PluginFlagsTest, DefaultsGiveTheChartsNvidiaSettings) {
  Result<PluginConfig> c = PluginConfigFromFlags(flags_);
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_EQ(c->options.node_name, "node-a");
  EXPECT_EQ(c->options.resource_name, "nvidia.com/gpu");
  EXPECT_EQ(c->options.settings.device_split_count, 10u);
  EXPECT_EQ(c->options.register_interval, std::chrono::seconds(30));
  EXPECT_EQ(c->options.allocation.to_allocate_key, "hami.io/vgpu-devices-to-allocate");
  EXPECT_EQ(c->options.allocation.hook_path, "/usr/local");
  EXPECT_FALSE(c->options.allocation.gdrcopy);
  EXPECT_FALSE(c->options.topology_score);
  EXPECT_TRUE(c->fail_on_init_error);
  EXPECT_TRUE(c->warnings.empty());
}

TEST_F(PluginFlagsTest, FilesAndFlagsReachTheOptions) {
  flags_.config_file =
      Write("device-config.yaml", "nvidia:\n  resourceCountName: example.com/vgpu\n"
                                  "  deviceSplitCount: 5\n  disableCoreLimit: true\n");
  flags_.node_config_file =
      Write("config.json", R"({"nodeconfig":[{"name":"node-a","devicesplitcount":3},
                                              {"name":"node-b","devicesplitcount":7}]})");
  flags_.register_interval = "1m30s";
  flags_.device_list_strategy = "envvar,cdi-annotations";
  flags_.gdrcopy = "true";
  flags_.hook_path = "/opt/hami";
  flags_.topology_score = "true";
  flags_.disable_healthchecks = "all";
  Result<PluginConfig> c = PluginConfigFromFlags(flags_);
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_EQ(c->options.resource_name, "example.com/vgpu");
  EXPECT_EQ(c->options.settings.device_split_count, 3u);  // the node's entry wins
  EXPECT_EQ(c->options.register_interval, std::chrono::seconds(90));
  EXPECT_TRUE(c->options.allocation.disable_core_limit);
  EXPECT_TRUE(c->options.allocation.gdrcopy);
  EXPECT_FALSE(c->options.allocation.gds);
  EXPECT_EQ(c->options.allocation.hook_path, "/opt/hami");
  EXPECT_TRUE(c->options.topology_score);
  EXPECT_TRUE(c->options.xid_policy.disabled);
}

TEST_F(PluginFlagsTest, IgnoredFlagsAreWarningsNotErrors) {
  flags_.device_id_strategy = "index";
  flags_.split = 4;
  Result<PluginConfig> c = PluginConfigFromFlags(flags_);
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  ASSERT_EQ(c->warnings.size(), 2u);
  EXPECT_NE(c->warnings[0].find("--device-id-strategy=index"), std::string::npos);
  EXPECT_NE(c->warnings[1].find("--device-split-count"), std::string::npos);
}

TEST_F(PluginFlagsTest, MigStrategyFromTheFlagOrTheNodesEntry) {
  Result<PluginConfig> c = PluginConfigFromFlags(flags_);
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_EQ(c->options.mig_strategy, MigStrategy::kNone);
  flags_.mig_strategy = "mixed";
  c = PluginConfigFromFlags(flags_);
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_EQ(c->options.mig_strategy, MigStrategy::kMixed);
  EXPECT_TRUE(c->warnings.empty());
  // The node's own entry wins, and the override is worth a line in the log.
  flags_.node_config_file =
      Write("config.json", R"({"nodeconfig":[{"name":"node-a","migstrategy":"single"},
                                              {"name":"node-b","migstrategy":"none"}]})");
  c = PluginConfigFromFlags(flags_);
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_EQ(c->options.mig_strategy, MigStrategy::kSingle);
  ASSERT_EQ(c->warnings.size(), 1u);
  EXPECT_NE(c->warnings[0].find("overrides --mig-strategy=mixed"), std::string::npos);
}

TEST_F(PluginFlagsTest, DynamicMigNodesGetTheAllowlistAndNoStrategy) {
  flags_.mig_strategy = "mixed";
  flags_.hook_path = "/opt/hami";
  flags_.node_config_file =
      Write("config.json", R"({"nodeconfig":[{"name":"node-a","operatingmode":"mig"}]})");
  Result<PluginConfig> c = PluginConfigFromFlags(flags_);
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_EQ(c->options.settings.operating_mode, device::OperatingMode::kMig);
  EXPECT_EQ(c->options.mig_strategy, MigStrategy::kNone);
  ASSERT_EQ(c->warnings.size(), 1u);
  EXPECT_NE(c->warnings[0].find("operating mode mig"), std::string::npos);
  EXPECT_EQ(c->options.mig_allowlist, device::DefaultMigProfileAllowlist());
  EXPECT_EQ(c->options.mig_state_file, "/opt/hami/vgpu/mig-instances.json");
}

// Upstream's B8: CDI names of MIG devices made at Allocate resolve to nothing; said at start.
TEST_F(PluginFlagsTest, DynamicMigWithCdiNamesWritesASpecPerDevice) {
  flags_.node_config_file =
      Write("config.json", R"({"nodeconfig":[{"name":"node-a","operatingmode":"mig"}]})");
  flags_.device_list_strategy = "cdi-annotations";
  flags_.cdi_spec_dir = "/run/cdi-here";
  Result<PluginConfig> c = PluginConfigFromFlags(flags_);
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_TRUE(c->warnings.empty());
  ASSERT_TRUE(c->options.mig_cdi.has_value());
  EXPECT_EQ(c->options.mig_cdi->spec_dir, "/run/cdi-here");
  EXPECT_EQ(c->options.mig_cdi->toolkit_specs.front(), "/run/cdi-here/nvidia.yaml");
  flags_.device_list_strategy = "envvar";
  c = PluginConfigFromFlags(flags_);
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_FALSE(c->options.mig_cdi.has_value());
  // Not in operating mode mig: the toolkit's spec already names every device.
  flags_.node_config_file = Write("plain.json", R"({"nodeconfig":[{"name":"node-a"}]})");
  flags_.device_list_strategy = "cdi-cri";
  c = PluginConfigFromFlags(flags_);
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_FALSE(c->options.mig_cdi.has_value());
}

TEST_F(PluginFlagsTest, MigStrategyMistakesAreNamed) {
  flags_.mig_strategy = "some";
  EXPECT_NE(ErrorOf().find("--mig-strategy: mig strategy \"some\""), std::string::npos);
  flags_.mig_strategy = "none";
  flags_.node_config_file =
      Write("config.json", R"({"nodeconfig":[{"name":"node-a","migstrategy":"Mixed"}]})");
  EXPECT_NE(ErrorOf().find("config.json: node node-a: mig strategy \"Mixed\""),
            std::string::npos);
  flags_.node_config_file = Write(
      "mps.json", R"({"nodeconfig":[{"name":"node-a","migstrategy":"single",
                                     "operatingmode":"mps"}]})");
  EXPECT_NE(ErrorOf().find("single with operating mode mps"), std::string::npos);
}

TEST_F(PluginFlagsTest, EachMistakeIsNamed) {
  flags_.node_name = "";
  EXPECT_NE(ErrorOf().find("set NODE_NAME or --node-name"), std::string::npos);
  flags_.node_name = "node-a";

  flags_.device_list_strategy = "carrier-pigeon";
  EXPECT_NE(ErrorOf().find("--device-list-strategy"), std::string::npos);
  flags_.device_list_strategy = "envvar";

  flags_.mofed = "maybe";
  EXPECT_NE(ErrorOf().find("--mofed-enabled \"maybe\""), std::string::npos);
  flags_.mofed = "false";

  flags_.register_interval = "0s";
  EXPECT_NE(ErrorOf().find("--register-interval \"0s\""), std::string::npos);
  flags_.register_interval = "soon";
  EXPECT_NE(ErrorOf().find("--register-interval \"soon\""), std::string::npos);
  flags_.register_interval = "30s";

  flags_.config_file = dir_.path() + "/missing.yaml";
  EXPECT_NE(ErrorOf().find("--config-file"), std::string::npos);
  flags_.config_file = Write("broken.yaml", "nvidia: [unclosed\n");
  EXPECT_NE(ErrorOf().find("broken.yaml"), std::string::npos);
  flags_.config_file = Write("other.yaml", "cambricon:\n  resourceCountName: x\n");
  EXPECT_NE(ErrorOf().find("no nvidia: section"), std::string::npos);
  flags_.config_file = "";

  flags_.node_config_file = Write("bad.json", R"({"nodeconfig":{}})");
  EXPECT_NE(ErrorOf().find("bad.json: "), std::string::npos);
}

}  // namespace
}  // namespace hami::deviceplugin

namespace hami::deviceplugin {
namespace {

// --volcano=vgpu with Volcano's own device config (volcano-vgpu-device-config).
TEST_F(PluginFlagsTest, VolcanoReadsVolcanosDeviceConfig) {
  flags_.volcano = "vgpu";
  flags_.config_file = Write("device-config.yaml",
                             "nvidia:\n  resourceCountName: volcano.sh/vgpu-number\n"
                             "  resourceMemoryName: volcano.sh/vgpu-memory\n"
                             "  resourceCoreName: volcano.sh/vgpu-cores\n"
                             "  deviceSplitCount: 10\n  gpuMemoryFactor: 16\n"
                             "  deviceCoreScaling: 1.5\n");
  Result<PluginConfig> c = PluginConfigFromFlags(flags_);
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  ASSERT_TRUE(c->options.volcano.has_value());
  EXPECT_EQ(c->options.resource_name, "volcano.sh/vgpu-number");
  EXPECT_EQ(c->options.volcano->memory_resource, "volcano.sh/vgpu-memory");
  EXPECT_EQ(c->options.volcano->memory_factor, 16);
  EXPECT_DOUBLE_EQ(c->options.volcano->core_scaling, 1.5);
  EXPECT_TRUE(c->warnings.empty()) << c->warnings[0];
}

TEST_F(PluginFlagsTest, VolcanoReplacesHamisDefaultNamesAndRefusesWhatItCannotServe) {
  flags_.volcano = "vgpu";  // the chart's HAMi config: Volcano's names, factor 1
  Result<PluginConfig> c = PluginConfigFromFlags(flags_);
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_EQ(c->options.resource_name, "volcano.sh/vgpu-number");
  EXPECT_EQ(c->options.volcano->cores_resource, "volcano.sh/vgpu-cores");
  EXPECT_EQ(c->options.volcano->memory_factor, 1);

  flags_.volcano = "gpu-share";
  EXPECT_EQ(ErrorOf(),
            "--volcano (VOLCANO_MODE) \"gpu-share\": want vgpu, share, number or whole");
  flags_.volcano = "vgpu";
  flags_.volcano_enforce_memory = "true";
  EXPECT_EQ(ErrorOf(), "--volcano-enforce-memory applies to --volcano=share only (vgpu memory "
                       "is always enforced)");
  flags_.volcano_enforce_memory = "yes";
  EXPECT_EQ(ErrorOf(), "--volcano-enforce-memory (VOLCANO_ENFORCE_MEMORY) \"yes\": want true or "
                       "false");
  flags_.volcano_enforce_memory = "false";
  flags_.mig_strategy = "mixed";
  EXPECT_NE(ErrorOf().find("does not schedule MIG devices made beforehand"), std::string::npos)
      << ErrorOf();
}

// Operating mode mig under Volcano: dynamic MIG in vGPU mode only, with the device config's
// knownMigGeometries (a warning when there are none).
TEST_F(PluginFlagsTest, VolcanoDynamicMigTakesTheDeviceConfigsGeometries) {
  flags_.node_config_file =
      Write("config.json", R"({"nodeconfig":[{"name":"node-a","operatingmode":"mig"}]})");
  flags_.volcano = "share";
  EXPECT_NE(ErrorOf().find("only in vGPU mode"), std::string::npos) << ErrorOf();
  flags_.volcano = "vgpu";
  Result<PluginConfig> bare = PluginConfigFromFlags(flags_);
  ASSERT_TRUE(bare.ok()) << bare.status().ToString();
  bool warned = false;
  for (const std::string& w : bare->warnings) warned |= w.find("no knownMigGeometries") != w.npos;
  EXPECT_TRUE(warned);
  flags_.config_file = Write("device-config.yaml", R"(nvidia:
  knownMigGeometries:
  - models: [A100-SXM4-80GB]
    allowedGeometries:
    - group: group1
      geometries: [{name: 1g.10gb, memory: 9728, count: 7}]
)");
  Result<PluginConfig> c = PluginConfigFromFlags(flags_);
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  ASSERT_EQ(c->options.volcano->mig_geometries.size(), 1u);
  EXPECT_EQ(c->options.volcano->mig_geometries[0].groups[0].group, "group1");
  EXPECT_EQ(c->options.settings.operating_mode, device::OperatingMode::kMig);
  EXPECT_TRUE(c->warnings.empty()) << c->warnings.front();
}

// --volcano=share / number: Volcano's GPU sharing and GPU number resources.
TEST_F(PluginFlagsTest, VolcanoShareAndNumberServeOneResource) {
  flags_.volcano = "share";
  flags_.volcano_enforce_memory = "true";
  flags_.config_file = Write("device-config.yaml", "nvidia:\n  gpuMemoryFactor: 4\n");
  Result<PluginConfig> c = PluginConfigFromFlags(flags_);
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  ASSERT_TRUE(c->options.volcano && c->options.volcano->share);
  EXPECT_EQ(*c->options.volcano->share, device::VolcanoShareMode::kMemory);
  EXPECT_EQ(c->options.resource_name, "volcano.sh/gpu-memory");
  EXPECT_EQ(c->options.volcano->memory_factor, 4);
  EXPECT_TRUE(c->options.volcano->enforce_memory);
  EXPECT_FALSE(c->options.volcano->handshake);
  flags_.volcano = "number";
  flags_.volcano_enforce_memory = "false";
  c = PluginConfigFromFlags(flags_);
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_EQ(*c->options.volcano->share, device::VolcanoShareMode::kNumber);
  EXPECT_EQ(c->options.resource_name, "volcano.sh/gpu-number");
}

// --volcano=whole: whole GPUs as nvidia.com/gpu for Volcano's Jobs, no Volcano protocol.
TEST_F(PluginFlagsTest, VolcanoWholeOffersWholeGpusUnderTheCountName) {
  flags_.volcano = "whole";
  Result<PluginConfig> c = PluginConfigFromFlags(flags_);
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  ASSERT_TRUE(c->options.volcano.has_value());
  EXPECT_TRUE(c->options.volcano->whole);
  EXPECT_FALSE(c->options.volcano->share.has_value());
  EXPECT_FALSE(c->options.volcano->handshake);
  EXPECT_EQ(c->options.resource_name, "nvidia.com/gpu");
  flags_.volcano_enforce_memory = "true";
  EXPECT_EQ(ErrorOf(), "--volcano-enforce-memory applies to --volcano=share only (the other "
                       "modes hand out whole GPUs)");
}

}  // namespace
}  // namespace hami::deviceplugin
