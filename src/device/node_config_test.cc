#include "device/node_config.h"

#include <gtest/gtest.h>

namespace hami::device {
namespace {

constexpr char kFull[] = R"({"nodeconfig":[
  {"name":"node-a","operatingmode":"mig","devicesplitcount":5,"devicememoryscaling":1.5,
   "devicecorescaling":2,"preconfigureddevicememory":8192,"libcudaloglevel":"3",
   "enablenumatopology":true,"migstrategy":"none",
   "filterdevices":{"uuid":["GPU-x","GPU-y"],"index":[3]},"enablegetpreferredallocation":true},
  {"name":"node-b","devicesplitcount":2}
]})";

TEST(NodeConfig, ParsesEveryField) {
  Result<NodeConfigFile> r = ParseNodeConfigJson(kFull);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  ASSERT_EQ(r->nodes.size(), 2u);
  const NodeConfigEntry& a = r->nodes[0];
  EXPECT_EQ(a.name, "node-a");
  EXPECT_EQ(a.operating_mode, OperatingMode::kMig);
  EXPECT_EQ(a.device_split_count, 5u);
  EXPECT_EQ(a.device_memory_scaling, 1.5);
  EXPECT_EQ(a.device_core_scaling, 2.0);
  EXPECT_EQ(a.preconfigured_device_memory_mib, 8192);
  EXPECT_EQ(a.lib_cuda_log_level, 3);
  EXPECT_EQ(a.enable_numa_topology, true);
  EXPECT_EQ(a.mig_strategy, "none");
  ASSERT_TRUE(a.filter_devices.has_value());
  EXPECT_EQ(a.filter_devices->uuids, (std::vector<std::string>{"GPU-x", "GPU-y"}));
  EXPECT_EQ(a.filter_devices->indexes, (std::vector<uint32_t>{3}));
  EXPECT_EQ(a.enable_get_preferred_allocation, true);
  EXPECT_FALSE(r->nodes[1].operating_mode.has_value());
}

TEST(NodeConfig, NodeEntryOverridesGlobalValues) {
  NvidiaConfig global;
  global.device_split_count = 10;
  global.device_memory_scaling = 1.2;
  global.lib_cuda_log_level = 1;
  NodeConfigFile file = *ParseNodeConfigJson(kFull);

  NodeDeviceSettings a = ResolveNodeSettings(global, file, "node-a");
  EXPECT_EQ(a.operating_mode, OperatingMode::kMig);
  EXPECT_EQ(a.device_split_count, 5u);
  EXPECT_EQ(a.device_memory_scaling, 1.5);
  EXPECT_EQ(a.lib_cuda_log_level, 3);
  EXPECT_TRUE(a.enable_get_preferred_allocation);

  NodeDeviceSettings b = ResolveNodeSettings(global, file, "node-b");
  EXPECT_EQ(b.operating_mode, OperatingMode::kHamiCore);
  EXPECT_EQ(b.device_split_count, 2u);
  EXPECT_EQ(b.device_memory_scaling, 1.2);  // global

  NodeDeviceSettings other = ResolveNodeSettings(global, file, "node-z");
  EXPECT_EQ(other.device_split_count, 10u);
  EXPECT_TRUE(other.filter_devices.uuids.empty());
}

TEST(NodeConfig, GoDecodingSemantics) {
  Result<NodeConfigFile> r = ParseNodeConfigJson(
      R"({"NodeConfig":[{"Name":"n","LibCudaLogLevel":4,"devicesplitcount":null,"extra":1}]})");
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->nodes[0].name, "n");
  EXPECT_EQ(r->nodes[0].lib_cuda_log_level, 4);
  EXPECT_FALSE(r->nodes[0].device_split_count.has_value());
  EXPECT_TRUE(ParseNodeConfigJson("{}")->nodes.empty());
  EXPECT_TRUE(ParseNodeConfigJson("null")->nodes.empty());
}

TEST(NodeConfig, ErrorsNameEntryAndField) {
  const char* cases[][2] = {
      {"", "not valid JSON"},
      {"[]", "expected a JSON object"},
      {R"({"nodeconfig":{}})", "nodeconfig: expected an array"},
      {R"({"nodeconfig":[{}]})", "nodeconfig[0].name: required"},
      {R"({"nodeconfig":[{"name":"a"},{"name":"a"}]})",
       "nodeconfig[1].name: node \"a\" is configured twice"},
      {R"({"nodeconfig":[{"name":"a","operatingmode":"vgpu"}]})",
       "nodeconfig[0].operatingmode: \"vgpu\" is not one of"},
      {R"({"nodeconfig":[{"name":"a","devicesplitcount":0}]})",
       "nodeconfig[0].devicesplitcount: must be at least 1"},
      {R"({"nodeconfig":[{"name":"a","devicesplitcount":-2}]})",
       "nodeconfig[0].devicesplitcount: -2 is out of range"},
      {R"({"nodeconfig":[{"name":"a","devicememoryscaling":0}]})",
       "devicememoryscaling: must be greater than 0"},
      {R"({"nodeconfig":[{"name":"a","devicecorescaling":"1"}]})",
       "devicecorescaling: expected a number"},
      {R"({"nodeconfig":[{"name":"a","libcudaloglevel":"9"}]})",
       "libcudaloglevel: \"9\" is not a level"},
      {R"({"nodeconfig":[{"name":"a","enablenumatopology":"yes"}]})",
       "enablenumatopology: expected true or false"},
      {R"({"nodeconfig":[{"name":"a","filterdevices":{"index":[-1]}}]})", "filterdevices.index[0]"},
      {R"({"nodeconfig":[{"name":"a","filterdevices":{"uuid":"GPU-x"}}]})",
       "filterdevices.uuid: expected an array"},
  };
  for (const auto& c : cases) {
    Result<NodeConfigFile> r = ParseNodeConfigJson(c[0]);
    ASSERT_FALSE(r.ok()) << c[0];
    EXPECT_NE(r.status().message().find(c[1]), std::string::npos)
        << c[0] << " -> " << r.status().message();
  }
}

}  // namespace
}  // namespace hami::device
