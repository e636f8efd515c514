// The README's main job, run as a user runs it (hami-sim-world, no terminal), with --keep so that
// the running world can be inspected: the seed's expected behaviour, scenario by scenario, from
// the facts the job collected; both exporters through promtool; the Grafana dashboard against
// what the exporters really export; a real Prometheus scraping a node monitor; and Ctrl-C ending
// every process the job started.
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <algorithm>
#include <functional>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <tuple>
#include <vector>

#include "common/subprocess.h"
#include "k8s/config.h"
#include "k8s/rest_client.h"
#include "k8s/socket_transport.h"
#include "tests/kube_bin.h"

namespace hami {
namespace {

namespace fs = std::filesystem;
using Json = nlohmann::json;

std::string Slurp(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

bool Have(const std::string& program) {
  return RunProcess({"/bin/sh", "-c", "command -v " + program}, {"PATH=/usr/bin:/bin"}).exit_code ==
         0;
}

Result<std::string> Get(k8s::SocketTransport& t, const std::string& url) {
  k8s::HttpRequest req;
  req.url = url;
  req.timeout = std::chrono::seconds(10);
  HAMI_ASSIGN_OR_RETURN(k8s::HttpResponse r, t.Do(req));
  if (r.status != 200)
    return Status(StatusCode::kUnavailable, url + ": HTTP " + std::to_string(r.status));
  return r.body;
}

// Asks `url` again every `every` until `accept` takes its answer or `timeout` passes: the answer
// accepted, else DeadlineExceeded naming the last answer or failure.
//
// The only wait in these tests that polls, and why it has to: what it waits for happens inside
// another process that announces it to no one. hami-scheduler's ResourceQuota informer applies a
// quota to its own cache, from which its metrics page is rendered when asked; Prometheus scrapes
// its targets on its own interval. Neither offers a watch or a notification, so asking again is
// the only way to learn that the state has arrived.
Result<std::string> PollPageUntil(k8s::SocketTransport& t, const std::string& url,
                                  const std::function<bool(const std::string&)>& accept,
                                  std::chrono::milliseconds every, std::chrono::seconds timeout) {
  const auto end = std::chrono::steady_clock::now() + timeout;
  for (;;) {
    Result<std::string> page = Get(t, url);
    if (page.ok() && accept(*page)) return page;
    if (std::chrono::steady_clock::now() >= end) {
      std::string last = page.ok() ? page->substr(0, 2000) : page.status().ToString();
      return DeadlineExceededError(url + " gave no acceptable answer in " +
                                   std::to_string(timeout.count()) + " s; the last: " + last);
    }
    std::this_thread::sleep_for(every);
  }
}

int FreePort() {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof(a);
  bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a));
  getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len);
  int port = ntohs(a.sin_port);
  close(fd);
  return port;
}

const Json* FindPod(const Json& report, const std::string& name) {
  for (const Json& p : report["pods"]) {
    if (p["name"] == name) return &p;
  }
  return nullptr;
}

const Json* FindGpu(const Json& report, const std::string& node, const std::string& uuid) {
  for (const Json& g : report["gpus"]) {
    if (g["node"] == node && g["uuid"] == uuid) return &g;
  }
  return nullptr;
}

// The GPU (model, NUMA node, memory) a pod's first container got as its `i`th device.
const Json& PodGpu(const Json& report, const Json& pod, size_t i = 0) {
  static const Json kNone = Json::object();
  const Json& gpus = pod["containers"][0]["gpus"];
  if (gpus.size() <= i) return kNone;
  const Json* g = FindGpu(report, pod["node"], gpus[i]);
  return g == nullptr ? kNone : *g;
}

