#include "deviceplugin/device_ids.h"

#include <gtest/gtest.h>

namespace hami::deviceplugin {
namespace {

constexpr const char* kUuid = "GPU-5a3c0f1e-0000-4000-8000-000000000001";

TEST(DeviceIds, ReplicaIdsMapBackToTheirGpu) {
  for (uint32_t i : {0u, 1u, 9u, 123u}) {
    std::string id = ReplicaId(kUuid, i);
    EXPECT_EQ(id, std::string(kUuid) + "-" + std::to_string(i));
    EXPECT_EQ(PhysicalId(id), kUuid);
  }
}

TEST(DeviceIds, APlainUuidIsItsOwnPhysicalId) {
  // Its last group is all digits, which must not be mistaken for a replica suffix.
  EXPECT_EQ(PhysicalId(kUuid), kUuid);
  EXPECT_EQ(PhysicalId("GPU-03f69c50-9bb4-7c4c-0ad1-4a3e6e3f4c5e"),
            "GPU-03f69c50-9bb4-7c4c-0ad1-4a3e6e3f4c5e");
}

TEST(DeviceIds, OtherSpellings) {
  EXPECT_EQ(PhysicalId(std::string(kUuid) + "::3"), kUuid);
  EXPECT_EQ(PhysicalId("MIG-0f2e3a4b-1111-2222-3333-444455556666"),
            "MIG-0f2e3a4b-1111-2222-3333-444455556666");
  // Not a UUID, but six dashes with a numeric tail: upstream's rule strips it.
  EXPECT_EQ(PhysicalId("a-b-c-d-e-f-7"), "a-b-c-d-e-f");
  EXPECT_EQ(PhysicalId("gpu0-1"), "gpu0-1");
  EXPECT_EQ(PhysicalId(""), "");
  EXPECT_EQ(PhysicalId(std::string(kUuid) + "-x"), std::string(kUuid) + "-x");
}

}  // namespace
}  // namespace hami::deviceplugin
