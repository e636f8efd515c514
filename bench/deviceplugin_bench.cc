// deviceplugin_bench: the device plugin as kubelet sees it, in one process but over the real
// transports: the simulated API server on loopback HTTP, PluginService + GrpcPlugin on a unix
// socket, the simulated kubelet's device manager calling it over gRPC, and NVML of the simulated
// driver (8 GPUs) loaded at run time.
//
//   build/bin/deviceplugin_bench [--allocations N] [--volcano]
//
// Prints the Allocate latency as kubelet measures it (pod lookup through the node lock, the
// consumed annotation and bind phase written, the lock released: five API round trips), and the
// time from an XID posted on the simulated driver to the GPU's replicas turning Unhealthy in
// ListAndWatch. With --volcano the plugin serves Volcano's vGPU protocol instead
// (volcano.sh/vgpu-number, gpuMemoryFactor 64) and the pods carry Volcano's annotations and its
// `hamivgpu` node lock: the pod list of the node, the consumed annotation with bind phase, the
// node read and the lock released (four round trips).
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "common/go_flags.h"
#include "common/log.h"
#include "common/subprocess.h"
#include "deviceplugin/grpc_plugin.h"
#include "deviceplugin/nvml_driver.h"
#include "deviceplugin/plugin_service.h"
#include "deviceplugin/runner.h"
#include "deviceplugin/volcano_devices.h"
#include "k8s/object.h"
#include "k8s/typed.h"
#include "sim/apiserver/api_server.h"
#include "sim/kubelet/device_manager.h"

namespace {

using namespace hami;  // NOLINT(build/namespaces): a benchmark driver
using Json = nlohmann::json;
using SteadyClock = std::chrono::steady_clock;

double Ms(SteadyClock::duration d) { return std::chrono::duration<double, std::milli>(d).count(); }

void Report(const char* what, std::vector<double> v) {
  std::sort(v.begin(), v.end());
  auto q = [&](double p) { return v[std::min(v.size() - 1, static_cast<size_t>(p * v.size()))]; };
  std::printf("%-34s n=%zu  p50=%.2f ms  p90=%.2f ms  p99=%.2f ms  max=%.2f ms\n", what, v.size(),
              q(0.5), q(0.9), q(0.99), v.back());
}

}  // namespace