// The seed's expected behaviour, scenario by scenario, from the facts of the job's report.
void ExpectSeedBehaviour(const Json& r) {
  // 1: the two inference services on the same card, 8192 MiB seen inside both, 50 % SM limit.
  const Json* a = FindPod(r, "inference-service-a");
  const Json* b = FindPod(r, "inference-service-b");
  ASSERT_TRUE(a && b);
  EXPECT_EQ((*a)["phase"], "Running");
  EXPECT_EQ((*a)["node"], (*b)["node"]);
  EXPECT_EQ((*a)["containers"][0]["gpus"], (*b)["containers"][0]["gpus"]);
  for (const Json* p : {a, b}) {
    EXPECT_EQ((*p)["containers"][0]["sees_mib"], 8192) << *p;
    EXPECT_EQ((*p)["containers"][0]["sm_limit_env"], "50") << *p;
    // The monitor reads the same quota from the container's region.
    EXPECT_EQ((*p)["containers"][0]["limit_bytes"], 8192.0 * 1048576) << *p;
    EXPECT_GT((*p)["containers"][0]["used_bytes"], 0) << *p;
    EXPECT_NEAR((*p)["containers"][0]["sm_util"].get<double>(), 50, 10)
        << "two tasks share: " << *p;
  }
  // 2: memory only, no SM-limit variable.
  const Json* mem = FindPod(r, "memory-only-isolation");
  ASSERT_TRUE(mem);
  EXPECT_EQ((*mem)["containers"][0]["sees_mib"], 4096);
  EXPECT_EQ((*mem)["containers"][0]["sm_limit_env"], "(unset)");
  // 3: an exclusive card: all its memory, nobody else on it.
  const Json* ex = FindPod(r, "training-job");
  ASSERT_TRUE(ex);
  const Json& exg = PodGpu(r, *ex);
  ASSERT_TRUE(exg.contains("memory_mib"));
  EXPECT_EQ((*ex)["containers"][0]["quota_mib"][0], exg["memory_mib"]);
  EXPECT_EQ((*ex)["containers"][0]["quota_cores"][0], 100);
  for (const Json& p : r["pods"]) {
    if (p["name"] == "training-job" || p["node"] != (*ex)["node"]) continue;
    for (const Json& c : p["containers"]) {
      for (const Json& u : c["gpus"]) EXPECT_NE(u, exg["uuid"]) << p["name"] << " shares it";
    }
  }
  // 4: 30 % of each model's memory.
  std::set<std::string> models;
  for (const Json& p : r["pods"]) {
    if (p["scenario"] != "04") continue;
    const Json& g = PodGpu(r, p);
    ASSERT_TRUE(g.contains("memory_mib")) << p;
    EXPECT_EQ(p["containers"][0]["quota_mib"][0], g["memory_mib"].get<int64_t>() * 30 / 100);
    EXPECT_EQ(p["containers"][0]["sees_mib"], p["containers"][0]["quota_mib"][0]);
    models.insert(g["type"]);
  }
  EXPECT_EQ(models.size(), 3u);
  // 5: spread over nodes (lowest score of the fitting nodes), binpack on the node's cards.
  const Json* bp = FindPod(r, "binpack-inference");
  ASSERT_TRUE(bp);
  EXPECT_EQ((*bp)["phase"], "Running");
  std::string why = (*bp)["why"];
  EXPECT_NE(why.find("find fit node(" + (*bp)["node"].get<std::string>() + ")"), std::string::npos)
      << why;
  // 6: types, and Pending when nothing matches.
  EXPECT_NE(PodGpu(r, *FindPod(r, "a100-only-task")).value("type", "").find("A100"),
            std::string::npos);
  std::string old = PodGpu(r, *FindPod(r, "exclude-old-gpu")).value("type", "");
  EXPECT_TRUE(!old.empty() && old.find("T4") == std::string::npos &&
              old.find("P100") == std::string::npos)
      << old;
  std::string sel = PodGpu(r, *FindPod(r, "selective-gpu")).value("type", "");
  EXPECT_EQ(sel.find("A100-SXM"), std::string::npos) << sel;
  const Json* h100 = FindPod(r, "h100-only-task");
  ASSERT_TRUE(h100);
  EXPECT_EQ((*h100)["phase"], "Pending");
  EXPECT_NE((*h100)["why"].get<std::string>().find("CardTypeMismatch"), std::string::npos);
  // 7: UUID pinning.
  EXPECT_EQ(PodGpu(r, *FindPod(r, "uuid-pinned-task"))["uuid"],
            "GPU-e3b5f6a0-1234-5678-abcd-ef1234567890");
  EXPECT_NE(PodGpu(r, *FindPod(r, "uuid-exclude-task"))["uuid"],
            "GPU-e3b5f6a0-1234-5678-abcd-ef1234567890");
  // 8: two cards on one NUMA node.
  const Json* numa = FindPod(r, "numa-aware-training");
  ASSERT_TRUE(numa);
  const Json &n0 = PodGpu(r, *numa, 0), &n1 = PodGpu(r, *numa, 1);
  ASSERT_TRUE(n0.contains("numa") && n1.contains("numa"));
  EXPECT_NE(n0["uuid"], n1["uuid"]);
  EXPECT_EQ(n0["numa"], n1["numa"]);

}

