// The device plugin service on its real transport: PluginService + GrpcPlugin + PluginRunner
// against the simulated API server and the simulated kubelet's device manager, talking gRPC over
// unix sockets. The GPU driver is the in-memory fake (nvml_driver_test covers NVML itself).

// Before gRPC's headers: Abseil (which they include) defines the same annotation macros, and a
// redefinition in a system header is silent where ours after it would not be.
#include "common/thread_annotations.h"
#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <chrono>
#include <condition_variable>
#include <filesystem>

#include "device/node_registration.h"
#include "deviceplugin/fake_gpu_driver.h"
#include "deviceplugin/grpc_plugin.h"
#include "deviceplugin/kubelet_plugins.h"
#include "deviceplugin/plugin_service.h"
#include "deviceplugin/runner.h"
#include "deviceplugin/v1beta1/api.grpc.pb.h"
#include "k8s/api_error.h"
#include "k8s/object.h"
#include "k8s/typed.h"
#include "sim/apiserver/api_server.h"
#include "sim/kubelet/device_manager.h"

namespace hami::deviceplugin {
namespace {

using Json = nlohmann::json;
using SteadyClock = std::chrono::steady_clock;

constexpr const char* kGpu0 = "GPU-aaaaaaaa-0000-4000-8000-000000000000";
constexpr const char* kGpu1 = "GPU-aaaaaaaa-0000-4000-8000-000000000001";
constexpr const char* kNode = "node-a";
constexpr const char* kResource = "nvidia.com/gpu";

Inventory TwoGpus() {
  Inventory inv;
  for (uint32_t i = 0; i < 2; ++i) {
    GpuInfo g;
    g.index = i;
    g.uuid = i == 0 ? kGpu0 : kGpu1;
    g.name = "NVIDIA A100-SXM4-80GB";
    g.memory_bytes = uint64_t{80} << 30;
    g.numa_node = static_cast<int>(i);
    inv.gpus.push_back(g);
  }
  inv.pairs = {{0, 1, 50, 12, false}};
  return inv;
}

// How long a wait for an event may take before the test fails instead of hanging.
constexpr std::chrono::seconds kDeadline(10);

using Stats = PluginService::Stats;

class PluginTest : public ::testing::Test {
 protected:
  void SetUp() override { Boot(false); }

