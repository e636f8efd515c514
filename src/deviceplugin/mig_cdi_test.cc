// MIG CDI specs (upstream's B8): the spec a MIG device made at Allocate gets, written before
// Allocate answers and removed when the device is destroyed, with the toolkit's spec-wide edits.
#include "deviceplugin/mig_cdi.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "common/file_util.h"
#include "deviceplugin/fake_gpu_driver.h"
#include "deviceplugin/fake_mig_driver.h"
#include "k8s/test_util.h"

namespace hami::deviceplugin {
namespace {

using Json = nlohmann::json;

constexpr const char* kGpu = "GPU-0";

MigInstance Instance(const std::string& uuid, uint32_t gi, uint32_t ci) {
  MigInstance i;
  i.owner = {"uid-1", 0, 0};
  i.pod = "default/p";
  i.gpu_uuid = kGpu;
  i.profile = "1g.10gb";
  i.device = {uuid, gi, ci};
  return i;
}

std::vector<std::string> Paths(const Json& nodes) {
  std::vector<std::string> out;
  for (const Json& n : nodes) out.push_back(n.at("path").get<std::string>());
  return out;
}

TEST(MigCdiSpec, NamesTheDeviceItsParentAndItsCapabilities) {
  MigCdiNode node;
  node.gpu_minor[kGpu] = 3;
  node.caps_minor = ParseMigMinors(
      "config 1\nmonitor 2\ngpu3/gi2/access 39\ngpu3/gi2/ci0/access 40\ngpu3/gi1/access 30\n");
  Result<std::string> text = MigCdiSpec(Instance("MIG-a", 2, 0), node);
  ASSERT_TRUE(text.ok()) << text.status().ToString();
  Json spec = Json::parse(*text);
  EXPECT_EQ(spec["kind"], "nvidia.com/gpu");
  EXPECT_EQ(spec["cdiVersion"], "0.5.0");
  ASSERT_EQ(spec["devices"].size(), 1u);
  EXPECT_EQ(spec["devices"][0]["name"], "MIG-a");
  EXPECT_EQ(Paths(spec["devices"][0]["containerEdits"]["deviceNodes"]),
            (std::vector<std::string>{"/dev/nvidia3", "/dev/nvidia-caps/nvidia-cap39",
                                      "/dev/nvidia-caps/nvidia-cap40"}));
  // No toolkit spec: the control and UVM nodes.
  EXPECT_EQ(Paths(spec["containerEdits"]["deviceNodes"]),
            (std::vector<std::string>{"/dev/nvidiactl", "/dev/nvidia-uvm",
                                      "/dev/nvidia-uvm-tools"}));
  node.gpu_minor.clear();
  EXPECT_EQ(MigCdiSpec(Instance("MIG-a", 2, 0), node).status().code(),
            StatusCode::kFailedPrecondition);
}

TEST(MigCdiSpec, MalformedMigMinorsLinesAreSkipped) {
  auto m = ParseMigMinors("gpu0/gi1/access x\ngpu0/gi1/access 5 6\n\ngarbage\ngpu0/gi2/access 7\n"
                          "config 1\n");
  EXPECT_EQ(m, (std::map<std::string, uint32_t>{{"gpu0/gi2/access", 7}}));
}

TEST(MigCdiSpec, CommonEditsComeFromTheToolkitSpecOfTheGpuKind) {
  Result<std::string> edits = CdiCommonEdits(R"(---
cdiVersion: 0.5.0
kind: nvidia.com/gpu
devices:
- name: "0"
  containerEdits:
    deviceNodes:
    - path: /dev/nvidia0
containerEdits:
  env:
  - NVIDIA_VISIBLE_DEVICES=void
  deviceNodes:
  - path: /dev/nvidiactl
  mounts:
  - hostPath: /usr/lib/x86_64-linux-gnu/libcuda.so.550.54.15
    containerPath: /usr/lib/x86_64-linux-gnu/libcuda.so.550.54.15
    options: [ro, nosuid, nodev, bind]
)");
  ASSERT_TRUE(edits.ok()) << edits.status().ToString();
  MigCdiNode node;
  node.gpu_minor[kGpu] = 0;
  node.common_edits = *edits;
  Json spec = Json::parse(*MigCdiSpec(Instance("MIG-b", 1, 0), node));
  EXPECT_EQ(spec["containerEdits"]["env"], Json::array({"NVIDIA_VISIBLE_DEVICES=void"}));
  EXPECT_EQ(spec["containerEdits"]["mounts"][0]["options"],
            Json::array({"ro", "nosuid", "nodev", "bind"}));
  EXPECT_EQ(CdiCommonEdits("kind: amd.com/gpu\ncontainerEdits: {env: [A=1]}\n").status().code(),
            StatusCode::kNotFound);
  EXPECT_EQ(CdiCommonEdits("kind: nvidia.com/gpu\ndevices: []\n").status().code(),
            StatusCode::kNotFound);
  EXPECT_EQ(CdiCommonEdits("kind: [unclosed").status().code(), StatusCode::kInvalidArgument);
  // Bytes that are not UTF-8 are replaced, never thrown on (found by fuzz_mig_cdi).
  Result<std::string> odd =
      CdiCommonEdits("kind: nvidia.com/gpu\ncontainerEdits:\n  \xaanv: [A]\n");
  ASSERT_TRUE(odd.ok()) << odd.status().ToString();
  EXPECT_TRUE(Json::parse(*odd, nullptr, false).is_object()) << *odd;
  EXPECT_EQ(CdiCommonEdits("- a list").status().code(), StatusCode::kInvalidArgument);
}

class MigCdiSpecsTest : public ::testing::Test {
 protected:
  MigCdiSpecsTest() {
    Inventory inv;
    GpuInfo g;
    g.uuid = kGpu;
    g.minor = 0;
    inv.gpus.push_back(g);
    gpus_.SetInventory(inv);
    mig_.AddGpu(kGpu, {{0, "1g.10gb", 1, 7, 9728, 14,
                      {{0, 1}, {1, 1}, {2, 1}, {3, 1}, {4, 1}, {5, 1}, {6, 1}}}});
    options_.spec_dir = dir_.path() + "/cdi";
    std::filesystem::create_directories(options_.spec_dir);
    options_.toolkit_specs = {dir_.path() + "/cdi/nvidia.yaml"};
    options_.mig_minors = dir_.path() + "/mig-minors";
  }
  std::string SpecOf(const std::string& uuid) const {
    return options_.spec_dir + "/" + MigCdiSpecFileName(uuid);
  }

