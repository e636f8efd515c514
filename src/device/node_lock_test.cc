#include "device/node_lock.h"

#include <gtest/gtest.h>

namespace hami::device {
namespace {

TEST(NodeLock, RoundTripsCurrentFormat) {
  constexpr char kValue[] = "2024-05-01T08:30:00Z,default,gpu-pod";
  Result<NodeLockValue> lock = DecodeNodeLock(kValue);
  ASSERT_TRUE(lock.ok()) << lock.status().ToString();
  EXPECT_EQ(lock->time.unix_seconds, 1714552200);
  EXPECT_EQ(lock->pod_namespace, "default");
  EXPECT_EQ(lock->pod_name, "gpu-pod");
  EXPECT_FALSE(lock->IsLegacy());
  EXPECT_TRUE(lock->HeldBy("default", "gpu-pod"));
  EXPECT_FALSE(lock->HeldBy("default", "other"));
  EXPECT_EQ(EncodeNodeLock(*lock), kValue);
  // A scheduler in another zone writes its offset; it survives the round trip.
  EXPECT_EQ(EncodeNodeLock(*DecodeNodeLock("2024-05-01T16:30:00+08:00,ns,p")),
            "2024-05-01T16:30:00+08:00,ns,p");
}

TEST(NodeLock, LegacyBareTime) {
  Result<NodeLockValue> lock = DecodeNodeLock("2024-05-01T08:30:00Z");
  ASSERT_TRUE(lock.ok());
  EXPECT_TRUE(lock->IsLegacy());
  EXPECT_FALSE(lock->HeldBy("", ""));
  EXPECT_EQ(EncodeNodeLock(*lock), "2024-05-01T08:30:00Z");
}

TEST(NodeLock, RejectsMalformedValues) {
  for (const char* bad :
       {"", "2024-05-01T08:30:00Z,ns", "2024-05-01T08:30:00Z,ns,p,extra", "yesterday,ns,p",
        "2024-05-01T08:30:00Z,,p", "2024-05-01T08:30:00Z,ns,", "2024-05-01 08:30:00"}) {
    Result<NodeLockValue> r = DecodeNodeLock(bad);
    EXPECT_FALSE(r.ok()) << bad;
    EXPECT_NE(r.status().message().find("node lock"), std::string::npos);
  }
}

}  // namespace
}  // namespace hami::device