  void Boot(bool preferred, hami::Clock* clock = nullptr) {
    char tmpl[] = "/tmp/dp-test-XXXXXX";
    ASSERT_NE(mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
    api_ = sim::ApiServer::Start({}).value();
    k8s::RestConfig cfg;
    cfg.server = api_->url();
    cfg.timeout = std::chrono::seconds(5);
    client_ = k8s::RestClient::Create(cfg).value();
    Json node = {{"apiVersion", "v1"}, {"kind", "Node"}, {"metadata", {{"name", kNode}}}};
    ASSERT_TRUE(client_->Create(k8s::kNodes, "", node).ok());

    driver_ = std::make_unique<FakeGpuDriver>(TwoGpus());
    PluginOptions o;
    o.node_name = kNode;
    o.settings.device_split_count = 4;
    o.settings.enable_get_preferred_allocation = preferred;
    o.topology_score = true;
    o.allocation.hook_path = dir_ + "/hook";
    o.allocation.libvgpu_file = "libvgpu.so.test";
    o.allocation.lib_cuda_log_level = 1;
    o.health_wait_slice = std::chrono::milliseconds(20);
    service_ = std::make_unique<PluginService>(*client_, *driver_, o, clock);
    ASSERT_TRUE(service_->Start().ok());

    kubelet_dir_ = dir_ + "/device-plugins";
    kubelet_ = sim::DeviceManager::Start(kubelet_dir_).value();
    plugin_ = std::make_unique<GrpcPlugin>(
        *service_,
        GrpcPluginOptions{.plugin_dir = kubelet_dir_, .preferred_allocation = preferred});
    runner_ = std::make_unique<PluginRunner>(*plugin_, std::chrono::milliseconds(100),
                                             [this](uint64_t n) {
                                               MutexLock lock(reg_mu_);
                                               registered_ = n;
                                               reg_cv_.notify_all();
                                             });
    ASSERT_TRUE(runner_->Start().ok());
    ASSERT_TRUE(kubelet_->WaitFor(
        [](const auto& r) { return r.count(kResource) && r.at(kResource).devices.size() == 8; },
        std::chrono::seconds(10)));
  }

  void TearDown() override {
    runner_.reset();
    plugin_.reset();
    if (kubelet_) kubelet_->Stop();
    service_.reset();
    if (api_) api_->Stop();
    std::filesystem::remove_all(dir_);
  }

  // A pod as hami-scheduler leaves it at bind: placement annotations, bind phase allocating,
  // bound to the node, holding the node lock.
  void CreateBoundPod(const std::string& name, const std::vector<std::string>& containers,
                      const std::string& to_allocate, const std::string& init = "") {
    Json pod;
    pod["apiVersion"] = "v1";
    pod["kind"] = "Pod";
    pod["metadata"]["name"] = name;
    pod["metadata"]["namespace"] = "default";
    Json& a = pod["metadata"]["annotations"];
    a["hami.io/vgpu-node"] = kNode;
    a["hami.io/vgpu-time"] = "1700000000";
    a["hami.io/vgpu-devices-to-allocate"] = to_allocate;
    a["hami.io/vgpu-devices-allocated"] = to_allocate;
    a["hami.io/bind-phase"] = "allocating";
    a["hami.io/bind-time"] = "1700000001";
    pod["spec"]["nodeName"] = kNode;
    if (!init.empty()) pod["spec"]["initContainers"] = Json::array({{{"name", init}}});
    for (const std::string& c : containers) pod["spec"]["containers"].push_back({{"name", c}});
    ASSERT_TRUE(client_->Create(k8s::kPods, "default", pod).ok());
    ASSERT_TRUE(
        k8s::PatchNodeAnnotations(*client_, kNode,
                                  {{"hami.io/mutex.lock", "2026-11-24T10:00:00Z,default," + name}})
            .ok());
  }

  Json Pod(const std::string& name) { return k8s::GetPod(*client_, "default", name).value(); }
  std::string PodAnnotation(const std::string& name, const std::string& key) {
    Json p = Pod(name);
    return p["metadata"]["annotations"].value(key, "");
  }
  std::string NodeAnnotation(const std::string& key) {
    Json n = k8s::GetNode(*client_, kNode).value();
    return n["metadata"].contains("annotations") ? n["metadata"]["annotations"].value(key, "") : "";
  }
  std::string Uid(const std::string& name) { return k8s::Uid(Pod(name)); }

  std::string dir_, kubelet_dir_;
  std::unique_ptr<sim::ApiServer> api_;
  std::unique_ptr<k8s::RestClient> client_;
  std::unique_ptr<FakeGpuDriver> driver_;
  std::unique_ptr<PluginService> service_;
  std::unique_ptr<sim::DeviceManager> kubelet_;
  std::unique_ptr<GrpcPlugin> plugin_;
  // Registrations the runner announced (declared before runner_, which calls into them).
  Mutex reg_mu_;
  std::condition_variable reg_cv_;
  uint64_t registered_ GUARDED_BY(reg_mu_) = 0;
  std::unique_ptr<PluginRunner> runner_;
};

TEST_F(PluginTest, RegistersTheNodeAndServesKubelet) {
  // Counted once the API server has accepted the write.
  ASSERT_TRUE(service_->WaitForStats(
      [](const Stats& s) { return s.registrations_published >= 1; }, kDeadline));
  Result<std::vector<device::DeviceInfo>> devs =
      device::DecodeNodeDevices(NodeAnnotation("hami.io/node-nvidia-register"));
  ASSERT_TRUE(devs.ok()) << devs.status().ToString();
  ASSERT_EQ(devs->size(), 2u);
  EXPECT_EQ((*devs)[0].id, kGpu0);
  EXPECT_EQ((*devs)[0].count, 4);
  EXPECT_EQ((*devs)[0].devmem, 81920);
  EXPECT_EQ((*devs)[1].numa, 1);
  EXPECT_TRUE((*devs)[1].health);
  EXPECT_NE(NodeAnnotation("hami.io/node-nvidia-score").find("\"" + std::string(kGpu1) + "\":1210"),
            std::string::npos);
  sim::ResourceState st = kubelet_->Resources().at(kResource);
  EXPECT_TRUE(st.connected);
  EXPECT_FALSE(st.preferred_allocation);
  EXPECT_EQ(st.Allocatable(), 8);
  EXPECT_EQ(st.devices[0].id, std::string(kGpu0) + "-0");
  EXPECT_EQ(st.devices[0].numa_node, -1);  // enableNumaTopology is off
}

// The refresh loop on a fake clock: a pass every register_interval (30 s), the registration
// written only when it changed.
class FakeClockPluginTest : public PluginTest {
 protected:
  void SetUp() override { Boot(false, &clock_); }
  hami::FakeClock clock_;
};

TEST_F(FakeClockPluginTest, RefreshesEveryIntervalAndWritesOnlyChanges) {
  ASSERT_TRUE(service_->WaitForStats(
      [](const Stats& s) { return s.registrations_published == 1; }, kDeadline));
  for (int pass = 0; pass < 3; ++pass) {
    // A pass is counted after its publication (if any) and after the next pass is scheduled: the
    // count below therefore shows whether this pass wrote, and the next Advance makes one due.
    const uint64_t before = service_->stats().refreshes;
    clock_.Advance(std::chrono::seconds(30));
    ASSERT_TRUE(service_->WaitForStats([&](const Stats& s) { return s.refreshes > before; },
                                       kDeadline))
        << pass;
    EXPECT_EQ(service_->stats().registrations_published, 1u) << pass;
  }
  Inventory one = TwoGpus();
  one.gpus.pop_back();
  one.pairs.clear();
  driver_->SetInventory(one);
  clock_.Advance(std::chrono::seconds(30));
  ASSERT_TRUE(service_->WaitForStats(
      [](const Stats& s) { return s.registrations_published == 2; }, kDeadline));
  Result<std::vector<device::DeviceInfo>> devs =
      device::DecodeNodeDevices(NodeAnnotation("hami.io/node-nvidia-register"));
  ASSERT_TRUE(devs.ok()) << devs.status().ToString();
  EXPECT_EQ(devs->size(), 1u);
}

TEST_F(PluginTest, AllocatesWhatTheSchedulerReservedAndReleasesTheLock) {
  CreateBoundPod("p1", {"main"}, std::string(kGpu1) + ",NVIDIA,8192,50:;");
  std::string uid = Uid("p1");
  Result<std::vector<sim::ContainerDevices>> r =
      kubelet_->AllocatePod(uid, kResource, {{"main", false, 1}});
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  ASSERT_EQ(r->size(), 1u);
  const sim::ContainerDevices& c = (*r)[0];
  EXPECT_EQ(c.envs.at("NVIDIA_VISIBLE_DEVICES"), kGpu1);
  EXPECT_EQ(c.envs.at("CUDA_DEVICE_MEMORY_LIMIT_0"), "8192m");
  EXPECT_EQ(c.envs.at("CUDA_DEVICE_SM_LIMIT"), "50");
  EXPECT_EQ(c.envs.at("LIBCUDA_LOG_LEVEL"), "1");
  std::string cache = c.envs.at("CUDA_DEVICE_MEMORY_SHARED_CACHE");
  EXPECT_EQ(cache.rfind(dir_ + "/hook/vgpu/", 0), 0u) << cache;
  EXPECT_EQ(cache.substr(cache.size() - 6), ".cache");
  const std::string host_dir = dir_ + "/hook/vgpu/containers/" + uid + "_main";
  ASSERT_EQ(c.mounts.size(), 3u);
  EXPECT_EQ(c.mounts[0].host_path, host_dir);
  EXPECT_FALSE(c.mounts[0].read_only);
  EXPECT_EQ(c.mounts[1].host_path, dir_ + "/hook/vgpu/libvgpu.so.test");
  EXPECT_EQ(c.mounts[2].container_path, "/etc/ld.so.preload");
  struct stat st;
  ASSERT_EQ(stat(host_dir.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0777u);

  EXPECT_EQ(PodAnnotation("p1", "hami.io/vgpu-devices-to-allocate"), ";");
  EXPECT_EQ(PodAnnotation("p1", "hami.io/vgpu-devices-allocated"),
            std::string(kGpu1) + ",NVIDIA,8192,50:;");
  EXPECT_EQ(PodAnnotation("p1", "hami.io/bind-phase"), "success");
  EXPECT_EQ(NodeAnnotation("hami.io/mutex.lock"), "");
  EXPECT_EQ(service_->stats().allocations, 1u);
}

TEST_F(PluginTest, AMultiContainerPodIsDoneAfterItsLastContainer) {
  // init "setup" (1 GPU), "a" (none), "b" (1 GPU): kubelet allocates setup, then b.
  CreateBoundPod("p2", {"a", "b"},
                 std::string(kGpu0) + ",NVIDIA,1000,0:;;" + kGpu0 + ",NVIDIA,2000,20:;", "setup");
  std::string uid = Uid("p2");
  Result<std::vector<sim::ContainerDevices>> r =
      kubelet_->AllocatePod(uid, kResource, {{"setup", true, 1}, {"a", false, 0}, {"b", false, 1}});
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  ASSERT_EQ(r->size(), 2u);
  EXPECT_EQ((*r)[0].envs.at("CUDA_DEVICE_MEMORY_LIMIT_0"), "1000m");
  EXPECT_EQ((*r)[1].envs.at("CUDA_DEVICE_MEMORY_LIMIT_0"), "2000m");
  EXPECT_EQ((*r)[1].mounts[0].host_path, dir_ + "/hook/vgpu/containers/" + uid + "_b");
  EXPECT_EQ((*r)[1].device_ids, (*r)[0].device_ids);  // the init container's device is reused
  EXPECT_EQ(PodAnnotation("p2", "hami.io/bind-phase"), "success");
  EXPECT_EQ(PodAnnotation("p2", "hami.io/vgpu-devices-to-allocate"), ";;;");
  EXPECT_EQ(NodeAnnotation("hami.io/mutex.lock"), "");
}

TEST_F(PluginTest, TheLockStaysUntilTheLastContainerIsAllocated) {
  CreateBoundPod("p3", {"a", "b"},
                 std::string(kGpu0) + ",NVIDIA,1000,0:;" + kGpu1 + ",NVIDIA,1000,0:;");
  Result<std::vector<ContainerAllocation>> first =
      service_->Allocate({{std::string(kGpu0) + "-0"}});
  ASSERT_TRUE(first.ok()) << first.status().ToString();
  EXPECT_EQ((*first)[0].container_name, "a");
  EXPECT_EQ(PodAnnotation("p3", "hami.io/bind-phase"), "allocating");
  EXPECT_NE(NodeAnnotation("hami.io/mutex.lock"), "");
  Result<std::vector<ContainerAllocation>> second =
      service_->Allocate({{std::string(kGpu1) + "-2"}});
  ASSERT_TRUE(second.ok()) << second.status().ToString();
  EXPECT_EQ((*second)[0].container_name, "b");
  EXPECT_EQ(PodAnnotation("p3", "hami.io/bind-phase"), "success");
  EXPECT_EQ(NodeAnnotation("hami.io/mutex.lock"), "");
}

TEST_F(PluginTest, AFailedAllocationMarksThePodPostsAnEventAndReleasesTheLock) {
  // The scheduler reserved two GPUs, kubelet asks for one.
  CreateBoundPod("p4", {"main"},
                 std::string(kGpu0) + ",NVIDIA,1000,0:" + kGpu1 + ",NVIDIA,1000,0:;");
  Result<std::vector<sim::ContainerDevices>> r =
      kubelet_->AllocatePod(Uid("p4"), kResource, {{"main", false, 1}});
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("device number not matched"), std::string::npos)
      << r.status().ToString();
  EXPECT_EQ(PodAnnotation("p4", "hami.io/bind-phase"), "failed");
  EXPECT_EQ(NodeAnnotation("hami.io/mutex.lock"), "");
  EXPECT_TRUE(kubelet_->Held(Uid("p4"), kResource).empty());
  k8s::ListOptions lo;
  lo.field_selector = "involvedObject.name=p4";
  Json events = client_->List(k8s::kEvents, "default", lo).value();
  ASSERT_EQ(events["items"].size(), 1u) << events.dump();
  EXPECT_EQ(events["items"][0]["reason"], "AllocationFailed");
  EXPECT_EQ(events["items"][0]["type"], "Warning");
  EXPECT_NE(events["items"][0]["message"].get<std::string>().find("device number not matched"),
            std::string::npos);
  EXPECT_EQ(service_->stats().allocation_failures, 1u);
}

TEST_F(PluginTest, BadRequestsAndMissingPodsAreClearErrorsWithoutWrites) {
  Result<std::vector<ContainerAllocation>> r = service_->Allocate({{"GPU-nope-0"}});
  EXPECT_EQ(r.status().code(), StatusCode::kNotFound);  // nothing pending: nothing to blame
  EXPECT_NE(r.status().message().find("no pod bound to node node-a"), std::string::npos);

  CreateBoundPod("p5", {"main"}, std::string(kGpu0) + ",NVIDIA,1000,0:;");
  r = service_->Allocate({{"GPU-nope-0"}});
  EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(r.status().message().find("GPU-nope-0"), std::string::npos);
  EXPECT_EQ(PodAnnotation("p5", "hami.io/bind-phase"), "failed");

  // A pod with a garbage annotation fails with the decoder's reason.
  CreateBoundPod("p6", {"main"}, "GPU-x,NVIDIA,not-a-number,0:;");
  r = service_->Allocate({{std::string(kGpu0) + "-1"}});
  EXPECT_EQ(r.status().code(), StatusCode::kFailedPrecondition);
  EXPECT_NE(r.status().message().find("hami.io/vgpu-devices-to-allocate"), std::string::npos);
}

TEST_F(PluginTest, AnXidMakesTheGpuUnhealthyForKubeletAndTheScheduler) {
  ASSERT_TRUE(service_->WaitForStats(
      [](const Stats& s) { return s.registrations_published == 1; }, kDeadline));
  driver_->Inject({kGpu1, 13});  // an application's fault: ignored
  driver_->Inject({kGpu1, 79});
  ASSERT_TRUE(kubelet_->WaitFor(
      [](const auto& r) {
        const auto& d = r.at(kResource).devices;
        return d.size() == 8 && !d[4].healthy;
      },
      std::chrono::seconds(10)));
  sim::ResourceState st = kubelet_->Resources().at(kResource);
  EXPECT_EQ(st.Allocatable(), 4);
  EXPECT_TRUE(st.devices[0].healthy);
  // The XID's publication is the next one (the 30 s refresh is far off): it carries the verdict.
  ASSERT_TRUE(service_->WaitForStats(
      [](const Stats& s) { return s.registrations_published >= 2; }, kDeadline));
  Result<std::vector<device::DeviceInfo>> d =
      device::DecodeNodeDevices(NodeAnnotation("hami.io/node-nvidia-register"));
  ASSERT_TRUE(d.ok()) << d.status().ToString();
  ASSERT_EQ(d->size(), 2u);
  EXPECT_TRUE((*d)[0].health);
  EXPECT_FALSE((*d)[1].health);
}

TEST_F(PluginTest, RegistersAgainWhenKubeletRestarts) {
  kubelet_->Stop();
  kubelet_.reset();
  auto start = SteadyClock::now();
  kubelet_ =
      sim::DeviceManager::Start(kubelet_dir_).value();  // removes our socket, new kubelet.sock
  ASSERT_TRUE(kubelet_->WaitFor(
      [](const auto& r) { return r.count(kResource) && r.at(kResource).devices.size() == 8; },
      std::chrono::seconds(5)));
  auto took = std::chrono::duration_cast<std::chrono::milliseconds>(SteadyClock::now() - start);
  RecordProperty("reregistration_ms", static_cast<int>(took.count()));
  // Kubelet may list the devices before the runner's Register call has returned to it.
  {
    UniqueLock lock(reg_mu_);
    EXPECT_TRUE(reg_cv_.wait_for(lock.native(), std::chrono::seconds(5),
                                 [&]() REQUIRES(reg_mu_) { return registered_ >= 2; }))
        << "registrations: " << registered_;
  }
  EXPECT_GE(runner_->registrations(), 2u);
  // And it still allocates.
  CreateBoundPod("p7", {"main"}, std::string(kGpu0) + ",NVIDIA,1000,0:;");
  EXPECT_TRUE(kubelet_->AllocatePod(Uid("p7"), kResource, {{"main", false, 1}}).ok());
}

// A pod admitted while its plugin restarts is refused with the reason, and the kubelet goes on:
// the restarted plugin registers and the next pod gets its devices. (The refusal once took the
// kubelet's lock a second time on the same thread and stopped every later Register.)
TEST_F(PluginTest, APodAdmittedWhileThePluginIsDownIsRefusedAndKubeletGoesOn) {
  runner_.reset();
  plugin_.reset();
  ASSERT_TRUE(kubelet_->WaitFor(
      [](const auto& r) { return r.count(kResource) && !r.at(kResource).connected; },
      std::chrono::seconds(10)));
  CreateBoundPod("p8", {"main"}, std::string(kGpu0) + ",NVIDIA,1000,0:;");
  Result<std::vector<sim::ContainerDevices>> refused =
      kubelet_->AllocatePod(Uid("p8"), kResource, {{"main", false, 1}});
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.status().code(), StatusCode::kUnavailable);
  EXPECT_NE(refused.status().message().find("no device plugin serves"), std::string::npos)
      << refused.status().ToString();
  EXPECT_TRUE(kubelet_->Held(Uid("p8"), kResource).empty());