// Scenario 09, from the job's facts: dynamic MIG on the node that joined after the seed.
void ExpectMigBehaviour(const Json& r) {
  ASSERT_TRUE(r.contains("mig")) << "the report has no MIG scenario";
  const Json& mig = r["mig"];
  ASSERT_EQ(mig["node"], "mig-a100");
  std::map<std::string, Json> pods;
  for (const Json& p : mig["pods"]) pods[p["name"]] = p;
  std::vector<std::string> live;
  for (auto [name, profile, mib] : {std::tuple{"mig-small-1", "1g.10gb", 9728},
                                    std::tuple{"mig-small-2", "1g.10gb", 9728},
                                    std::tuple{"mig-medium", "3g.40gb", 40192},
                                    std::tuple{"mig-replacement", "1g.10gb", 9728}}) {
    ASSERT_TRUE(pods.count(name)) << name;
    const Json& p = pods[name];
    EXPECT_EQ(p["phase"], "Running") << p;
    EXPECT_EQ(p["node"], "mig-a100") << p;
    EXPECT_EQ(p["profile"], profile) << p;
    EXPECT_EQ(p["sees_mib"], mib) << p;
    EXPECT_EQ(p["mig_uuid"].get<std::string>().rfind("MIG-", 0), 0u) << p;
    if (std::string(name) != "mig-small-1") live.push_back(p["mig_uuid"]);
  }
  EXPECT_EQ(pods["mig-replacement"]["placement"], pods["mig-small-1"]["placement"]);
  EXPECT_NE(pods["mig-replacement"]["mig_uuid"], pods["mig-small-1"]["mig_uuid"]);
  EXPECT_EQ(pods["mig-overflow"]["phase"], "Pending");
  EXPECT_EQ(pods["mig-overflow"]["node"], "");
  EXPECT_NE(pods["mig-overflow"]["why"].get<std::string>().find("CardMigTopologyInfeasible"),
            std::string::npos)
      << pods["mig-overflow"];
  EXPECT_EQ(mig["deleted_mig_uuid"], pods["mig-small-1"]["mig_uuid"]);
  EXPECT_TRUE(mig["destroyed"].get<bool>());
  std::sort(live.begin(), live.end());
  EXPECT_EQ(mig["driver_devices"].get<std::vector<std::string>>(), live);
  EXPECT_EQ(mig["monitor_devices"].get<std::vector<std::string>>(), live);
}

class MainJobTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/hami-main-job-XXXXXX";
    ASSERT_NE(mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
  }
  void TearDown() override { fs::remove_all(dir_); }
  std::string dir_;
};

// The same job on a real control plane: etcd, kube-apiserver, kube-controller-manager and
// kube-scheduler from their Go modules (scripts/kube-tools.sh), the nodes still simulated.
TEST_F(MainJobTest, SeedScenariosOnARealControlPlane) {
  const std::string kube_bin = kube_pin::BinDir();
  if (kube_bin.empty()) {
    GTEST_FAIL() << "no Kubernetes binaries: configure with -DHAMI_KUBE_BIN=$(bash "
                    "scripts/kube-tools.sh)";
  }
  const std::string world = dir_ + "/world", json = dir_ + "/report.json";
  Subprocess job({HAMI_BUILD_DIR "/bin/hami-sim-world", "--control-plane", "real", "--kube-bin",
                  kube_bin, "--dir", world, "--report-json", json},
                 {"PATH=/usr/bin:/bin", "HOME=/tmp"});
  ProcessResult done = job.Wait();
  EXPECT_EQ(done.exit_code, 0) << done.out << done.err;
  EXPECT_NE(done.out.find("\nPASS: "), std::string::npos) << done.out << done.err;
  ASSERT_TRUE(fs::exists(json)) << done.out << done.err;
  ExpectSeedBehaviour(Json::parse(Slurp(json)));
  ExpectMigBehaviour(Json::parse(Slurp(json)));
  for (const auto& entry : fs::directory_iterator("/proc")) {
    std::string cmdline = Slurp(entry.path().string() + "/cmdline");
    EXPECT_EQ(cmdline.find(world), std::string::npos)
        << "still running after the job: " << entry.path() << " " << cmdline;
  }
}