int main(int argc, char** argv) {
  int allocations = 300;
  bool volcano = false;
  CLI::App app{
      "deviceplugin_bench: Allocate latency of the device plugin under a simulated kubelet"};
  app.name("deviceplugin_bench");
  app.add_option("--allocations", allocations, "Allocate calls to time")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  app.add_flag("--volcano", volcano, "serve Volcano's vGPU protocol");
  if (std::optional<int> exit = hami::ParseGoStyleFlags(app, argc, argv)) return *exit;
  log::SetSink([](log::Level l, std::string_view line) {
    if (l != log::Level::kInfo) std::fprintf(stderr, "%.*s\n", int(line.size()), line.data());
  });
  char tmpl[] = "/tmp/dp-bench-XXXXXX";
  std::string dir = mkdtemp(tmpl);
  std::string conf;
  for (int i = 0; i < 8; ++i) {
    conf += "[device]\nname = NVIDIA H100 80GB HBM3\nmemory = 80Gi\nnuma_node = " +
            std::to_string(i / 4) + "\n";
  }
  std::ofstream(dir + "/gpu.conf") << conf;
  setenv("HAMI_SIM_CONFIG", (dir + "/gpu.conf").c_str(), 1);
  setenv("HAMI_SIM_STATE", (dir + "/gpu-state").c_str(), 1);

  auto api = sim::ApiServer::Start({}).value();
  k8s::RestConfig cfg;
  cfg.server = api->url();
  cfg.qps = 0;
  auto client = k8s::RestClient::Create(cfg).value();
  Json node = {{"apiVersion", "v1"}, {"kind", "Node"}, {"metadata", {{"name", "node-a"}}}};
  (void)client->Create(k8s::kNodes, "", node).value();

  auto driver = deviceplugin::NvmlDriver::Open({}).value();
  deviceplugin::PluginOptions o;
  o.node_name = "node-a";
  o.allocation.hook_path = dir + "/hook";
  o.health_wait_slice = std::chrono::milliseconds(500);
  if (volcano) {
    deviceplugin::VolcanoSettings v;
    v.memory_factor = 64;  // 8 x 80 GiB in 10,240 memory IDs
    o.resource_name = v.count_resource;
    o.volcano = v;
  }
  const std::string resource = o.resource_name;
  deviceplugin::PluginService service(*client, *driver, o);
  if (Status s = service.Start(); !s.ok()) {
    std::fprintf(stderr, "%s\n", s.ToString().c_str());
    return 1;
  }
  auto kubelet = sim::DeviceManager::Start(dir + "/dp").value();
  deviceplugin::GrpcPlugin plugin(service, {.plugin_dir = dir + "/dp"});
  deviceplugin::PluginRunner runner(plugin);
  (void)runner.Start();
  kubelet->WaitFor(
      [&](const auto& r) {
        return r.count(resource) && r.at(resource).devices.size() == 80;
      },
      std::chrono::seconds(10));
  auto inventory = driver->Discover().value();

  // Allocate: a pod as hami-scheduler leaves it at bind, then kubelet's Allocate.
  std::vector<double> lat;
  for (int i = 0; i < allocations; ++i) {
    std::string name = "p" + std::to_string(i);
    const std::string& uuid = inventory.gpus[static_cast<size_t>(i % 8)].uuid;
    Json pod;
    pod["apiVersion"] = "v1";
    pod["kind"] = "Pod";
    pod["metadata"]["name"] = name;
    Json& a = pod["metadata"]["annotations"];
    pod["spec"]["nodeName"] = "node-a";
    pod["spec"]["containers"] = Json::array({{{"name", "main"}}});
    if (volcano) {  // as Volcano's deviceshare plugin leaves it at bind
      a["volcano.sh/vgpu-node"] = "node-a";
      a["volcano.sh/vgpu-time"] = std::to_string(1700000000 + i);
      a["volcano.sh/vgpu-ids-new"] = uuid + ",NVIDIA,16,10:";
      a["volcano.sh/devices-to-allocate"] = uuid + ",NVIDIA,16,10:";
      a["volcano.sh/bind-phase"] = "allocating";
      pod["spec"]["containers"][0]["resources"]["limits"] = {{"volcano.sh/vgpu-number", "1"},
                                                             {"volcano.sh/vgpu-memory", "16"}};
      pod["status"]["phase"] = "Pending";
    } else {
      a["hami.io/vgpu-node"] = "node-a";
      a["hami.io/vgpu-devices-to-allocate"] = uuid + ",NVIDIA,1024,10:;";
      a["hami.io/vgpu-devices-allocated"] = uuid + ",NVIDIA,1024,10:;";
      a["hami.io/bind-phase"] = "allocating";
      a["hami.io/bind-time"] = "1700000000";
    }
    std::string uid = k8s::Uid(client->Create(k8s::kPods, "default", pod).value());
    const std::string lock_key = volcano ? "hamivgpu" : "hami.io/mutex.lock";
    const std::string lock = volcano ? "2026-11-24T10:00:00Z"
                                     : "2026-11-24T10:00:00Z,default," + name;
    (void)k8s::PatchNodeAnnotations(*client, "node-a", {{lock_key, lock}}).value();
    auto t0 = SteadyClock::now();
    auto r = kubelet->AllocatePod(uid, resource, {{"main", false, 1}});
    lat.push_back(Ms(SteadyClock::now() - t0));
    if (!r.ok()) {
      std::fprintf(stderr, "allocation %d: %s\n", i, r.status().ToString().c_str());
      return 1;
    }
    kubelet->FreePod(uid);  // the pod "finished": its slot is free for the next one
    // Volcano's agent lists the node's pods at every Allocate: keep the list at one node's size.
    if (volcano) {
      k8s::DeleteOptions now;
      now.grace_period_seconds = 0;  // no kubelet here confirms a graceful deletion
      (void)client->Delete(k8s::kPods, "default", name, now);
    }
  }
  Report("Allocate (kubelet -> plugin -> API)", lat);

  // XID -> Unhealthy in ListAndWatch, one GPU after another.
  std::vector<double> xid, after_exit;
  for (int g = 0; g < 8; ++g) {
    std::string prefix = inventory.gpus[static_cast<size_t>(g)].uuid + "-";
    auto t0 = SteadyClock::now();
    ProcessResult r = RunProcess({HAMI_SIMCTL, "--state", dir + "/gpu-state", "inject-xid",
                                  "--device", std::to_string(g), "--xid", "79"},
                                 {"HAMI_SIM_CONFIG=" + dir + "/gpu.conf"});
    auto injected = SteadyClock::now();
    if (r.exit_code != 0) {
      std::fprintf(stderr, "inject-xid: %s\n", r.err.c_str());
      return 1;
    }
    bool seen = kubelet->WaitFor(
        [&](const auto& res) {
          for (const sim::KubeletDevice& d : res.at(resource).devices) {
            if (d.id.rfind(prefix, 0) == 0 && !d.healthy) return true;
          }
          return false;
        },
        std::chrono::seconds(10));
    if (!seen) {
      std::fprintf(stderr, "GPU %d never turned unhealthy\n", g);
      return 1;
    }
    auto now = SteadyClock::now();
    xid.push_back(Ms(now - t0));
    after_exit.push_back(Ms(now - injected));
  }
  // The XID is posted while hami-simctl runs (a process start of ~10 ms): the first line bounds
  // the time from above, the second from below.
  Report("XID -> Unhealthy (from simctl start)", xid);
  Report("XID -> Unhealthy (from simctl exit)", after_exit);
  runner.Stop();
  service.Stop();
  kubelet->Stop();
  api->Stop();
  std::filesystem::remove_all(dir);
  return 0;
}