  plugin_ = std::make_unique<GrpcPlugin>(
      *service_, GrpcPluginOptions{.plugin_dir = kubelet_dir_, .preferred_allocation = false});
  runner_ = std::make_unique<PluginRunner>(*plugin_, std::chrono::milliseconds(100));
  ASSERT_TRUE(runner_->Start().ok());
  ASSERT_TRUE(kubelet_->WaitFor(
      [](const auto& r) {
        return r.count(kResource) && r.at(kResource).connected &&
               r.at(kResource).registrations == 2 && r.at(kResource).devices.size() == 8;
      },
      std::chrono::seconds(10)))
      << "the kubelet took no registration after the refusal";
  EXPECT_TRUE(kubelet_->AllocatePod(Uid("p8"), kResource, {{"main", false, 1}}).ok());
}

TEST_F(PluginTest, AnUnreachableApiServerHandsOutNothing) {
  CreateBoundPod("p8", {"main"}, std::string(kGpu0) + ",NVIDIA,1000,0:;");
  std::string uid = Uid("p8");
  api_->Stop();
  Result<std::vector<sim::ContainerDevices>> r =
      kubelet_->AllocatePod(uid, kResource, {{"main", false, 1}});
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("cannot read node node-a"), std::string::npos)
      << r.status().ToString();
  EXPECT_TRUE(kubelet_->Held(uid, kResource).empty());
  EXPECT_EQ(service_->stats().allocations, 0u);
  // ListAndWatch keeps serving meanwhile.
  EXPECT_TRUE(kubelet_->Resources().at(kResource).connected);
}

// Hundreds of idle and stalled connections on the plugin's socket (a misbehaving local client)
// must not keep kubelet from being answered: gRPC's pollers hold them without a thread each.
TEST_F(PluginTest, TheSocketAnswersWithHundredsOfIdleConnectionsOpen) {
  std::vector<int> fds;
  for (int i = 0; i < 300; ++i) {
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    ASSERT_GE(fd, 0);
    sockaddr_un addr{};
    addr.sun_family = AF_UNIX;
    std::snprintf(addr.sun_path, sizeof(addr.sun_path), "%s", plugin_->socket_path().c_str());
    ASSERT_EQ(connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)), 0) << i;
    if (i % 3 == 0) {  // a third send half of the HTTP/2 client preface and stall
      const char part[] = "PRI * HTTP/2.0\r\n";
      ASSERT_GT(write(fd, part, sizeof(part) - 1), 0);
    }
    fds.push_back(fd);
  }
  auto channel =
      grpc::CreateChannel("unix://" + plugin_->socket_path(), grpc::InsecureChannelCredentials());
  auto stub = ::v1beta1::DevicePlugin::NewStub(channel);
  for (int i = 0; i < 3; ++i) {
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(5));
    ::v1beta1::Empty req;
    ::v1beta1::DevicePluginOptions opts;
    grpc::Status s = stub->GetDevicePluginOptions(&ctx, req, &opts);
    EXPECT_TRUE(s.ok()) << s.error_message();
  }
  // And kubelet's own stream still delivers: an XID reaches it.
  driver_->Inject({kGpu0, 79});
  EXPECT_TRUE(kubelet_->WaitFor([](const auto& r) { return !r.at(kResource).devices[0].healthy; },
                                std::chrono::seconds(10)));
  for (int fd : fds) close(fd);
}