// The job with Volcano (demo.sh --volcano): after the nine scenarios, Volcano's own scheduler
// places document 004's vGPU Job on a node in Volcano vGPU mode, and libvgpu.so holds the
// trainer to the 4096 MiB Volcano assigned (scenario 10).
TEST_F(MainJobTest, VolcanoScenarioOnARealControlPlane) {
  const std::string kube_bin = kube_pin::BinDir();
  const char* volcano_bin = HAMI_VOLCANO_BIN;
  if (kube_bin.empty() || *volcano_bin == '\0') {
    GTEST_FAIL() << "configure with -DHAMI_KUBE_BIN and Volcano's build (scripts/volcano-tools.sh)";
  }
  const std::string world = dir_ + "/world", json = dir_ + "/report.json";
  Subprocess job({HAMI_BUILD_DIR "/bin/hami-sim-world", "--control-plane", "real", "--kube-bin",
                  kube_bin, "--volcano-bin", volcano_bin, "--dir", world, "--report-json", json},
                 {"PATH=/usr/bin:/bin", "HOME=/tmp"});
  ProcessResult done = job.Wait();
  EXPECT_EQ(done.exit_code, 0) << done.out << done.err;
  ASSERT_TRUE(fs::exists(json)) << done.out << done.err;
  Json report = Json::parse(Slurp(json));
  ASSERT_TRUE(report.contains("volcano")) << done.out;
  const Json& v = report["volcano"];
  EXPECT_EQ(v["node"], "volcano-t4");
  EXPECT_EQ(v["pod_node"], "volcano-t4");
  EXPECT_EQ(v["phase"], "Running");
  EXPECT_EQ(v["bind_phase"], "success");
  EXPECT_EQ(v["quota_mib"], 4096);
  EXPECT_EQ(v["sees_mib"], 4096);
  EXPECT_EQ(v["limit_bytes"].get<double>(), 4096.0 * 1048576.0);
  int volcano_checks = 0;
  for (const Json& c : report["checks"]) {
    if (c["scenario"] != "10") continue;
    ++volcano_checks;
    EXPECT_TRUE(c["ok"].get<bool>()) << c["text"];
  }
  EXPECT_EQ(volcano_checks, 3);
}

