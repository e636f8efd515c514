// The simulated kube-scheduler end to end: the in-process simulated API server, a fake HTTP(S)
// scheduler extender that records its calls and answers scripted results, and the driver (as a
// library, and once as the hami-sim-kube-scheduler binary). Hermetic: port 0, temp dirs. Waits are
// event-driven (tests/event_wait.h): conditions on API objects are re-checked on the API server's
// watch events, conditions on the driver's own state after each of its API exchanges or extender
// calls; the deadline only bounds a failing test.
#include <gtest/gtest.h>
#include <signal.h>
#include <stdlib.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "common/status.h"
#include "common/subprocess.h"
#include "k8s/api_error.h"
#include "k8s/config.h"
#include "k8s/object.h"
#include "k8s/rest_client.h"
#include "k8s/socket_transport.h"
#include "k8s/transport.h"
#include "k8s/typed.h"
#include "net/http_server.h"
#include "net/tls.h"
#include "sim/apiserver/api_server.h"
#include "sim/kubescheduler/config.h"
#include "sim/kubescheduler/kube_scheduler.h"
#include "tests/event_wait.h"

namespace hami::sim {
namespace {

using eventwait::ChangeSignal;
using k8s::Object;
using std::chrono::milliseconds;

// The drivers' API transport. KubeScheduler has no observer of its own, so this notifies `changed`
// wherever the state it reports (Stats, IsLeader, HasSynced) may just have changed: before a
// request leaves, after each streamed chunk is consumed (informers run their handlers, which update
// the scheduling queue, inside that call) and when an exchange ends. Every change the driver makes
// happens inside such a call or is followed by one (the Event after a cycle's outcome, the lease
// renewal after acquiring, the watch after an informer's first list) or by an extender call, which
// FakeExtender reports.
class NotifyingTransport : public k8s::Transport {
 public:
  NotifyingTransport(std::unique_ptr<k8s::Transport> inner, ChangeSignal& changed)
      : inner_(std::move(inner)), changed_(changed) {}

  Result<k8s::HttpResponse> Do(const k8s::HttpRequest& request) override {
    changed_.Notify();
    Result<k8s::HttpResponse> r = [&] {
      if (!request.on_body) return inner_->Do(request);
      k8s::HttpRequest observed = request;
      observed.on_body = [&](std::string_view chunk) {
        const bool more = request.on_body(chunk);
        changed_.Notify();
        return more;
      };
      return inner_->Do(observed);
    }();
    changed_.Notify();
    return r;
  }
  std::vector<Result<k8s::HttpResponse>> DoBatch(
      const std::vector<k8s::HttpRequest>& requests) override {
    changed_.Notify();
    std::vector<Result<k8s::HttpResponse>> r = inner_->DoBatch(requests);
    changed_.Notify();
    return r;
  }

