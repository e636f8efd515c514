#include "extender/quota.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "common/clock.h"
#include "device/config.h"

namespace hami::extender {

using scheduler::Ledger;

namespace {

class QuotaBookTest : public ::testing::Test {
 protected:
  QuotaBookTest()
      : vendors_(
            std::move(device::VendorRegistry::FromConfig(device::DefaultDeviceConfig())).value()),
        ledger_(vendors_, clock_),
        book_(vendors_) {}

  static nlohmann::json Quota(nlohmann::json hard) {
    return {{"metadata", {{"name", "gpu-quota"}, {"namespace", "team"}}},
            {"spec", {{"hard", std::move(hard)}}}};
  }

  device::VendorRegistry vendors_;
  FakeClock clock_;
  Ledger ledger_;
  QuotaBook book_;
};

// The API server stores a plain 10000 as "10k"; either spelling is the same limit.
TEST_F(QuotaBookTest, CanonicalQuantitiesAreLimits) {
  ASSERT_TRUE(book_.Upsert(Quota({{"limits.nvidia.com/gpumem", "10k"}})).ok());
  EXPECT_TRUE(book_.HasQuota("team"));
  EXPECT_TRUE(book_.Check(ledger_, "team", "NVIDIA", 10000, 0).ok());
  Status over = book_.Check(ledger_, "team", "NVIDIA", 10001, 0);
  EXPECT_FALSE(over.ok());
  EXPECT_NE(over.message().find("limits.nvidia.com/gpumem"), std::string::npos) << over.message();
  book_.Remove("team", "gpu-quota");
  EXPECT_FALSE(book_.HasQuota("team"));
}

// A limit that is not a non-negative integer (a quota written before the API server checked, or
// a fraction) is reported and skipped; the others still apply.
TEST_F(QuotaBookTest, AnUnusableLimitIsReportedAndTheRestApplies) {
  Status s = book_.Upsert(
      Quota({{"limits.nvidia.com/gpumem", "8000"}, {"limits.nvidia.com/gpucores", "1500m"}}));
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("limits.nvidia.com/gpucores=\"1500m\" is not a non-negative integer"),
            std::string::npos)
      << s.message();
  EXPECT_TRUE(book_.Check(ledger_, "team", "NVIDIA", 8000, 1000).ok()) << "cores not limited";
  EXPECT_FALSE(book_.Check(ledger_, "team", "NVIDIA", 8001, 0).ok());
}

}  // namespace
}  // namespace hami::extender
