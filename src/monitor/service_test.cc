// The monitor's service layer on fakes: the update runner on a FakeClock, the command line
// checked into its configuration, the wait for the hook path, and what the pod directory keeps
// of a pod.
#include <gtest/gtest.h>
#include <stdlib.h>

#include <condition_variable>
#include <filesystem>
#include <mutex>

#include "k8s/object.h"
#include "monitor/flags.h"
#include "monitor/pod_directory.h"
#include "monitor/runner.h"

namespace hami::monitor {
namespace {

namespace fs = std::filesystem;

class NoPods : public PodDirectory {
 public:
  bool Synced() const override { return true; }
  std::optional<PodRef> Find(const std::string&) const override { return std::nullopt; }
  std::map<std::string, PodRef> MigPods() const override { return {}; }
};

class TempDir {
 public:
  TempDir() {
    std::string t = (fs::temp_directory_path() / "hami-monitor-svc-XXXXXX").string();
    path_ = mkdtemp(t.data());
  }
  ~TempDir() {
    std::error_code ec;
    fs::remove_all(path_, ec);
  }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

TEST(MonitorRunner, UpdatesAtOnceThenOncePerIntervalOnTheClock) {
  TempDir dir;
  fs::create_directories(dir.path() + "/containers/pod-uid_main");
  NoPods pods;
  Monitor monitor({.containers_dir = dir.path() + "/containers"}, nullptr, &pods);
  FakeClock clock;
  int before = 0;
  Runner runner(monitor, clock,
                {.interval = std::chrono::seconds(5), .before_update = [&] { ++before; }});
  EXPECT_TRUE(runner.Step()) << "the first update is due at once";
  EXPECT_EQ(runner.updates(), 1u);
  EXPECT_EQ(before, 1);
  EXPECT_EQ(monitor.Snapshot().containers.size(), 1u) << "the update read the directory";
  EXPECT_FALSE(runner.Step()) << "the next one waits for the interval";
  clock.Advance(std::chrono::milliseconds(4999));
  EXPECT_FALSE(runner.Step());
  clock.Advance(std::chrono::milliseconds(1));
  EXPECT_TRUE(runner.Step());
  EXPECT_FALSE(runner.Step()) << "one update per interval, not a backlog";
  EXPECT_EQ(runner.updates(), 2u);
  EXPECT_EQ(before, 2);
}

TEST(MonitorRunner, StartRunsUpdatesOnItsThreadAndStopEndsThem) {
  TempDir dir;
  NoPods pods;
  Monitor monitor({.containers_dir = dir.path() + "/containers"}, nullptr, &pods);
  RealClock clock;
  std::mutex mu;
  std::condition_variable cv;
  int seen = 0;
  Runner runner(monitor, clock, {.interval = std::chrono::milliseconds(1), .before_update = [&] {
                                   std::lock_guard<std::mutex> l(mu);
                                   ++seen;
                                   cv.notify_all();
                                 }});
  runner.Start();
  {
    std::unique_lock<std::mutex> l(mu);
    ASSERT_TRUE(cv.wait_for(l, std::chrono::seconds(30), [&] { return seen >= 3; }));
  }
  runner.Stop();
  uint64_t after_stop = runner.updates();
  EXPECT_GE(after_stop, 2u);
  EXPECT_FALSE(runner.Step()) << "a stopped runner runs nothing";
  EXPECT_EQ(runner.updates(), after_stop);
}

MonitorFlags Given() {
  MonitorFlags f;
  f.hook_path = "/usr/local/vgpu";
  f.node_name = "node-a";
  return f;
}

// The informer keeps of each pod what the monitor reads: names and the MIG allocations.
TEST(MonitorPods, KeepContainerNamesAndTheMigAllocations) {
  Result<k8s::Object> pod = k8s::ParseObject(R"({
    "metadata": {"name": "p", "namespace": "ns", "uid": "u", "labels": {"a": "b"},
                 "annotations": {"hami.io/vgpu-mig-allocations": "[]", "other": "big"}},
    "spec": {"initContainers": [{"name": "setup", "image": "i"}],
             "containers": [{"name": "main", "image": "i"}, {"image": "nameless"}]},
    "status": {"phase": "Running"}})");
  ASSERT_TRUE(pod.ok());
  k8s::Object trimmed = TrimPodForMonitor(*pod);
  EXPECT_FALSE(trimmed.contains("status"));
  EXPECT_FALSE(trimmed["metadata"].contains("labels"));
  EXPECT_EQ(trimmed["metadata"]["annotations"].size(), 1u) << "only the MIG allocations";
  PodRef ref = PodRefOf(trimmed);
  EXPECT_EQ(ref.ns, "ns");
  EXPECT_EQ(ref.name, "p");
  EXPECT_EQ(ref.containers, std::vector<std::string>{"main"});
  EXPECT_EQ(ref.init_containers, std::vector<std::string>{"setup"});
  EXPECT_EQ(ref.mig_allocations, "[]");
  // Absent, or not a string: no allocations.
  pod = k8s::ParseObject(R"({"metadata": {"uid": "u", "annotations":
                               {"hami.io/vgpu-mig-allocations": 7}}, "spec": 1})");
  ASSERT_TRUE(pod.ok());
  ref = PodRefOf(TrimPodForMonitor(*pod));
  EXPECT_TRUE(ref.mig_allocations.empty());
  EXPECT_TRUE(ref.containers.empty());
  ref = PodRefOf(TrimPodForMonitor(k8s::Object::object()));
  EXPECT_TRUE(ref.mig_allocations.empty());
}

