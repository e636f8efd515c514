// The simulated runtime's CDI registry: the names the spec files of its directories define.
#include "sim/kubelet/cdi_registry.h"

#include <gtest/gtest.h>

#include "common/file_util.h"
#include "k8s/test_util.h"

namespace hami::sim {
namespace {

TEST(CdiRegistry, ReadsJsonAndYamlSpecsAndSkipsBrokenOnes) {
  k8s::testing::TempDir a, b;
  ASSERT_TRUE(WriteFileAtomically(a.path() + "/nvidia.yaml",
                                  "cdiVersion: 0.5.0\nkind: nvidia.com/gpu\ndevices:\n"
                                  "- name: \"0\"\n- name: GPU-a\n- name: all\n")
                  .ok());
  ASSERT_TRUE(WriteFileAtomically(b.path() + "/hami-mig-MIG-x.json",
                                  R"({"kind":"nvidia.com/gpu","devices":[{"name":"MIG-x"}]})")
                  .ok());
  ASSERT_TRUE(WriteFileAtomically(b.path() + "/broken.json", "{\"kind\": [").ok());
  ASSERT_TRUE(WriteFileAtomically(b.path() + "/nameless.yaml", "kind: x.com/y\ndevices: [{}]\n")
                  .ok());
  ASSERT_TRUE(WriteFileAtomically(b.path() + "/notes.txt", "kind: x.com/z\n").ok());
  EXPECT_EQ(CdiDeviceNames({a.path(), b.path(), a.path() + "/missing"}),
            (std::set<std::string>{"nvidia.com/gpu=0", "nvidia.com/gpu=GPU-a",
                                   "nvidia.com/gpu=all", "nvidia.com/gpu=MIG-x"}));
}

}  // namespace
}  // namespace hami::sim
