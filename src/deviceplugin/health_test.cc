#include "deviceplugin/health.h"

#include <gtest/gtest.h>

#include <condition_variable>
#include <mutex>

#include "deviceplugin/fake_gpu_driver.h"

namespace hami::deviceplugin {
namespace {

TEST(XidPolicy, DefaultsAndEnvironment) {
  std::vector<std::string> warnings;
  XidPolicy p = ParseXidPolicy(nullptr, nullptr, &warnings);
  EXPECT_TRUE(p.MakesUnhealthy(79));  // fallen off the bus
  EXPECT_TRUE(p.MakesUnhealthy(48));  // double-bit ECC
  for (uint64_t app : {13, 31, 43, 45, 68, 109}) EXPECT_FALSE(p.MakesUnhealthy(app)) << app;

  p = ParseXidPolicy("all", nullptr, &warnings);
  EXPECT_FALSE(p.MakesUnhealthy(79));
  p = ParseXidPolicy("xids", nullptr, &warnings);
  EXPECT_FALSE(p.MakesUnhealthy(79));

  p = ParseXidPolicy("79, 94", "31,13", &warnings);
  EXPECT_FALSE(p.MakesUnhealthy(79));
  EXPECT_FALSE(p.MakesUnhealthy(94));
  EXPECT_TRUE(p.MakesUnhealthy(31));
  EXPECT_TRUE(p.MakesUnhealthy(13));
  EXPECT_FALSE(p.MakesUnhealthy(43));
  EXPECT_TRUE(warnings.empty());

  p = ParseXidPolicy("79,oops,,-3", "x", &warnings);
  EXPECT_FALSE(p.MakesUnhealthy(79));
  ASSERT_EQ(warnings.size(), 3u);
  EXPECT_NE(warnings[0].find("\"oops\""), std::string::npos);
  EXPECT_NE(warnings[2].find("DP_ENABLE_HEALTHCHECKS"), std::string::npos);
}

// Collects the monitor's reports.
struct Reports {
  std::mutex mu;
  std::condition_variable cv;
  std::vector<std::pair<std::vector<std::string>, std::string>> got;
  HealthMonitor::OnUnhealthy Callback() {
    return [this](const std::vector<std::string>& u, const std::string& why) {
      std::lock_guard<std::mutex> l(mu);
      got.emplace_back(u, why);
      cv.notify_all();
    };
  }
  bool WaitFor(size_t n) {
    std::unique_lock<std::mutex> l(mu);
    return cv.wait_for(l, std::chrono::seconds(10), [&] { return got.size() >= n; });
  }
};

TEST(HealthMonitor, ReportsCriticalXidsOfKnownDevices) {
  FakeGpuDriver driver;
  driver.SetUnsupported({"GPU-c"});
  Reports reports;
  HealthMonitor m(driver, XidPolicy{}, reports.Callback(), std::chrono::milliseconds(20));
  Result<std::vector<std::string>> unsupported = m.Start({"GPU-a", "GPU-b", "GPU-c"});
  ASSERT_TRUE(unsupported.ok());
  EXPECT_EQ(*unsupported, std::vector<std::string>{"GPU-c"});
  EXPECT_EQ(m.Start({"GPU-a"}).status().code(), StatusCode::kFailedPrecondition);

  driver.Inject({"GPU-b", 31});  // application fault: ignored
  driver.Inject({"GPU-b", 79});
  driver.Inject({"GPU-zz", 48});  // a device we do not know: every GPU is suspect
  ASSERT_TRUE(reports.WaitFor(2));
  m.Stop();
  std::lock_guard<std::mutex> l(reports.mu);
  ASSERT_EQ(reports.got.size(), 2u);
  EXPECT_EQ(reports.got[0].first, std::vector<std::string>{"GPU-b"});
  EXPECT_EQ(reports.got[0].second, "XID 79");
  EXPECT_EQ(reports.got[1].first, (std::vector<std::string>{"GPU-a", "GPU-b", "GPU-c"}));
}

// Upstream's B13: an XID in one MIG instance (the event names its GPU and compute instance)
// is charged to that MIG device alone; the GPU's other instances stay healthy. One the driver
// charges to the GPU itself still marks the GPU.
TEST(HealthMonitor, AnXidInAMigInstanceIsChargedToThatInstanceOnly) {
  FakeGpuDriver driver;
  Reports reports;
  HealthMonitor m(driver, XidPolicy{}, reports.Callback(), std::chrono::milliseconds(20));
  ASSERT_TRUE(m.Start({"GPU-a", "GPU-b"}).ok());
  driver.Inject({"GPU-a", 48, "MIG-a1"});
  driver.Inject({"GPU-a", 43, "MIG-a2"});  // an application error, in an instance: ignored
  driver.Inject({"GPU-b", 79});
  ASSERT_TRUE(reports.WaitFor(2));
  m.Stop();
  std::lock_guard<std::mutex> l(reports.mu);
  ASSERT_EQ(reports.got.size(), 2u);
  EXPECT_EQ(reports.got[0].first, std::vector<std::string>{"MIG-a1"});
  EXPECT_NE(reports.got[0].second.find("XID 48"), std::string::npos) << reports.got[0].second;
  EXPECT_EQ(reports.got[1].first, std::vector<std::string>{"GPU-b"});
}

TEST(HealthMonitor, AFailingDriverWaitMarksEverything) {
  FakeGpuDriver driver;
  Reports reports;
  HealthMonitor m(driver, XidPolicy{}, reports.Callback(), std::chrono::milliseconds(20));
  ASSERT_TRUE(m.Start({"GPU-a", "GPU-b"}).ok());
  driver.SetWaitError(Status(StatusCode::kUnavailable, "GPU is lost"));
  ASSERT_TRUE(reports.WaitFor(1));
  m.Stop();
  EXPECT_EQ(reports.got[0].first, (std::vector<std::string>{"GPU-a", "GPU-b"}));
  EXPECT_NE(reports.got[0].second.find("GPU is lost"), std::string::npos);
}

TEST(HealthMonitor, DisabledChecksWatchNothing) {
  FakeGpuDriver driver;
  Reports reports;
  XidPolicy off;
  off.disabled = true;
  HealthMonitor m(driver, off, reports.Callback(), std::chrono::milliseconds(20));
  ASSERT_TRUE(m.Start({"GPU-a"}).ok());
  driver.Inject({"GPU-a", 79});
  m.Stop();  // no thread was started, nothing reported
  EXPECT_TRUE(reports.got.empty());
}

}  // namespace
}  // namespace hami::deviceplugin