class PreferredPluginTest : public PluginTest {
 protected:
  void SetUp() override { Boot(true); }
};

TEST_F(PreferredPluginTest, KubeletTakesReplicasOfTheReservedGpu) {
  EXPECT_TRUE(kubelet_->Resources().at(kResource).preferred_allocation);
  CreateBoundPod("p9", {"main"}, std::string(kGpu1) + ",NVIDIA,1000,0:;");
  Result<std::vector<sim::ContainerDevices>> r =
      kubelet_->AllocatePod(Uid("p9"), kResource, {{"main", false, 1}});
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  // Without the preference kubelet would take the first free replica, one of GPU 0's.
  ASSERT_EQ((*r)[0].device_ids.size(), 1u);
  EXPECT_EQ((*r)[0].device_ids[0].rfind(kGpu1, 0), 0u) << (*r)[0].device_ids[0];
}

// Static MIG, mixed strategy, on the real transport: GPU 0 shared as vGPUs on nvidia-gpu.sock,
// GPU 1's existing MIG devices offered per profile on sockets of their own; kubelet allocates
// them without any pod annotation, and an XID in one instance takes only that instance out.
TEST(MigPluginTest, MixedStrategyServesEachProfileBesideTheVgpus) {
  char tmpl[] = "/tmp/dp-mig-XXXXXX";
  ASSERT_NE(mkdtemp(tmpl), nullptr);
  const std::string dir = tmpl;
  std::unique_ptr<sim::ApiServer> api = sim::ApiServer::Start({}).value();
  k8s::RestConfig cfg;
  cfg.server = api->url();
  std::unique_ptr<k8s::RestClient> client = k8s::RestClient::Create(cfg).value();
  Json node = {{"apiVersion", "v1"}, {"kind", "Node"}, {"metadata", {{"name", kNode}}}};
  ASSERT_TRUE(client->Create(k8s::kNodes, "", node).ok());
  Inventory inv = TwoGpus();
  inv.gpus[1].mig_enabled = true;
  inv.gpus[1].mig_devices = {{"MIG-a", 7, 0, 1, 1, 9728, 14, false, 0, {}},
                             {"MIG-b", 8, 0, 1, 1, 9728, 14, false, 0, {}},
                             {"MIG-c", 2, 0, 3, 3, 40192, 42, false, 0, {}}};
  FakeGpuDriver driver(inv);
  PluginOptions o;
  o.node_name = kNode;
  o.settings.device_split_count = 4;
  o.mig_strategy = MigStrategy::kMixed;
  o.health_wait_slice = std::chrono::milliseconds(20);
  PluginService service(*client, driver, o);
  ASSERT_TRUE(service.Start().ok());
  std::unique_ptr<sim::DeviceManager> kubelet =
      sim::DeviceManager::Start(dir + "/device-plugins").value();
  std::vector<std::string> ready;
  Mutex mu;
  std::condition_variable ready_cv;
  KubeletPlugins plugins(service, {.plugin_dir = dir + "/device-plugins",
                                   .retry = std::chrono::milliseconds(100),
                                   .on_ready = [&](const std::vector<std::string>& sockets) {
                                     MutexLock l(mu);
                                     ready = sockets;
                                     ready_cv.notify_all();
                                   }});
  ASSERT_TRUE(plugins.Start().ok());
  const std::string small = "nvidia.com/mig-1g.10gb", large = "nvidia.com/mig-3g.40gb";
  auto allocatable = [&](const std::string& r) {
    return [r](const std::map<std::string, sim::ResourceState>& m) {
      return m.count(r) ? m.at(r).Allocatable() : int64_t{-1};
    };
  };
  ASSERT_TRUE(kubelet->WaitFor(
      [&](const auto& m) {
        return allocatable(kResource)(m) == 4 && allocatable(small)(m) == 2 &&
               allocatable(large)(m) == 1;
      },
      kDeadline));
  EXPECT_EQ(kubelet->Resources().at(small).endpoint, "nvidia-mig-1g.10gb.sock");

  Result<std::vector<sim::ContainerDevices>> first =
      kubelet->AllocatePod("uid-1", small, {{"main", false, 1}});
  ASSERT_TRUE(first.ok()) << first.status().ToString();
  ASSERT_EQ((*first)[0].device_ids.size(), 1u);
  const std::string got = (*first)[0].device_ids[0];
  EXPECT_EQ((*first)[0].envs.at("NVIDIA_VISIBLE_DEVICES"), got);
  EXPECT_TRUE((*first)[0].mounts.empty());
  Result<std::vector<sim::ContainerDevices>> second =
      kubelet->AllocatePod("uid-2", small, {{"main", false, 1}});
  ASSERT_TRUE(second.ok()) << second.status().ToString();
  EXPECT_NE((*second)[0].device_ids[0], got);
  EXPECT_FALSE(kubelet->AllocatePod("uid-3", small, {{"main", false, 1}}).ok());  // none left

  driver.Inject({.uuid = kGpu1, .xid = 79, .mig_uuid = "MIG-c"});
  ASSERT_TRUE(kubelet->WaitFor([&](const auto& m) { return allocatable(large)(m) == 0; },
                               kDeadline));
  EXPECT_EQ(kubelet->Resources().at(small).devices.size(), 2u);
  for (const sim::KubeletDevice& d : kubelet->Resources().at(small).devices) {
    EXPECT_TRUE(d.healthy) << d.id;
  }
  {
    UniqueLock l(mu);  // every socket registered with kubelet, so the plugin says it is ready
    ready_cv.wait_for(l.native(), kDeadline, [&] { return !ready.empty(); });
    EXPECT_EQ(ready.size(), 3u);
  }
  plugins.Stop();
  kubelet->Stop();
  service.Stop();
  api->Stop();
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace hami::deviceplugin
