#include "sim/gpu/config.h"

#include <gtest/gtest.h>

namespace hami::sim {
namespace {

TEST(ConfigTest, DefaultIsTwoLinkedA100s) {
  SimConfig c = DefaultConfig();
  ASSERT_EQ(c.devices.size(), 2u);
  for (const DeviceSpec& d : c.devices) {
    EXPECT_EQ(d.name, "NVIDIA A100-SXM4-80GB");
    EXPECT_EQ(d.memory_bytes, 80ull << 30);
    EXPECT_EQ(d.sm_count, 108);
    EXPECT_EQ(d.max_threads_per_sm, 2048);
    EXPECT_EQ(d.cc_major, 8);
    EXPECT_EQ(d.cc_minor, 0);
    EXPECT_EQ(d.nvlink_peers.size(), 12u);
  }
  EXPECT_NE(c.devices[0].uuid, c.devices[1].uuid);
  EXPECT_EQ(c.devices[0].uuid, DefaultConfig().devices[0].uuid);  // stable
  unsigned char bytes[16];
  EXPECT_TRUE(ParseUuidBytes(c.devices[0].uuid, bytes));
}

// Two nodes with the same description but their own `node` show different cards, each stable.
TEST(ConfigTest, DerivedUuidsDependOnTheNode) {
  auto parse = [](const std::string& text) {
    SimConfig c;
    std::string err;
    EXPECT_TRUE(ParseConfig(text, &c, &err)) << err;
    return c;
  };
  SimConfig a = parse("node = gpu-1\n[device]\n[device]\n");
  SimConfig a2 = parse("node = gpu-1\n[device]\n[device]\n");
  SimConfig b = parse("node = gpu-2\n[device]\n[device]\n");
  SimConfig none = parse("[device]\n[device]\n");
  EXPECT_EQ(a.node, "gpu-1");
  EXPECT_EQ(a.devices[0].uuid, a2.devices[0].uuid);
  EXPECT_NE(a.devices[0].uuid, b.devices[0].uuid);
  EXPECT_NE(a.devices[1].uuid, b.devices[1].uuid);
  EXPECT_NE(a.devices[0].uuid, a.devices[1].uuid);
  EXPECT_NE(a.devices[0].uuid, none.devices[0].uuid);
  EXPECT_EQ(none.devices[0].uuid, DefaultConfig().devices[0].uuid);  // unchanged without a node
  EXPECT_NE(ConfigFingerprint(a), ConfigFingerprint(b));
  unsigned char bytes[16];
  EXPECT_TRUE(ParseUuidBytes(b.devices[1].uuid, bytes));
  SimConfig c;
  std::string err;
  EXPECT_FALSE(ParseConfig("node =\n[device]\n", &c, &err));
  EXPECT_NE(err.find("line 1: node"), std::string::npos) << err;
}

TEST(ConfigTest, ParsesAFullFile) {
  const char* text = R"(# two small devices
driver_version = 535.1.2
cuda_driver_version = 12020
nvml_sample_ms = 200
max_queued_ms = 5000

[device]
name = NVIDIA T4
uuid = GPU-00000000-1111-2222-3333-444444444444
memory = 16Gi
sm_count = 40
compute_capability = 7.5
numa_node = 1
pci_bus_id = 00000000:3B:00.0
nvlink = 1:2   # two links to device 1

[device]
memory = 8192m
sm_count = 20
nvlink = 0, 0
)";
  SimConfig c;
  std::string error;
  ASSERT_TRUE(ParseConfig(text, &c, &error)) << error;
  EXPECT_EQ(c.driver_version, "535.1.2");
  EXPECT_EQ(c.cuda_driver_version, 12020);
  EXPECT_EQ(c.nvml_sample_ms, 200);
  EXPECT_EQ(c.max_queued_ms, 5000);
  ASSERT_EQ(c.devices.size(), 2u);
  EXPECT_EQ(c.devices[0].name, "NVIDIA T4");
  EXPECT_EQ(c.devices[0].memory_bytes, 16ull << 30);
  EXPECT_EQ(c.devices[0].cc_major, 7);
  EXPECT_EQ(c.devices[0].cc_minor, 5);
  EXPECT_EQ(c.devices[0].pci_bus, 0x3Bu);
  EXPECT_EQ(c.devices[1].memory_bytes, 8ull << 30);
  EXPECT_EQ(c.devices[1].nvlink_peers, (std::vector<int>{0, 0}));
  EXPECT_NE(ConfigFingerprint(c), ConfigFingerprint(DefaultConfig()));
}

TEST(ConfigTest, ErrorsNameTheLine) {
  struct Case {
    const char* text;
    const char* expect;
  } cases[] = {
      {"[device]\nsm_count = lots\n", "line 2: sm_count"},
      {"[device]\nmemory = -1\n", "line 2: memory"},
      {"[device]\ncolour = red\n", "line 2: unknown device key 'colour'"},
      {"[gpu]\n", "line 1: unknown section"},
      {"[device]\nthis is not a pair\n", "line 2: expected"},
      {"[device]\nuuid = GPU-xyz\n", "line 2: uuid"},
      {"", "no [device] section"},
      {"[device]\nnvlink = 1\n[device]\n", "asymmetric"},
      {"[device]\nnvlink = 0\n", "not another device"},
      {"nvml_sample_ms = -5\n[device]\n", "line 1: nvml_sample_ms"},
      {"max_queued_ms = 0\n[device]\n", "line 1: max_queued_ms"},
      {"max_queued_ms = 2s\n[device]\n", "line 1: max_queued_ms"},
  };
  for (const Case& c : cases) {
    SimConfig config;
    std::string error;
    EXPECT_FALSE(ParseConfig(c.text, &config, &error)) << c.text;
    EXPECT_NE(error.find(c.expect), std::string::npos) << error;
  }
}

TEST(ConfigTest, MissingFileIsAnError) {
  SimConfig c;
  std::string error;
  EXPECT_FALSE(LoadConfigFile("/nonexistent/hami-sim.conf", &c, &error));
  EXPECT_NE(error.find("/nonexistent/hami-sim.conf"), std::string::npos);
}

TEST(ConfigTest, PciBusIdForms) {
  uint32_t d, b, dev;
  EXPECT_TRUE(ParsePciBusId("00000000:07:00.0", &d, &b, &dev));
  EXPECT_EQ(b, 7u);
  EXPECT_TRUE(ParsePciBusId("0001:4E:1F.0", &d, &b, &dev));
  EXPECT_EQ(d, 1u);
  EXPECT_EQ(b, 0x4Eu);
  EXPECT_EQ(dev, 0x1Fu);
  EXPECT_FALSE(ParsePciBusId("07:00.0", &d, &b, &dev));
  EXPECT_FALSE(ParsePciBusId("0000:07:00.0 junk", &d, &b, &dev));
}

}  // namespace
}  // namespace hami::sim