  k8s::testing::TempDir dir_;
  FakeGpuDriver gpus_;
  FakeMigDriver mig_;
  MigCdiOptions options_;
};

TEST_F(MigCdiSpecsTest, ASpecLivesExactlyAsLongAsItsDevice) {
  MigCdiSpecs specs(gpus_, options_);
  MigInstances instances(mig_, "");
  instances.SetChangeListener([&](const std::vector<MigInstance>& held) {
    EXPECT_TRUE(specs.Sync(held).ok());
  });
  ASSERT_TRUE(instances.Load(mig_.Discovered()).ok());
  Result<MigInstance> a = instances.Ensure({"uid-a", 0, 0}, "default/a", kGpu, "1g.10gb", {6, 1});
  ASSERT_TRUE(a.ok()) << a.status().ToString();
  // Written by the time Ensure (and so Allocate) answers.
  ASSERT_TRUE(std::filesystem::exists(SpecOf(a->device.uuid)));
  Json spec = Json::parse(*ReadFileToString(SpecOf(a->device.uuid)));
  EXPECT_EQ(spec["devices"][0]["name"], a->device.uuid);
  Result<MigInstance> b = instances.Ensure({"uid-b", 0, 0}, "default/b", kGpu, "1g.10gb", {5, 1});
  ASSERT_TRUE(b.ok()) << b.status().ToString();
  // A file of someone else's in the directory is left alone.
  ASSERT_TRUE(WriteFileAtomically(options_.spec_dir + "/vendor.yaml", "kind: x.com/y\n").ok());
  MigInstances::ReconcileResult r = instances.Reconcile({"uid-b"}, instances.Generation());
  EXPECT_EQ(r.destroyed, 1);
  EXPECT_FALSE(std::filesystem::exists(SpecOf(a->device.uuid)));
  EXPECT_TRUE(std::filesystem::exists(SpecOf(b->device.uuid)));
  EXPECT_TRUE(std::filesystem::exists(options_.spec_dir + "/vendor.yaml"));
}

TEST_F(MigCdiSpecsTest, AStaleSpecFromBeforeARestartGoesAtTheFirstSync) {
  ASSERT_TRUE(WriteFileAtomically(SpecOf("MIG-gone"), "{}").ok());
  MigCdiSpecs specs(gpus_, options_);
  EXPECT_TRUE(specs.Sync({Instance("MIG-live", 1, 0)}).ok());
  EXPECT_FALSE(std::filesystem::exists(SpecOf("MIG-gone")));
  EXPECT_TRUE(std::filesystem::exists(SpecOf("MIG-live")));
}

TEST_F(MigCdiSpecsTest, TakesTheToolkitsEditsAndTheKernelsCapabilities) {
  ASSERT_TRUE(WriteFileAtomically(options_.spec_dir + "/nvidia.yaml",
                                  "kind: nvidia.com/gpu\ncontainerEdits:\n  env: [FROM=toolkit]\n")
                  .ok());
  ASSERT_TRUE(
      WriteFileAtomically(options_.mig_minors, "gpu0/gi1/access 21\ngpu0/gi1/ci0/access 22\n")
          .ok());
  MigCdiSpecs specs(gpus_, options_);
  EXPECT_TRUE(specs.Sync({Instance("MIG-c", 1, 0)}).ok());
  Json spec = Json::parse(*ReadFileToString(SpecOf("MIG-c")));
  EXPECT_EQ(spec["containerEdits"]["env"], Json::array({"FROM=toolkit"}));
  EXPECT_EQ(Paths(spec["devices"][0]["containerEdits"]["deviceNodes"]),
            (std::vector<std::string>{"/dev/nvidia0", "/dev/nvidia-caps/nvidia-cap21",
                                      "/dev/nvidia-caps/nvidia-cap22"}));
}

TEST_F(MigCdiSpecsTest, AGpuWithoutAMinorIsAnErrorForItsDeviceOnly) {
  Inventory inv;
  GpuInfo g;
  g.uuid = kGpu;  // no minor
  inv.gpus.push_back(g);
  gpus_.SetInventory(inv);
  MigCdiSpecs specs(gpus_, options_);
  MigInstance other = Instance("MIG-other", 1, 0);
  other.gpu_uuid = "GPU-unknown";
  Status s = specs.Sync({Instance("MIG-d", 1, 0), other});
  EXPECT_EQ(s.code(), StatusCode::kFailedPrecondition);
  EXPECT_NE(s.message().find("MIG-d"), std::string::npos) << s.message();
  EXPECT_FALSE(std::filesystem::exists(SpecOf("MIG-d")));
}

}  // namespace
}  // namespace hami::deviceplugin