 private:
  std::unique_ptr<k8s::Transport> inner_;
  ChangeSignal& changed_;
};

class TempDir {
 public:
  TempDir() {
    std::string tmpl = (std::filesystem::temp_directory_path() / "hami_ksched_XXXXXX").string();
    const char* made = ::mkdtemp(tmpl.data());
    path_ = made == nullptr ? std::string() : std::string(made);
  }
  ~TempDir() {
    std::error_code ec;
    if (!path_.empty()) std::filesystem::remove_all(path_, ec);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  std::string Write(const std::string& name, const std::string& text) const {
    std::string p = path_ + "/" + name;
    std::ofstream(p) << text;
    return p;
  }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

// A scheduler extender double on net::HttpServer. By default /filter passes every offered node
// (in the shape it was offered) and /bind creates the Binding through the API, as HAMi's
// extender does. Tests replace either behaviour and read the recorded request bodies.
class FakeExtender {
 public:
  using Handler = std::function<Object(const Object& args)>;

  // Notifies `called` after recording each call.
  FakeExtender(k8s::RestClient& api, bool tls, ChangeSignal& called) : api_(api), called_(called) {
    net::HttpServerOptions opts;
    if (tls) {
      Result<net::CertificatePem> pem =
          net::GenerateSelfSignedCertificate("fake-extender", {"localhost"}, {"127.0.0.1"});
      EXPECT_TRUE(pem.ok()) << pem.status().ToString();
      opts.certificate = net::CertificateSource::FromPem(*pem).value();
    }
    server_ = net::HttpServer::Create(opts).value();
    server_->Handle("POST", "/filter", [this](const net::HttpRequest& req, net::HttpResponse& res) {
      res.SetJson(200, Serve(req.body, &filter_calls_, filter_).dump());
    });
    server_->Handle("POST", "/bind", [this](const net::HttpRequest& req, net::HttpResponse& res) {
      res.SetJson(200, Serve(req.body, &bind_calls_, bind_).dump());
    });
    filter_ = PassAll;
    bind_ = [this](const Object& a) { return BindThroughApi(a); };
    Result<int> port = server_->Start();
    EXPECT_TRUE(port.ok()) << port.status().ToString();
    url_ = std::string(tls ? "https" : "http") + "://127.0.0.1:" + std::to_string(*port);
  }
  ~FakeExtender() { server_->Stop(); }

  const std::string& url() const { return url_; }

  void SetFilter(Handler h) {
    std::lock_guard<std::mutex> lock(mu_);
    filter_ = std::move(h);
  }
  void SetBind(Handler h) {
    std::lock_guard<std::mutex> lock(mu_);
    bind_ = std::move(h);
  }
  std::vector<Object> filter_calls() const {
    std::lock_guard<std::mutex> lock(mu_);
    return filter_calls_;
  }
  std::vector<Object> bind_calls() const {
    std::lock_guard<std::mutex> lock(mu_);
    return bind_calls_;
  }
  // Filter calls about pod `name`.
  size_t FilterCallsFor(const std::string& name) const {
    size_t n = 0;
    for (const Object& c : filter_calls()) n += k8s::GetString(c, "/Pod/metadata/name") == name;
    return n;
  }

  static Object PassAll(const Object& args) {
    if (args.contains("NodeNames")) return {{"nodenames", args["NodeNames"]}};
    return {{"nodes", args["Nodes"]}};
  }
  Object BindThroughApi(const Object& a) {
    Status s = k8s::BindPod(api_, a.value("PodNamespace", ""), a.value("PodName", ""),
                            a.value("PodUID", ""), a.value("Node", ""));
    if (!s.ok()) return {{"error", s.message()}};
    return Object::object();
  }

 private:
  Object Serve(const std::string& body, std::vector<Object>* calls, const Handler& handler) {
    Object args = Object::parse(body, nullptr, false);
    Handler h;
    {
      std::lock_guard<std::mutex> lock(mu_);
      calls->push_back(args);
      h = handler;
    }
    called_.Notify();
    return h(args);
  }

  k8s::RestClient& api_;
  ChangeSignal& called_;
  std::unique_ptr<net::HttpServer> server_;
  std::string url_;
  mutable std::mutex mu_;
  Handler filter_;                    // guarded by mu_
  Handler bind_;                      // guarded by mu_
  std::vector<Object> filter_calls_;  // guarded by mu_
  std::vector<Object> bind_calls_;    // guarded by mu_
};

class KubeSchedulerDriverTest : public ::testing::Test {
 protected:
  void SetUp() override {
    server_ = ApiServer::Start({}).value();
    kubeconfig_ = dir_.Write("kubeconfig", server_->Kubeconfig());
    client_ = k8s::RestClient::Create(ClientConfig()).value();
    const k8s::RestConfig cfg = ClientConfig();
    driver_client_ = std::make_unique<k8s::RestClient>(
        cfg,
        std::make_unique<NotifyingTransport>(
            k8s::NewTransportFor(cfg.server, cfg.tls, std::chrono::seconds(10)).value(),
            driver_changed_),
        client_->clock());
  }
  void TearDown() override {
    for (auto& d : drivers_) d->Stop();
    drivers_.clear();
    extenders_.clear();
    // Idle keep-alive connections of the test's clients would hold server workers until their
    // read timeout.
    driver_client_.reset();
    client_.reset();
    server_->Stop();
  }

  k8s::RestConfig ClientConfig() const {
    k8s::RestConfig cfg = k8s::ParseKubeconfig(server_->Kubeconfig(), dir_.path()).value();
    cfg.qps = 0;  // unlimited: tests measure behaviour, not the client's rate limit
    return cfg;
  }

  FakeExtender& AddExtender(bool tls = false) {
    extenders_.push_back(std::make_unique<FakeExtender>(*client_, tls, driver_changed_));
    return *extenders_.back();
  }

  // HAMi's chart configuration pointed at `ext`, without leader election unless asked.
  static std::string ConfigYaml(const FakeExtender& ext, const std::string& extender_extra,
                                bool leader_elect = false) {
    return "apiVersion: kubescheduler.config.k8s.io/v1\n"
           "kind: KubeSchedulerConfiguration\n"
           "leaderElection:\n"
           "  leaderElect: " +
           std::string(leader_elect ? "true" : "false") +
           "\n"
           "  resourceName: hami-scheduler\n"
           "  resourceNamespace: kube-system\n"
           "  leaseDuration: 3s\n"
           "  renewDeadline: 2s\n"
           "  retryPeriod: 1s\n"
           "profiles:\n"
           "- schedulerName: hami-scheduler\n"
           "extenders:\n"
           "- urlPrefix: " +
           ext.url() +
           "\n"
           "  filterVerb: filter\n"
           "  weight: 1\n"
           "  httpTimeout: 10s\n" +
           extender_extra;
  }

  KubeScheduler& StartDriver(const std::string& yaml, KubeSchedulerOptions opts = {}) {
    Result<KubeSchedulerConfig> cfg = ParseKubeSchedulerConfig(yaml);
    EXPECT_TRUE(cfg.ok()) << cfg.status().ToString();
    if (!opts.initial_backoff) opts.initial_backoff = milliseconds(50);
    if (!opts.max_backoff) opts.max_backoff = milliseconds(200);
    drivers_.push_back(std::make_unique<KubeScheduler>(*driver_client_, *cfg, opts));
    Status s = drivers_.back()->Start();
    EXPECT_TRUE(s.ok()) << s.ToString();
    return *drivers_.back();
  }

  void CreateNode(const std::string& name, Object labels = Object::object(),
                  bool unschedulable = false) {
    Object node = {{"apiVersion", "v1"},
                   {"kind", "Node"},
                   {"metadata", {{"name", name}, {"labels", labels}}},
                   {"spec", {{"unschedulable", unschedulable}}}};
    Result<Object> r = client_->Create(k8s::kNodes, "", node);
    ASSERT_TRUE(r.ok()) << r.status().ToString();
  }

  Object CreatePod(const std::string& name, const std::string& scheduler = "hami-scheduler",
                   const std::string& gpu = "1", Object node_selector = Object()) {
    Object container = {{"name", "c"}, {"image", "cuda"}};
    if (!gpu.empty()) container["resources"] = {{"limits", {{"nvidia.com/gpu", gpu}}}};
    Object pod = {
        {"apiVersion", "v1"},
        {"kind", "Pod"},
        {"metadata", {{"name", name}, {"namespace", "default"}}},
        {"spec", {{"schedulerName", scheduler}, {"containers", Object::array({container})}}}};
    if (node_selector.is_object()) pod["spec"]["nodeSelector"] = node_selector;
    Result<Object> r = client_->Create(k8s::kPods, "default", pod);
    EXPECT_TRUE(r.ok()) << r.status().ToString();
    return r.ok() ? *r : Object();
  }

  std::string NodeOf(const std::string& pod) {
    Result<Object> p = client_->Get(k8s::kPods, "default", pod);
    return p.ok() ? k8s::GetString(*p, "/spec/nodeName") : "";
  }

  // Waits for a condition on the drivers' state or the extenders' calls (see NotifyingTransport).
  bool WaitForDriver(const std::function<bool()>& done) {
    return driver_changed_.WaitUntil(done, eventwait::kDefaultTimeout);
  }
  // Waits for a condition on the pods (or the Events) in namespace default.
  bool WaitForPods(const std::function<bool()>& done) {
    return eventwait::WatchUntil(*client_, k8s::kPods, "default", done);
  }
  bool WaitForEvents(const std::function<bool()>& done) {
    return eventwait::WatchUntil(*client_, k8s::kEvents, "default", done);
  }

  bool WaitBound(const std::string& pod) {
    return WaitForPods([&] { return !NodeOf(pod).empty(); });
  }

  // Events about `pod` with `reason`, oldest first.
  std::vector<Object> Events(const std::string& pod, const std::string& reason) {
    k8s::ListOptions lo;
    lo.field_selector = "involvedObject.name=" + pod;
    Result<Object> list = client_->List(k8s::kEvents, "default", lo);
    std::vector<Object> out;
    if (!list.ok()) return out;
    for (const Object& e : (*list)["items"]) {
      if (e.value("reason", "") == reason) out.push_back(e);
    }
    return out;
  }

  bool WaitEvent(const std::string& pod, const std::string& reason, Object* first = nullptr) {
    bool ok = WaitForEvents([&] { return !Events(pod, reason).empty(); });
    if (ok && first != nullptr) *first = Events(pod, reason).front();
    return ok;
  }

  TempDir dir_;
  // Notified by the drivers' API client and by the fake extenders; outlives both.
  ChangeSignal driver_changed_;
  std::unique_ptr<ApiServer> server_;
  std::string kubeconfig_;
  std::unique_ptr<k8s::RestClient> client_;
  // The drivers' own client, so that their API traffic signals driver_changed_.
  std::unique_ptr<k8s::RestClient> driver_client_;
  std::vector<std::unique_ptr<FakeExtender>> extenders_;
  std::vector<std::unique_ptr<KubeScheduler>> drivers_;
};

TEST_F(KubeSchedulerDriverTest, FilterGetsNodeNamesAndBindVerbBindsThePod) {
  FakeExtender& ext = AddExtender();
  ext.SetFilter([](const Object&) {
    return Object{{"nodenames", {"node-b"}},
                  {"failedNodes",
                   {{"node-a", "CardInsufficientMemory"}, {"node-c", "CardInsufficientMemory"}}}};
  });
  for (const char* n : {"node-a", "node-b", "node-c"}) CreateNode(n);
  KubeScheduler& sched =
      StartDriver(ConfigYaml(ext, "  bindVerb: bind\n  nodeCacheCapable: true\n"));
  Object pod = CreatePod("p1");
  ASSERT_TRUE(WaitBound("p1"));
  EXPECT_EQ(NodeOf("p1"), "node-b");

  std::vector<Object> filters = ext.filter_calls();
  ASSERT_EQ(filters.size(), 1u);
  EXPECT_EQ(filters[0]["NodeNames"], Object::array({"node-a", "node-b", "node-c"}));
  EXPECT_FALSE(filters[0].contains("Nodes"));
  EXPECT_EQ(k8s::GetString(filters[0], "/Pod/metadata/name"), "p1");
  EXPECT_EQ(k8s::GetString(filters[0], "/Pod/metadata/uid"), k8s::Uid(pod));

  std::vector<Object> binds = ext.bind_calls();
  ASSERT_EQ(binds.size(), 1u);
  EXPECT_EQ(binds[0], Object({{"PodName", "p1"},
                              {"PodNamespace", "default"},
                              {"PodUID", k8s::Uid(pod)},
                              {"Node", "node-b"}}));

  Object ev;
  ASSERT_TRUE(WaitEvent("p1", "Scheduled", &ev));
  EXPECT_EQ(ev["type"], "Normal");
  EXPECT_EQ(ev["message"], "Successfully assigned default/p1 to node-b");
  EXPECT_EQ(k8s::GetString(ev, "/source/component"), "hami-scheduler");
  ASSERT_TRUE(WaitForDriver([&] { return sched.Stats().queue.assumed == 0; }));
  KubeSchedulerStats st = sched.Stats();
  EXPECT_EQ(st.scheduled, 1u);
  EXPECT_EQ(st.cycles, 1u);
  EXPECT_EQ(st.extender_filter_calls, 1u);
  EXPECT_EQ(st.extender_bind_calls, 1u);
  EXPECT_EQ(st.api_bind_calls, 0u);
  EXPECT_EQ(st.filter_latency.count(), 1u);
  EXPECT_EQ(st.scheduling_latency.count(), 1u);
  EXPECT_EQ(sched.Attempts("default/p1"), 1);
}

TEST_F(KubeSchedulerDriverTest, HttpsFilterGetsNodeObjectsAndDriverBindsWithoutBindVerb) {
  FakeExtender& ext = AddExtender(/*tls=*/true);
  ext.SetFilter([](const Object& args) {
    Object keep = Object::array();
    for (const Object& n : args["Nodes"]["items"]) {
      if (k8s::Name(n) == "node-c") keep.push_back(n);
    }
    return Object{{"nodes", {{"items", keep}}}, {"failedNodes", {{"node-a", "NodeUnfitPod"}}}};
  });
  CreateNode("node-a", {{"gpu", "a100"}});
  CreateNode("node-c", {{"gpu", "h100"}});
  KubeScheduler& sched = StartDriver(ConfigYaml(
      ext, "  enableHTTPS: true\n  tlsConfig:\n    insecure: true\n  nodeCacheCapable: false\n"));
  CreatePod("p1");
  ASSERT_TRUE(WaitBound("p1"));
  EXPECT_EQ(NodeOf("p1"), "node-c");

  std::vector<Object> filters = ext.filter_calls();
  ASSERT_EQ(filters.size(), 1u);
  EXPECT_FALSE(filters[0].contains("NodeNames"));
  ASSERT_EQ(filters[0]["Nodes"]["items"].size(), 2u);
  EXPECT_EQ(k8s::GetString(filters[0]["Nodes"]["items"][1], "/metadata/labels/gpu"), "h100");
  EXPECT_TRUE(ext.bind_calls().empty());
  ASSERT_TRUE(WaitEvent("p1", "Scheduled"));
  EXPECT_EQ(sched.Stats().api_bind_calls, 1u);
}

TEST_F(KubeSchedulerDriverTest, IgnoresOtherSchedulersAndFiltersNodesMinimally) {
  FakeExtender& ext = AddExtender();
  CreateNode("node-a", {{"pool", "gpu"}}, /*unschedulable=*/true);
  CreateNode("node-b", {{"pool", "cpu"}});
  CreateNode("node-c", {{"pool", "gpu"}});
  KubeScheduler& sched = StartDriver(ConfigYaml(ext, "  nodeCacheCapable: true\n"));
  CreatePod("theirs", "default-scheduler");
  CreatePod("mine", "hami-scheduler", "1", {{"pool", "gpu"}});
  ASSERT_TRUE(WaitBound("mine"));
  EXPECT_EQ(NodeOf("mine"), "node-c");
  // Only node-c survives the built-in checks, so only it is offered to the extender.
  std::vector<Object> filters = ext.filter_calls();
  ASSERT_EQ(filters.size(), 1u);
  EXPECT_EQ(filters[0]["NodeNames"], Object::array({"node-c"}));
  EXPECT_EQ(ext.FilterCallsFor("theirs"), 0u);
  EXPECT_EQ(NodeOf("theirs"), "");
  EXPECT_EQ(sched.Attempts("default/theirs"), 0);
  EXPECT_TRUE(Events("theirs", "FailedScheduling").empty());
}

TEST_F(KubeSchedulerDriverTest, PodsWithoutManagedResourcesSkipTheExtender) {
  FakeExtender& ext = AddExtender();
  CreateNode("node-a");
  KubeScheduler& sched =
      StartDriver(ConfigYaml(ext,
                             "  bindVerb: bind\n  nodeCacheCapable: true\n  managedResources:\n"
                             "  - name: nvidia.com/gpu\n    ignoredByScheduler: true\n"));
  CreatePod("cpu-only", "hami-scheduler", /*gpu=*/"");
  ASSERT_TRUE(WaitBound("cpu-only"));
  EXPECT_TRUE(ext.filter_calls().empty());
  EXPECT_TRUE(ext.bind_calls().empty());
  CreatePod("gpu");
  ASSERT_TRUE(WaitBound("gpu"));
  EXPECT_EQ(ext.FilterCallsFor("gpu"), 1u);
  EXPECT_EQ(ext.bind_calls().size(), 1u);
  EXPECT_EQ(sched.Stats().api_bind_calls, 1u);
}

TEST_F(KubeSchedulerDriverTest, ExtenderErrorRetriesWithBackoffUntilFixed) {
  FakeExtender& ext = AddExtender();
  std::atomic<bool> broken{true};
  ext.SetFilter([&](const Object& args) {
    if (broken) return Object{{"error", "node cache not synced"}};
    return FakeExtender::PassAll(args);
  });
  CreateNode("node-a");
  KubeScheduler& sched = StartDriver(ConfigYaml(ext, "  nodeCacheCapable: true\n"));
  CreatePod("p1");
  Object ev;
  ASSERT_TRUE(WaitEvent("p1", "FailedScheduling", &ev));
  EXPECT_EQ(ev["type"], "Warning");
  EXPECT_EQ(ev["message"], "node cache not synced");
  // It keeps retrying (with backoff) while the extender fails...
  ASSERT_TRUE(WaitForDriver([&] { return ext.FilterCallsFor("p1") >= 3; }));
  EXPECT_EQ(NodeOf("p1"), "");
  broken = false;
  // ...and succeeds once it is fixed.
  ASSERT_TRUE(WaitBound("p1"));
  // The driver counts the pod when its Binding call returns, which can be after the pod is
  // seen bound.
  ASSERT_TRUE(WaitForDriver([&] { return sched.Stats().scheduled == 1; }));
  KubeSchedulerStats st = sched.Stats();
  EXPECT_GE(st.errors, 3u);
  EXPECT_EQ(st.scheduled, 1u);
  EXPECT_EQ(sched.Attempts("default/p1"), static_cast<int>(st.errors) + 1);
  EXPECT_EQ(sched.Attempts("default/p1"), static_cast<int>(ext.FilterCallsFor("p1")));
}

TEST_F(KubeSchedulerDriverTest, IgnorableExtenderErrorsAreSkipped) {
  FakeExtender& ext = AddExtender();
  ext.SetFilter([](const Object&) { return Object{{"error", "down"}}; });
  CreateNode("node-a");
  KubeScheduler& sched =
      StartDriver(ConfigYaml(ext, "  nodeCacheCapable: true\n  ignorable: true\n"));
  CreatePod("p1");
  ASSERT_TRUE(WaitBound("p1"));
  EXPECT_EQ(sched.Stats().extender_filter_errors, 1u);
  EXPECT_EQ(sched.Stats().errors, 0u);
}

TEST_F(KubeSchedulerDriverTest, AllNodesFailedGivesAggregatedMessageUntilANodeEvent) {
  FakeExtender& ext = AddExtender();
  std::atomic<bool> full{true};
  ext.SetFilter([&](const Object& args) {
    if (!full) return FakeExtender::PassAll(args);
    return Object{{"nodenames", Object::array()},
                  {"failedNodes",
                   {{"node-a", "CardInsufficientMemory"},
                    {"node-b", "CardInsufficientMemory"},
                    {"node-c", "NodeUnfitPod"}}}};
  });
  for (const char* n : {"node-a", "node-b", "node-c"}) CreateNode(n);
  CreateNode("node-d", Object::object(), /*unschedulable=*/true);
  KubeScheduler& sched = StartDriver(ConfigYaml(ext, "  nodeCacheCapable: true\n"));
  CreatePod("p1");
  Object ev;
  ASSERT_TRUE(WaitEvent("p1", "FailedScheduling", &ev));
  EXPECT_EQ(ev["message"],
            "0/4 nodes are available: 1 NodeUnfitPod, 1 node(s) were unschedulable, "
            "2 CardInsufficientMemory.");
  // Unschedulable pods wait for a cluster event instead of spinning on backoff. (A cycle that
  // overlapped with one, such as the informers' initial node adds, is retried once after backoff.)
  ASSERT_TRUE(WaitForDriver([&] { return sched.Stats().queue.unschedulable == 1; }));
  const int attempts = sched.Attempts("default/p1");
  EXPECT_EQ(sched.Stats().unschedulable, static_cast<uint64_t>(attempts));
  full = false;
  CreateNode("node-e");
  ASSERT_TRUE(WaitBound("p1"));
  EXPECT_EQ(NodeOf("p1"), "node-a");
  EXPECT_EQ(sched.Attempts("default/p1"), attempts + 1);
}

TEST_F(KubeSchedulerDriverTest, RejectedBindingIsReportedAndRetried) {
  FakeExtender& ext = AddExtender();
  std::atomic<int> binds{0};
  ext.SetBind([&](const Object& a) {
    if (binds++ == 0) return Object{{"error", "node node-a is locked"}};
    return ext.BindThroughApi(a);
  });
  CreateNode("node-a");
  KubeScheduler& sched =
      StartDriver(ConfigYaml(ext, "  bindVerb: bind\n  nodeCacheCapable: true\n"));
  CreatePod("p1");
  ASSERT_TRUE(WaitBound("p1"));
  std::vector<Object> failed = Events("p1", "FailedScheduling");
  ASSERT_TRUE(WaitForEvents([&] {
    failed = Events("p1", "FailedScheduling");
    return !failed.empty();
  }));
  EXPECT_EQ(failed[0]["message"], "Binding rejected: node node-a is locked");
  EXPECT_EQ(ext.bind_calls().size(), 2u);
  // The pod shows its node as soon as the extender's Binding is written, a moment before the
  // extender answers and the driver counts the pod scheduled.
  ASSERT_TRUE(WaitForDriver([&] { return sched.Stats().scheduled == 1; }));
  KubeSchedulerStats st = sched.Stats();
  EXPECT_EQ(st.binding_failures, 1u);
  EXPECT_EQ(st.extender_bind_errors, 1u);
  EXPECT_EQ(st.scheduled, 1u);
}

TEST_F(KubeSchedulerDriverTest, PodDeletedWhileBackingOffIsDropped) {
  FakeExtender& ext = AddExtender();
  ext.SetFilter([](const Object&) { return Object{{"error", "always failing"}}; });
  CreateNode("node-a");
  KubeSchedulerOptions opts;
  opts.initial_backoff = milliseconds(10000);  // long enough to still be backing off below
  opts.max_backoff = milliseconds(10000);
  KubeScheduler& sched = StartDriver(ConfigYaml(ext, "  nodeCacheCapable: true\n"), opts);
  CreatePod("p1");
  ASSERT_TRUE(WaitEvent("p1", "FailedScheduling"));
  ASSERT_TRUE(WaitForDriver([&] { return sched.Stats().queue.backoff == 1; }));
  ASSERT_TRUE(client_->Delete(k8s::kPods, "default", "p1").ok());
  ASSERT_TRUE(WaitForDriver([&] {
    QueueSizes q = sched.Stats().queue;
    return q.active + q.backoff + q.unschedulable + q.in_flight + q.assumed == 0;
  }));
  EXPECT_EQ(sched.Attempts("default/p1"), 0);
  EXPECT_EQ(ext.FilterCallsFor("p1"), 1u);
  EXPECT_EQ(sched.Stats().cycles, 1u);
}

TEST_F(KubeSchedulerDriverTest, OnlyTheLeaderSchedules) {
  FakeExtender& ext = AddExtender();
  CreateNode("node-a");
  const std::string yaml = ConfigYaml(ext, "  nodeCacheCapable: true\n", /*leader_elect=*/true);
  KubeSchedulerOptions a_opts;
  a_opts.identity = "host-a_1";
  KubeScheduler& a = StartDriver(yaml, a_opts);
  ASSERT_TRUE(WaitForDriver([&] { return a.IsLeader(); }));
  KubeSchedulerOptions b_opts;
  b_opts.identity = "host-b_2";
  KubeScheduler& b = StartDriver(yaml, b_opts);
  ASSERT_TRUE(WaitForDriver([&] { return b.HasSynced(); }));

  CreatePod("p1");
  ASSERT_TRUE(WaitBound("p1"));
  Result<Object> lease = k8s::GetLease(*client_, "kube-system", "hami-scheduler");
  ASSERT_TRUE(lease.ok()) << lease.status().ToString();
  EXPECT_EQ(k8s::GetString(*lease, "/spec/holderIdentity"), "host-a_1");
  // Counted after the Binding call returns.
  ASSERT_TRUE(WaitForDriver([&] { return a.Stats().scheduled == 1; }));
  EXPECT_FALSE(b.IsLeader());
  // The follower tracked p1 as pending until its informer saw the binding, but never ran a cycle.
  ASSERT_TRUE(WaitForDriver([&] { return b.Stats().queue.active == 0; }));
  EXPECT_EQ(b.Stats().cycles, 0u);

  // The leader goes away (and gives the lease up); the other takes over.
  a.Stop();
  ASSERT_TRUE(WaitForDriver([&] { return b.IsLeader(); }));
  CreatePod("p2");
  ASSERT_TRUE(WaitBound("p2"));
  ASSERT_TRUE(WaitForDriver([&] { return b.Stats().scheduled == 1; }));
  EXPECT_EQ(a.Stats().scheduled, 1u);
  lease = k8s::GetLease(*client_, "kube-system", "hami-scheduler");
  ASSERT_TRUE(lease.ok());
  EXPECT_EQ(k8s::GetString(*lease, "/spec/holderIdentity"), "host-b_2");
}

TEST_F(KubeSchedulerDriverTest, ManyPodsWithSeveralWorkers) {
  FakeExtender& ext = AddExtender();
  for (const char* n : {"node-a", "node-b"}) CreateNode(n);
  KubeSchedulerOptions opts;
  opts.workers = 4;
  KubeScheduler& sched =
      StartDriver(ConfigYaml(ext, "  bindVerb: bind\n  nodeCacheCapable: true\n"), opts);
  constexpr int kPods = 40;
  for (int i = 0; i < kPods; ++i) CreatePod("p" + std::to_string(i));
  ASSERT_TRUE(WaitForDriver([&] { return sched.Stats().scheduled == kPods; }));
  for (int i = 0; i < kPods; ++i) EXPECT_FALSE(NodeOf("p" + std::to_string(i)).empty()) << i;
  KubeSchedulerStats st = sched.Stats();
  EXPECT_EQ(st.cycles, static_cast<uint64_t>(kPods));  // no pod was scheduled twice
  EXPECT_EQ(ext.bind_calls().size(), static_cast<size_t>(kPods));
  EXPECT_EQ(st.errors, 0u);
}

TEST_F(KubeSchedulerDriverTest, LargeClustersOfferARotatingSubsetOfNodes) {
  FakeExtender& ext = AddExtender();
  constexpr int kNodes = 150;  // kube-scheduler samples at least 100 nodes once there are 100+
  char name[32];
  for (int i = 0; i < kNodes; ++i) {
    std::snprintf(name, sizeof(name), "node-%03d", i);
    CreateNode(name);
  }
  StartDriver(ConfigYaml(ext, "  nodeCacheCapable: true\n"));
  CreatePod("p1");
  ASSERT_TRUE(WaitBound("p1"));
  CreatePod("p2");
  ASSERT_TRUE(WaitBound("p2"));
  std::vector<Object> calls = ext.filter_calls();
  ASSERT_EQ(calls.size(), 2u);
  ASSERT_EQ(calls[0]["NodeNames"].size(), 100u);
  EXPECT_EQ(calls[0]["NodeNames"][0], "node-000");
  EXPECT_EQ(calls[0]["NodeNames"][99], "node-099");
  // The second cycle continues where the first stopped, wrapping around.
  ASSERT_EQ(calls[1]["NodeNames"].size(), 100u);
  EXPECT_EQ(calls[1]["NodeNames"][0], "node-100");
  EXPECT_EQ(calls[1]["NodeNames"][50], "node-000");
  EXPECT_EQ(NodeOf("p2"), "node-100");
}

#ifdef HAMI_SIM_KUBE_SCHEDULER_PATH
std::vector<std::string> Env(const std::string& kubeconfig) {
  std::vector<std::string> env = {"KUBECONFIG=" + kubeconfig};
  if (const char* path = std::getenv("PATH")) env.push_back(std::string("PATH=") + path);
  return env;
}

TEST_F(KubeSchedulerDriverTest, BinaryRejectsBadConfigWithExitCode2) {
  std::string bad = dir_.Write("bad.yaml",
                               "apiVersion: kubescheduler.config.k8s.io/v9\n"
                               "kind: KubeSchedulerConfiguration\n");
  ProcessResult r = RunProcess({HAMI_SIM_KUBE_SCHEDULER_PATH, "--config=" + bad}, Env(kubeconfig_));
  EXPECT_EQ(r.exit_code, 2) << r.err;
  EXPECT_NE(r.err.find("apiVersion: unsupported version"), std::string::npos) << r.err;

  r = RunProcess({HAMI_SIM_KUBE_SCHEDULER_PATH}, Env(kubeconfig_));
  EXPECT_EQ(r.exit_code, 2) << r.err;
  EXPECT_NE(r.err.find("--config"), std::string::npos) << r.err;
}

TEST_F(KubeSchedulerDriverTest, BinarySchedulesUntilSigterm) {
  FakeExtender& ext = AddExtender();
  CreateNode("node-a");
  std::string cfg =
      dir_.Write("config.yaml", ConfigYaml(ext, "  bindVerb: bind\n  nodeCacheCapable: true\n") +
                                    "podInitialBackoffSeconds: 1\n");
  Subprocess proc({HAMI_SIM_KUBE_SCHEDULER_PATH, "--config=" + cfg, "-v=2", "--workers=2"},
                  Env(kubeconfig_));
  CreatePod("p1");
  ASSERT_TRUE(WaitBound("p1"));
  EXPECT_EQ(ext.bind_calls().size(), 1u);
  proc.Signal(SIGTERM);
  ProcessResult r = proc.Wait();
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.err.find("pod default/p1: bound to node-a"), std::string::npos) << r.err;
}
#endif

}  // namespace
}  // namespace hami::sim