TEST(MonitorFlags, DefaultsGiveUpstreamsPortAndIntervals) {
  Result<MonitorConfig> c = MonitorConfigFromFlags(Given());
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_EQ(c->http.host, "0.0.0.0") << "\":9394\" listens on every address";
  EXPECT_EQ(c->http.port, 9394);
  EXPECT_EQ(c->update_interval, std::chrono::seconds(5));
  EXPECT_EQ(c->hook_wait, std::chrono::seconds(30));
  EXPECT_EQ(c->resync_delay, std::chrono::minutes(5));
  EXPECT_TRUE(c->feedback);
  EXPECT_EQ(c->nvml_library, "libnvidia-ml.so.1");
}

TEST(MonitorFlags, DefaultsComeFromTheEnvironment) {
  setenv("HOOK_PATH", "/hook", 1);
  setenv("NODE_NAME", "node-x", 1);
  setenv("HAMI_RESYNC_INTERVAL", "90s", 1);
  MonitorFlags f = DefaultMonitorFlags();
  unsetenv("HOOK_PATH");
  unsetenv("NODE_NAME");
  unsetenv("HAMI_RESYNC_INTERVAL");
  EXPECT_EQ(f.hook_path, "/hook");
  EXPECT_EQ(f.node_name, "node-x");
  Result<MonitorConfig> c = MonitorConfigFromFlags(f);
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_EQ(c->resync_delay, std::chrono::seconds(90));
}

TEST(MonitorFlags, EachMistakeIsNamed) {
  struct Case {
    std::function<void(MonitorFlags&)> change;
    std::string names;
  };
  std::vector<Case> cases = {
      {[](MonitorFlags& f) { f.hook_path.clear(); }, "HOOK_PATH"},
      {[](MonitorFlags& f) { f.node_name.clear(); }, "NODE_NAME"},
      {[](MonitorFlags& f) { f.update_interval = "0s"; }, "--update-interval"},
      {[](MonitorFlags& f) { f.update_interval = "often"; }, "--update-interval"},
      {[](MonitorFlags& f) { f.hook_wait = "-1s"; }, "--hook-path-wait"},
      {[](MonitorFlags& f) { f.resync = "5 minutes"; }, "resync interval"},
      {[](MonitorFlags& f) { f.metrics_bind = "host:port"; }, "--metrics-bind-address"},
      {[](MonitorFlags& f) { f.limits.idle_timeout = "0s"; }, "--http-idle-timeout"},
  };
  for (const Case& c : cases) {
    MonitorFlags f = Given();
    c.change(f);
    Result<MonitorConfig> r = MonitorConfigFromFlags(f);
    ASSERT_FALSE(r.ok()) << c.names;
    EXPECT_NE(r.status().message().find(c.names), std::string::npos) << r.status().ToString();
  }
  MonitorFlags f = Given();
  f.no_feedback = true;
  f.metrics_bind = "127.0.0.1:0";
  Result<MonitorConfig> r = MonitorConfigFromFlags(f);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_FALSE(r->feedback);
  EXPECT_EQ(r->http.host, "127.0.0.1");
  EXPECT_EQ(r->http.port, 0);
}

TEST(AwaitHookPath, AnExistingDirectoryNeedsNoWait) {
  TempDir dir;
  FakeClock clock;
  EXPECT_TRUE(AwaitHookPath(dir.path(), std::chrono::seconds(30), clock).ok());
  EXPECT_EQ(clock.total_slept(), Duration(0));
}

TEST(AwaitHookPath, AMissingOneFailsAfterTheWaitWithWhatItMustBe) {
  TempDir dir;
  FakeClock clock;
  Status s = AwaitHookPath(dir.path() + "/vgpu", std::chrono::seconds(30), clock);
  EXPECT_EQ(s.code(), StatusCode::kFailedPrecondition);
  EXPECT_NE(s.message().find("HOOK_PATH"), std::string::npos) << s.ToString();
  EXPECT_GE(clock.total_slept(), Duration(std::chrono::seconds(30)));
  EXPECT_LE(clock.total_slept(), Duration(std::chrono::milliseconds(30200)));
  FakeClock no_wait;
  EXPECT_FALSE(AwaitHookPath(dir.path() + "/vgpu", Duration(0), no_wait).ok());
  EXPECT_EQ(no_wait.total_slept(), Duration(0));
}

}  // namespace
}  // namespace hami::monitor