TEST_F(MainJobTest, SeedScenariosExportersAndPrometheus) {
  const std::string world = dir_ + "/world", json = dir_ + "/report.json";
  Subprocess job(
      {HAMI_BUILD_DIR "/bin/hami-sim-world", "--keep", "--dir", world, "--report-json", json},
      {"PATH=/usr/bin:/bin", "HOME=/tmp"});
  std::string out = job.ReadUntil("Type \"stop\"");
  ASSERT_NE(out.find("Type \"stop\""), std::string::npos) << "the job ended early:\n" << out;
  EXPECT_NE(out.find("\nPASS: "), std::string::npos) << out;
  EXPECT_EQ(out.find("FAIL"), std::string::npos) << out;
  Json r = Json::parse(Slurp(json));

  ExpectSeedBehaviour(r);
  ExpectMigBehaviour(r);
  const Json* a = FindPod(r, "inference-service-a");
  ASSERT_TRUE(a);

  // --- Both exporters pass promtool; the dashboard uses only what they export -----------------
  auto transport = k8s::SocketTransport::Create({});
  ASSERT_TRUE(transport.ok());
  // A namespace quota on GPU memory, as an operator sets one, so that the scheduler's quota
  // families are on its page too.
  Result<k8s::RestConfig> rest = k8s::LoadKubeconfigFile(r["kubeconfig"]);
  ASSERT_TRUE(rest.ok()) << rest.status().ToString();
  Result<std::unique_ptr<k8s::RestClient>> client = k8s::RestClient::Create(*rest);
  ASSERT_TRUE(client.ok());
  k8s::Resource quotas{"v1", "resourcequotas", true};
  ASSERT_TRUE(
      (*client)
          ->Create(quotas, "default", Json::parse(R"({"apiVersion":"v1","kind":"ResourceQuota",
                               "metadata":{"name":"gpu-memory"},
                               "spec":{"hard":{"limits.nvidia.com/gpumem":"1000000"}}})"))
          .ok());
  Result<std::string> with_quota = PollPageUntil(
      **transport, r["scheduler_metrics_url"],
      [](const std::string& page) {
        return page.find("hami_resource_quota_limit{") != std::string::npos;
      },
      std::chrono::milliseconds(100), std::chrono::seconds(30));
  ASSERT_TRUE(with_quota.ok()) << "the quota never reached the page: "
                               << with_quota.status().ToString();
  std::vector<std::string> pages;
  std::vector<std::string> urls = {r["scheduler_metrics_url"]};
  for (const auto& [node, url] : r["monitor_urls"].items()) urls.push_back(url);
  for (size_t i = 0; i < urls.size(); ++i) {
    Result<std::string> page = Get(**transport, urls[i]);
    ASSERT_TRUE(page.ok()) << page.status().ToString();
    std::string file = dir_ + "/page" + std::to_string(i) + ".txt";
    std::ofstream(file) << *page;
    pages.push_back(file);
  }
  if (Have("promtool")) {
    for (const std::string& file : pages) {
      ProcessResult pt =
          RunProcess({"/bin/sh", "-c", "promtool check metrics < " + file}, {"PATH=/usr/bin:/bin"});
      EXPECT_EQ(pt.exit_code, 0) << file << ":\n" << pt.out << pt.err;
    }
  } else {
    ADD_FAILURE() << "promtool is missing: scripts/deps.sh installs Debian's prometheus package";
  }
  std::vector<std::string> check = {"/usr/bin/python3",
                                    HAMI_SOURCE_DIR "/tests/grafana_dashboard_check.py",
                                    HAMI_SOURCE_DIR "/deploy/grafana/hami-cpp.json"};
  check.insert(check.end(), pages.begin(), pages.end());
  ProcessResult dash = RunProcess(check, {"PATH=/usr/bin:/bin"});
  EXPECT_EQ(dash.exit_code, 0) << dash.out << dash.err;

  // --- A real Prometheus scrapes the node of inference-service-a ------------------------------
  if (Have("prometheus")) {
    std::string monitor = r["monitor_urls"][(*a)["node"].get<std::string>()];
    std::string target = monitor.substr(7, monitor.find("/metrics") - 7);  // host:port
    std::ofstream(dir_ + "/prometheus.yml")
        << "global:\n  scrape_interval: 1s\nscrape_configs:\n- job_name: hami-monitor\n"
           "  static_configs:\n  - targets: ['"
        << target << "']\n";
    int port = FreePort();
    Subprocess prom({"/usr/bin/prometheus", "--config.file=" + dir_ + "/prometheus.yml",
                     "--storage.tsdb.path=" + dir_ + "/tsdb",
                     "--web.listen-address=127.0.0.1:" + std::to_string(port)},
                    {"PATH=/usr/bin:/bin", "HOME=/tmp"});
    std::string query = "http://127.0.0.1:" + std::to_string(port) +
                        "/api/v1/query?query=hami_vgpu_memory_used_bytes%7Bpod%3D%22"
                        "inference-service-a%22%7D";
    Json result;
    Result<std::string> scraped = PollPageUntil(
        **transport, query,
        [&](const std::string& body) {
          Json j = Json::parse(body, nullptr, false);
          if (!j.is_object() || j["status"] != "success" || j["data"]["result"].empty()) {
            return false;
          }
          result = j["data"]["result"][0];
          return true;
        },
        std::chrono::milliseconds(250), std::chrono::seconds(60));
    prom.Signal(SIGTERM);
    ProcessResult pr = prom.Wait();
    ASSERT_TRUE(scraped.ok() && !result.is_null())
        << "Prometheus never returned the container's memory: " << scraped.status().ToString()
        << "\n"
        << pr.err.substr(pr.err.size() > 3000 ? pr.err.size() - 3000 : 0);
    EXPECT_EQ(result["metric"]["container"], "model-server");
    EXPECT_EQ(result["metric"]["zone"], "vGPU");
    EXPECT_DOUBLE_EQ(std::stod(result["value"][1].get<std::string>()),
                     (*a)["containers"][0]["used_bytes"].get<double>());
  } else {
    ADD_FAILURE() << "prometheus is missing: scripts/deps.sh installs Debian's prometheus package";
  }

  // --- Ctrl-C ends the job and every process it started ----------------------------------------
  job.Signal(SIGINT);
  ProcessResult done = job.Wait();
  EXPECT_EQ(done.exit_code, 0) << done.out << done.err;
  for (const auto& entry : fs::directory_iterator("/proc")) {
    std::string cmdline = Slurp(entry.path().string() + "/cmdline");
    EXPECT_EQ(cmdline.find(world), std::string::npos)
        << "still running after Ctrl-C: " << entry.path() << " " << cmdline;
  }
}

}  // namespace
}  // namespace hami
