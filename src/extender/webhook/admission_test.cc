#include "extender/webhook/admission.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "common/base64.h"

namespace hami::extender {
namespace {

using Json = nlohmann::json;

class FakeQuota : public QuotaChecker {
 public:
  struct Call {
    std::string ns, vendor;
    int64_t mem, cores;
  };
  Status Check(std::string_view ns, std::string_view vendor, int64_t mem_mib,
               int64_t cores) const override {
    calls.push_back(Call{std::string(ns), std::string(vendor), mem_mib, cores});
    if (mem_mib > mem_limit) {
      return ResourceExhaustedError("limits.nvidia.com/gpumem: used 0 + asked " +
                                    std::to_string(mem_mib) + " > limit " +
                                    std::to_string(mem_limit));
    }
    return OkStatus();
  }
  int64_t mem_limit = 1 << 30;
  mutable std::vector<Call> calls;
};

// What a call produced, with the patch already applied to the submitted pod.
struct Outcome {
  Json response;  // the AdmissionReview's `response`
  bool allowed = false;
  int code = 0;
  std::string message;
  Json patch = Json::array();
  Json mutated;
};

class WebhookTest : public ::testing::Test {
 protected:
  WebhookTest() { Rebuild(); }

  // Call after editing config_.
  void Rebuild() {
    Result<device::VendorRegistry> r = device::VendorRegistry::FromConfig(config_);
    ASSERT_TRUE(r.ok()) << r.status().ToString();
    vendors_ = std::move(r).value();
  }
  device::NvidiaConfig& nvidia() { return *config_.nvidia; }

  static Json Request(const Json& pod, std::string version = "admission.k8s.io/v1") {
    return Json{{"apiVersion", version},
                {"kind", "AdmissionReview"},
                {"request",
                 {{"uid", "705ab4f5-6393-11e8-b7cc-42010a800002"},
                  {"kind", {{"group", ""}, {"version", "v1"}, {"kind", "Pod"}}},
                  {"resource", {{"group", ""}, {"version", "v1"}, {"resource", "pods"}}},
                  {"namespace", "team-a"},
                  {"operation", "CREATE"},
                  {"object", pod}}}};
  }

  Outcome Admit(const Json& pod, std::string version = "admission.k8s.io/v1") {
    Outcome o;
    Result<std::string> answer =
        HandleAdmissionReview(Request(pod, version).dump(), vendors_, config_, options_, quota_);
    EXPECT_TRUE(answer.ok()) << answer.status().ToString();
    if (!answer.ok()) return o;
    Json review = Json::parse(*answer);
    EXPECT_EQ(review["apiVersion"], version);
    EXPECT_EQ(review["kind"], "AdmissionReview");
    o.response = review["response"];
    EXPECT_EQ(o.response["uid"], "705ab4f5-6393-11e8-b7cc-42010a800002");
    o.allowed = o.response["allowed"].get<bool>();
    if (o.response.contains("status")) {
      o.code = o.response["status"]["code"].get<int>();
      o.message = o.response["status"]["message"].get<std::string>();
    }
    o.mutated = pod;
    if (o.response.contains("patch")) {
      EXPECT_EQ(o.response["patchType"], "JSONPatch");
      o.patch = Json::parse(Base64Decode(o.response["patch"].get<std::string>()).value());
      o.mutated = pod.patch(o.patch);
    } else {
      EXPECT_FALSE(o.response.contains("patchType"));
    }
    return o;
  }

  device::DeviceConfig config_ = device::DefaultDeviceConfig();
  device::VendorRegistry vendors_;
  WebhookOptions options_;
  const QuotaChecker* quota_ = nullptr;
};

Json Container(std::string name, Json limits = Json::object()) {
  Json c = {{"name", std::move(name)}, {"image", "cuda:12"}};
  if (!limits.empty()) c["resources"] = {{"limits", std::move(limits)}};
  return c;
}

Json PodOf(std::vector<Json> containers, std::vector<Json> init = {}) {
  Json pod = {{"apiVersion", "v1"},
              {"kind", "Pod"},
              {"metadata", {{"name", "train"}, {"namespace", "team-a"}}},
              {"spec", {{"containers", containers}}}};
  if (!init.empty()) pod["spec"]["initContainers"] = init;
  return pod;
}

Json GpuPod(Json limits) { return PodOf({Container("main", std::move(limits))}); }

// The value of environment variable `name` in `container`, or "<absent>"; fails the test when the
// variable appears more than once.
std::string EnvOf(const Json& container, const std::string& name) {
  std::string value = "<absent>";
  int seen = 0;
  if (container.contains("env")) {
    for (const Json& e : container["env"]) {
      if (e["name"] == name) {
        ++seen;
        value = e.value("value", "");
      }
    }
  }
  EXPECT_LE(seen, 1) << name << " duplicated";
  return value;
}

const Json& Main(const Outcome& o) { return o.mutated["spec"]["containers"][0]; }

std::string LimitOf(const Json& container, const std::string& resource) {
  const Json* limits = nullptr;
  if (container.contains("resources") && container["resources"].contains("limits")) {
    limits = &container["resources"]["limits"];
  }
  if (!limits || !limits->contains(resource)) return "<absent>";
  return (*limits)[resource].get<std::string>();
}

// --- Round trips -------------------------------------------------------------------------------

TEST_F(WebhookTest, V1RoundTripProducesTheIntendedPod) {
  Json pod = GpuPod({{"nvidia.com/gpu", "1"}});
  Outcome o = Admit(pod);
  ASSERT_TRUE(o.allowed);
  EXPECT_FALSE(o.response.contains("status"));
  Json want = pod;
  want["spec"]["schedulerName"] = "hami-scheduler";
  want["spec"]["containers"][0]["resources"]["limits"]["nvidia.com/gpucores"] = "100";
  EXPECT_EQ(o.mutated, want);
  // Minimal, RFC 6901-escaped operations.
  EXPECT_EQ(o.patch, Json::parse(R"([
    {"op":"add","path":"/spec/containers/0/resources/limits/nvidia.com~1gpucores","value":"100"},
    {"op":"add","path":"/spec/schedulerName","value":"hami-scheduler"}])"));
}

// Upstream's B11: several MIG devices for one container are admitted with a warning kubectl
// prints, since a CUDA process sees one MIG device; without the mig mode, or with one device, no
// warning.
TEST_F(WebhookTest, SeveralMigDevicesInOneContainerAreAdmittedWithAWarning) {
  Json pod = PodOf({Container("main", {{"nvidia.com/gpu", "2"}, {"nvidia.com/gpumem", "9000"}}),
                    Container("side", {{"nvidia.com/gpu", "1"}})});
  Outcome plain = Admit(pod);
  ASSERT_TRUE(plain.allowed);
  EXPECT_FALSE(plain.response.contains("warnings"));
  pod["metadata"]["annotations"] = {{"nvidia.com/vgpu-mode", "mig"}};
  Outcome o = Admit(pod);
  ASSERT_TRUE(o.allowed);
  ASSERT_TRUE(o.response.contains("warnings")) << o.response;
  ASSERT_EQ(o.response["warnings"].size(), 1u);
  std::string w = o.response["warnings"][0];
  EXPECT_NE(w.find("spec.containers[0] asks for 2 MIG devices"), std::string::npos) << w;
  EXPECT_EQ(o.mutated["spec"]["schedulerName"], "hami-scheduler");
  Outcome beta = Admit(pod, "admission.k8s.io/v1beta1");
  EXPECT_EQ(beta.response["warnings"].size(), 1u);
}

TEST_F(WebhookTest, V1beta1IsAnsweredInV1beta1) {
  Json pod = GpuPod({{"nvidia.com/gpu", "1"}, {"nvidia.com/gpumem", "3000"}});
  Outcome o = Admit(pod, "admission.k8s.io/v1beta1");
  ASSERT_TRUE(o.allowed);
  Json want = pod;
  want["spec"]["schedulerName"] = "hami-scheduler";
  EXPECT_EQ(o.mutated, want);
}

TEST_F(WebhookTest, PodAskingNothingIsAllowedWithoutPatch) {
  Outcome o = Admit(PodOf({Container("web", {{"cpu", "500m"}, {"memory", "1Gi"}})}));
  EXPECT_TRUE(o.allowed);
  EXPECT_FALSE(o.response.contains("patch"));
  EXPECT_EQ(o.response, Json::parse(R"({"uid":"705ab4f5-6393-11e8-b7cc-42010a800002",
                                        "allowed":true})"));
}

TEST_F(WebhookTest, ReviewPodWorksOnAPodAlone) {
  AdmissionDecision d =
      ReviewPod(GpuPod({{"nvidia.com/gpu", "1"}, {"nvidia.com/gpucores", "30"}}).dump(), "team-a",
                vendors_, config_, options_, nullptr);
  EXPECT_TRUE(d.allowed);
  EXPECT_EQ(Json::parse(d.patch), Json::parse(R"([
    {"op":"add","path":"/spec/schedulerName","value":"hami-scheduler"}])"));
  AdmissionDecision bad = ReviewPod("{", "team-a", vendors_, config_, options_, nullptr);
  EXPECT_FALSE(bad.allowed);
  EXPECT_EQ(bad.code, 400);
}

// --- Step 1: percentage range, and invalid quantities ----------------------------------------

TEST_F(WebhookTest, PercentageOutOfRangeIsRefused) {
  Outcome o = Admit(GpuPod({{"nvidia.com/gpu", "1"}, {"nvidia.com/gpumem-percentage", "150"}}));
  EXPECT_FALSE(o.allowed);
  EXPECT_EQ(o.code, 400);
  EXPECT_NE(o.message.find("nvidia.com/gpumem-percentage"), std::string::npos) << o.message;
  EXPECT_NE(o.message.find("between 0 and 100"), std::string::npos) << o.message;
  EXPECT_EQ(o.response["status"]["reason"], "BadRequest");
  EXPECT_FALSE(o.response.contains("patch"));
}

TEST_F(WebhookTest, GpumemWithAUnitIsRefusedWithTheMiBHint) {
  for (const auto& [value, hint] :
       std::vector<std::pair<std::string, std::string>>{{"4Gi", "4Gi is 4096"},
                                                        {"1Gi", "1Gi is 1024"},
                                                        {"512Mi", "512Mi is 512"},
                                                        {"2G", "2G is about 1907"},
                                                        {"1500M", "1500M is about 1430"},
                                                        {"1M", "1M is less than 1"}}) {
    Outcome o = Admit(GpuPod({{"nvidia.com/gpu", "1"}, {"nvidia.com/gpumem", value}}));
    EXPECT_FALSE(o.allowed) << value;
    EXPECT_EQ(o.code, 400) << value;
    EXPECT_NE(
        o.message.find("nvidia.com/gpumem=\"" + value + "\": counts MiB, without a unit: " + hint),
        std::string::npos)
        << o.message;
  }
  // Plain numbers, exponent forms included, are MiB as before; so are the API server's canonical
  // forms of plain multiples of 1000 (a pod written with gpumem: 3000 arrives as "3k").
  for (const char* value : {"4096", "4e3", "+100", "3k", "10k", "999999k"}) {
    Outcome o = Admit(GpuPod({{"nvidia.com/gpu", "1"}, {"nvidia.com/gpumem", value}}));
    EXPECT_TRUE(o.allowed) << value << ": " << o.message;
  }
}

TEST_F(WebhookTest, InvalidQuantitiesAreRefusedWithTheReason) {
  Outcome garbage = Admit(GpuPod({{"nvidia.com/gpu", "1"}, {"nvidia.com/gpumem", "abc"}}));
  EXPECT_FALSE(garbage.allowed);
  EXPECT_EQ(garbage.code, 400);
  EXPECT_NE(garbage.message.find("nvidia.com/gpumem"), std::string::npos) << garbage.message;
  EXPECT_NE(garbage.message.find("\"main\""), std::string::npos) << garbage.message;

  Outcome negative = Admit(GpuPod({{"nvidia.com/gpu", "1"}, {"nvidia.com/gpumem", "-5"}}));
  EXPECT_FALSE(negative.allowed);
  EXPECT_NE(negative.message.find("must not be negative"), std::string::npos) << negative.message;

  Outcome fractional = Admit(GpuPod({{"nvidia.com/gpu", "1.5"}}));
  EXPECT_FALSE(fractional.allowed);
  EXPECT_NE(fractional.message.find("nvidia.com/gpu"), std::string::npos);
}

// --- Step 2: task priority ------------------------------------------------------------------

TEST_F(WebhookTest, PriorityBecomesAnEnvVariable) {
  Json pod = GpuPod({{"nvidia.com/gpu", "1"}, {"nvidia.com/priority", "1"}});
  Outcome o = Admit(pod);
  ASSERT_TRUE(o.allowed);
  EXPECT_EQ(EnvOf(Main(o), "CUDA_TASK_PRIORITY"), "1");
  Json want = pod;
  want["spec"]["schedulerName"] = "hami-scheduler";
  want["spec"]["containers"][0]["resources"]["limits"]["nvidia.com/gpucores"] = "100";
  want["spec"]["containers"][0]["env"] =
      Json::parse(R"([{"name":"CUDA_TASK_PRIORITY","value":"1"}])");
  EXPECT_EQ(o.mutated, want);
  // No env yet: the whole array is added in one operation.
  EXPECT_NE(std::find(o.patch.begin(), o.patch.end(),
                      Json::parse(R"({"op":"add","path":"/spec/containers/0/env",
                                      "value":[{"name":"CUDA_TASK_PRIORITY","value":"1"}]})")),
            o.patch.end())
      << o.patch.dump();
}

TEST_F(WebhookTest, ExistingEnvIsAppendedToOrReplacedNeverDuplicated) {
  Json pod = GpuPod({{"nvidia.com/gpu", "1"}, {"nvidia.com/priority", "0"}});
  pod["spec"]["containers"][0]["env"] = Json::parse(R"([{"name":"A","value":"x"}])");
  Outcome appended = Admit(pod);
  EXPECT_EQ(appended.patch[0], Json::parse(R"({"op":"add","path":"/spec/containers/0/env/-",
                                        "value":{"name":"CUDA_TASK_PRIORITY","value":"0"}})"));
  EXPECT_EQ(EnvOf(Main(appended), "A"), "x");

  pod["spec"]["containers"][0]["env"] = Json::parse(
      R"([{"name":"CUDA_TASK_PRIORITY","valueFrom":{"fieldRef":{"fieldPath":"x"}}},
          {"name":"B","value":"y"}])");
  Outcome replaced = Admit(pod);
  ASSERT_TRUE(replaced.allowed);
  EXPECT_EQ(Main(replaced)["env"], Json::parse(R"([{"name":"CUDA_TASK_PRIORITY","value":"0"},
                                                   {"name":"B","value":"y"}])"));
}

// --- Step 3: core utilisation policy ----------------------------------------------------------

TEST_F(WebhookTest, CorePolicyIsSetInEveryContainer) {
  for (device::GpuCorePolicy policy :
       {device::GpuCorePolicy::kForce, device::GpuCorePolicy::kDisable}) {
    nvidia().gpu_core_policy = policy;
    Outcome o = Admit(PodOf({Container("gpu", {{"nvidia.com/gpu", "1"}}), Container("sidecar")}));
    ASSERT_TRUE(o.allowed);
    std::string want(device::GpuCorePolicyName(policy));
    EXPECT_EQ(EnvOf(o.mutated["spec"]["containers"][0], "GPU_CORE_UTILIZATION_POLICY"), want);
    EXPECT_EQ(EnvOf(o.mutated["spec"]["containers"][1], "GPU_CORE_UTILIZATION_POLICY"), want);
  }
  nvidia().gpu_core_policy = device::GpuCorePolicy::kDefault;
  Outcome o = Admit(GpuPod({{"nvidia.com/gpu", "1"}}));
  EXPECT_EQ(EnvOf(Main(o), "GPU_CORE_UTILIZATION_POLICY"), "<absent>");
}

// --- Step 4: default device count ---------------------------------------------------------------

TEST_F(WebhookTest, DefaultGpuNumIsInjectedWhenOnlyMemoryOrCoresAreGiven) {
  Outcome mem = Admit(GpuPod({{"nvidia.com/gpumem", "3000"}}));
  ASSERT_TRUE(mem.allowed);
  EXPECT_EQ(LimitOf(Main(mem), "nvidia.com/gpu"), "1");
  EXPECT_EQ(mem.mutated["spec"]["schedulerName"], "hami-scheduler");
  EXPECT_NE(std::find(mem.patch.begin(), mem.patch.end(), Json::parse(R"({"op":"add","value":"1",
                          "path":"/spec/containers/0/resources/limits/nvidia.com~1gpu"})")),
            mem.patch.end())
      << mem.patch.dump();

  nvidia().default_gpu_num = 2;
  Rebuild();
  Outcome cores = Admit(GpuPod({{"nvidia.com/gpucores", "20"}}));
  EXPECT_EQ(LimitOf(Main(cores), "nvidia.com/gpu"), "2");
  EXPECT_EQ(LimitOf(Main(cores), "nvidia.com/gpucores"), "20");

  // defaultGPUNum 0: memory alone is not a device request; the pod is left alone.
  nvidia().default_gpu_num = 0;
  Rebuild();
  Outcome none = Admit(GpuPod({{"nvidia.com/gpumem", "3000"}}));
  EXPECT_TRUE(none.allowed);
  EXPECT_FALSE(none.response.contains("patch"));
}

// --- Step 5: whole cards get all cores -----------------------------------------------------------

TEST_F(WebhookTest, ExclusiveCoresFollowTheWholeCardRule) {
  struct Case {
    Json limits;
    std::string cores;  // expected gpucores limit afterwards
  } cases[] = {
      {{{"nvidia.com/gpu", "1"}}, "100"},
      {{{"nvidia.com/gpu", "2"}, {"nvidia.com/gpumem-percentage", "100"}}, "100"},
      {{{"nvidia.com/gpu", "1"}, {"nvidia.com/gpumem-percentage", "50"}}, "<absent>"},
      {{{"nvidia.com/gpu", "1"}, {"nvidia.com/gpumem", "3000"}}, "<absent>"},
      {{{"nvidia.com/gpu", "1"}, {"nvidia.com/gpucores", "30"}}, "30"},
      {{{"nvidia.com/gpumem-percentage", "100"}}, "100"},  // count injected first (step 4)
  };
  for (const Case& c : cases) {
    Outcome o = Admit(GpuPod(c.limits));
    ASSERT_TRUE(o.allowed) << c.limits.dump();
    EXPECT_EQ(LimitOf(Main(o), "nvidia.com/gpucores"), c.cores) << c.limits.dump();
  }
  // Count given only as a request still counts.
  Json pod = PodOf({Container("main")});
  pod["spec"]["containers"][0]["resources"] = {{"requests", {{"nvidia.com/gpu", "1"}}}};
  EXPECT_EQ(LimitOf(Main(Admit(pod)), "nvidia.com/gpucores"), "100");

  // Renamed resources are honoured.
  nvidia().resource_count_name = "example.com/vgpu";
  nvidia().resource_core_name = "example.com/vcores";
  Rebuild();
  Outcome renamed = Admit(GpuPod({{"example.com/vgpu", "1"}}));
  EXPECT_EQ(LimitOf(Main(renamed), "example.com/vcores"), "100");
  EXPECT_EQ(LimitOf(Main(renamed), "nvidia.com/gpucores"), "<absent>");
  EXPECT_FALSE(Admit(GpuPod({{"nvidia.com/gpu", "1"}})).response.contains("patch"));
}

// --- Step 6: runtimeClassName ------------------------------------------------------------------

TEST_F(WebhookTest, RuntimeClassIsSetForDevicePodsOnly) {
  nvidia().runtime_class_name = "nvidia";
  Outcome gpu = Admit(GpuPod({{"nvidia.com/gpu", "1"}}));
  EXPECT_EQ(gpu.mutated["spec"]["runtimeClassName"], "nvidia");

  Json own = GpuPod({{"nvidia.com/gpu", "1"}});
  own["spec"]["runtimeClassName"] = "kata";
  EXPECT_EQ(Admit(own).mutated["spec"]["runtimeClassName"], "kata");

  Outcome cpu = Admit(PodOf({Container("web")}));
  EXPECT_FALSE(cpu.mutated["spec"].contains("runtimeClassName"));
}

// --- Step 7: hide devices from containers that asked for none ---------------------------------

TEST_F(WebhookTest, OverwriteEnvHidesDevicesFromOtherContainers) {
  nvidia().overwrite_env = true;
  Json pod = PodOf({Container("gpu", {{"nvidia.com/gpu", "1"}}), Container("sidecar")});
  Outcome o = Admit(pod);
  ASSERT_TRUE(o.allowed);
  EXPECT_EQ(EnvOf(o.mutated["spec"]["containers"][0], "NVIDIA_VISIBLE_DEVICES"), "<absent>");
  EXPECT_EQ(EnvOf(o.mutated["spec"]["containers"][1], "NVIDIA_VISIBLE_DEVICES"), "none");

  // A pod without devices is patched too, but stays with its own scheduler.
  Outcome plain = Admit(PodOf({Container("web")}));
  ASSERT_TRUE(plain.allowed);
  EXPECT_EQ(EnvOf(plain.mutated["spec"]["containers"][0], "NVIDIA_VISIBLE_DEVICES"), "none");
  EXPECT_FALSE(plain.mutated["spec"].contains("schedulerName"));
}

TEST_F(WebhookTest, InitContainersAreMutatedToo) {
  Json pod = PodOf({Container("main", {{"nvidia.com/gpu", "1"}, {"nvidia.com/gpumem", "1000"}})},
                   {Container("warmup", {{"nvidia.com/gpumem", "2000"}})});
  Outcome o = Admit(pod);
  ASSERT_TRUE(o.allowed);
  EXPECT_EQ(LimitOf(o.mutated["spec"]["initContainers"][0], "nvidia.com/gpu"), "1");
  Json want = pod;
  want["spec"]["schedulerName"] = "hami-scheduler";
  want["spec"]["initContainers"][0]["resources"]["limits"]["nvidia.com/gpu"] = "1";
  EXPECT_EQ(o.mutated, want);
}

TEST_F(WebhookTest, WithoutNvidiaConfigNothingIsMutated) {
  config_.nvidia.reset();
  Rebuild();
  Outcome o = Admit(GpuPod({{"nvidia.com/gpu", "1"}}));
  EXPECT_TRUE(o.allowed);
  EXPECT_FALSE(o.response.contains("patch"));
}

// The other vendors' rules reach the pod through the same patch: Ascend memory rounded up to its
// template (limits and requests), Iluvatar's container variable and whole-card cores, MetaX's
// default QoS policy on the pod; a vendor's refusal names the container.
TEST_F(WebhookTest, OtherVendorsRulesArePatchedIn) {
  config_ = device::ParseDeviceConfigYaml(
                "nvidia: {}\nascend:\n  resourceCountName: huawei.com/Ascend910B3\n"
                "metax: {}\niluvatars: ~\n")
                .value();
  Result<device::VendorRegistry> r =
      device::VendorRegistry::FromConfig(config_, {.enable_iluvatar = true});
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  vendors_ = std::move(r).value();
  Json pod = PodOf({Container("npu", {{"huawei.com/Ascend910B3", "1"},
                                      {"huawei.com/Ascend910B3-memory", "16000"}}),
                    Container("ilu", {{"iluvatar.ai/BI-V150-vgpu", "2"}}),
                    Container("sgpu", {{"metax-tech.com/sgpu", "1"}})});
  Outcome o = Admit(pod);
  ASSERT_TRUE(o.allowed) << o.message;
  const Json& npu = o.mutated["spec"]["containers"][0];
  EXPECT_EQ(LimitOf(npu, "huawei.com/Ascend910B3-memory"), "16384");
  EXPECT_EQ(npu["resources"]["requests"]["huawei.com/Ascend910B3-memory"], "16384");
  const Json& ilu = o.mutated["spec"]["containers"][1];
  EXPECT_EQ(EnvOf(ilu, "SOL_CONTINER_NAME"), "ilu");
  EXPECT_EQ(LimitOf(ilu, "iluvatar.ai/BI-V150.vCore"), "200");
  EXPECT_EQ(EnvOf(npu, "SOL_CONTINER_NAME"), "<absent>");
  EXPECT_EQ(o.mutated["metadata"]["annotations"]["metax-tech.com/sgpu-qos-policy"], "best-effort");
  EXPECT_EQ(o.mutated["spec"]["schedulerName"], "hami-scheduler");

  // A second admission (webhooks may be called again) changes nothing more.
  Outcome again = Admit(o.mutated);
  ASSERT_TRUE(again.allowed) << again.message;
  EXPECT_EQ(again.mutated, o.mutated);

  Outcome bad = Admit(PodOf({Container(
      "npu", {{"huawei.com/Ascend910B3", "1"}, {"huawei.com/Ascend910B3-memory", "90000"}})}));
  EXPECT_FALSE(bad.allowed);
  EXPECT_EQ(bad.code, 400);
  EXPECT_NE(bad.message.find("container \"npu\""), std::string::npos) << bad.message;
}

// --- Denials ----------------------------------------------------------------------------------

TEST_F(WebhookTest, PodWithoutContainersIsRefused) {
  Json pod = PodOf({});
  pod["spec"]["containers"] = Json::array();
  Outcome o = Admit(pod);
  EXPECT_FALSE(o.allowed);
  EXPECT_EQ(o.code, 403);
  EXPECT_EQ(o.message, "pod has no containers");
  EXPECT_EQ(o.response["status"]["reason"], "Forbidden");

  // Only init containers is still no containers.
  Json init_only = PodOf({}, {Container("warmup")});
  init_only["spec"].erase("containers");
  EXPECT_EQ(Admit(init_only).message, "pod has no containers");
}

TEST_F(WebhookTest, PrivilegedContainersMayNotShareDevices) {
  Json pod = PodOf({Container("main", {{"nvidia.com/gpu", "1"}})}, {Container("setup")});
  pod["spec"]["initContainers"][0]["securityContext"] = {{"privileged", true}};
  Outcome o = Admit(pod);
  EXPECT_FALSE(o.allowed);
  EXPECT_EQ(o.code, 403);
  EXPECT_EQ(o.message, "container setup is privileged");
  EXPECT_FALSE(o.response.contains("patch"));

  // Privileged without HAMi devices is none of our business.
  Json plain = PodOf({Container("main")});
  plain["spec"]["containers"][0]["securityContext"] = {{"privileged", true}};
  EXPECT_TRUE(Admit(plain).allowed);
}

TEST_F(WebhookTest, EnflameDrsPodsAreRefusedSayingWhatIsScheduled) {
  config_ = device::ParseDeviceConfigYaml("nvidia: {}\nenflame: {}\n").value();
  Rebuild();
  Outcome o = Admit(PodOf({Container("web"),
                          Container("train", {{"enflame.com/drs-gcu", "1"},
                                              {"enflame.com/gcu-memory", "8"}})}));
  EXPECT_FALSE(o.allowed);
  EXPECT_EQ(o.code, 403);
  EXPECT_NE(o.message.find("spec.containers[1] asks for enflame.com/drs-gcu"), std::string::npos)
      << o.message;
  EXPECT_NE(o.message.find("enflame.com/vgcu (with enflame.com/vgcu-percentage)"),
            std::string::npos)
      << o.message;
  // Memory and cores alone are DRS's other way to ask.
  Outcome by_size = Admit(PodOf({Container("train", {{"enflame.com/gcu-core", "50"}})}));
  EXPECT_FALSE(by_size.allowed);
  EXPECT_NE(by_size.message.find("asks for enflame.com/gcu-core"), std::string::npos)
      << by_size.message;
  // Whole GCUs are admitted; so is everything once Enflame is not configured at all.
  Outcome whole = Admit(PodOf({Container("train", {{"enflame.com/gcu", "1"}})}));
  EXPECT_TRUE(whole.allowed) << whole.message;
  config_.vendors.erase("enflame");
  Rebuild();
  EXPECT_TRUE(Admit(PodOf({Container("train", {{"enflame.com/drs-gcu", "1"}})})).allowed);
}

TEST_F(WebhookTest, PodAlreadyOnANodeIsRefused) {
  Json pod = GpuPod({{"nvidia.com/gpu", "1"}});
  pod["spec"]["nodeName"] = "node-a";
  Outcome o = Admit(pod);
  EXPECT_FALSE(o.allowed);
  EXPECT_EQ(o.message, "pod has node assigned");

  Json plain = PodOf({Container("web")});
  plain["spec"]["nodeName"] = "node-a";
  EXPECT_TRUE(Admit(plain).allowed);
}

// --- schedulerName ----------------------------------------------------------------------------

TEST_F(WebhookTest, SchedulerNameRules) {
  Json pod = GpuPod({{"nvidia.com/gpu", "1"}});

  pod["spec"]["schedulerName"] = "volcano";
  Outcome other = Admit(pod);
  EXPECT_TRUE(other.allowed);
  EXPECT_FALSE(other.response.contains("patch"));

  // Invalid values in a pod for another scheduler are not ours to judge either.
  Json other_bad = GpuPod({{"nvidia.com/gpu", "x"}});
  other_bad["spec"]["schedulerName"] = "volcano";
  EXPECT_TRUE(Admit(other_bad).allowed);

  pod["spec"]["schedulerName"] = "default-scheduler";
  Outcome taken = Admit(pod);
  EXPECT_EQ(taken.mutated["spec"]["schedulerName"], "hami-scheduler");
  EXPECT_NE(std::find(taken.patch.begin(), taken.patch.end(),
                      Json::parse(R"({"op":"replace","path":"/spec/schedulerName",
                                      "value":"hami-scheduler"})")),
            taken.patch.end());

  options_.force_overwrite_default_scheduler = false;
  EXPECT_FALSE(Admit(pod).response.contains("patch"));

  pod["spec"]["schedulerName"] = "hami-scheduler";
  Outcome ours = Admit(pod);
  EXPECT_EQ(ours.patch.size(), 1u);  // only the cores; the name is already right

  options_.scheduler_name = "";
  pod["spec"].erase("schedulerName");
  Outcome unnamed = Admit(pod);
  EXPECT_TRUE(unnamed.allowed);
  EXPECT_FALSE(unnamed.mutated["spec"].contains("schedulerName"));
}

// --- Quota ------------------------------------------------------------------------------------

TEST_F(WebhookTest, QuotaPrecheckUsesThePodPeak) {
  FakeQuota fake;
  quota_ = &fake;
  Json pod = PodOf(
      {Container(
           "a",
           {{"nvidia.com/gpu", "2"}, {"nvidia.com/gpumem", "3000"}, {"nvidia.com/gpucores", "30"}}),
       Container("b", {{"nvidia.com/gpumem", "1000"}}),
       Container("c", {{"nvidia.com/gpu", "1"}, {"nvidia.com/gpumem-percentage", "50"}})},
      {Container("init", {{"nvidia.com/gpu", "1"},
                          {"nvidia.com/gpumem", "8000"},
                          {"nvidia.com/gpucores", "50"}})});
  Outcome o = Admit(pod);
  ASSERT_TRUE(o.allowed) << o.message;
  ASSERT_EQ(fake.calls.size(), 1u);
  EXPECT_EQ(fake.calls[0].ns, "team-a");
  EXPECT_EQ(fake.calls[0].vendor, "NVIDIA");
  // Memory: apps 2*3000 + 1000 + 0 (percentage) = 7000 < init 8000. Cores: apps 2*30 + 0 + 0 =
  // 60 > init 50.
  EXPECT_EQ(fake.calls[0].mem, 8000);
  EXPECT_EQ(fake.calls[0].cores, 60);

  fake.mem_limit = 4000;
  Outcome denied = Admit(pod);
  EXPECT_FALSE(denied.allowed);
  EXPECT_EQ(denied.code, 403);
  EXPECT_EQ(denied.message,
            "exceeding resource quota: limits.nvidia.com/gpumem: used 0 + asked 8000 > limit "
            "4000");

  fake.calls.clear();
  Admit(PodOf({Container("web")}));
  EXPECT_TRUE(fake.calls.empty());  // no devices, no quota question
}

// --- Untrusted bodies -------------------------------------------------------------------------

TEST_F(WebhookTest, BodiesThatAreNotAdmissionReviewsAreInvalidArguments) {
  const std::string bodies[] = {
      "",
      "not json",
      "[]",
      "42",
      R"({"apiVersion":"v1","kind":"AdmissionReview","request":{"uid":"u"}})",
      R"({"kind":"AdmissionReview","request":{"uid":"u"}})",
      R"({"apiVersion":"admission.k8s.io/v1","kind":"Pod","request":{"uid":"u"}})",
      R"({"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview"})",
      R"({"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":[]})",
      R"({"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{"uid":7}})",
      std::string(100000, '['),
      "{\"a\":" + std::string(300, '[') + std::string(300, ']') + "}",
      "{\"apiVersion\":\"admission.k8s.io/v1\",\"kind\":\"AdmissionReview\",\"request\":"
      "{\"uid\":\"\xff\xfe\"}}",
  };
  for (const std::string& body : bodies) {
    Result<std::string> r = HandleAdmissionReview(body, vendors_, config_, options_, nullptr);
    ASSERT_FALSE(r.ok()) << body.substr(0, 80);
    EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument) << body.substr(0, 80);
  }
}

TEST_F(WebhookTest, UnreadablePodsGetA400Response) {
  std::vector<Json> objects = {
      nullptr,
      Json::array(),
      "pod",
      Json::parse(R"({"kind":"ConfigMap","data":{}})"),
      Json::parse(R"({"kind":"Pod"})"),
      Json::parse(R"({"kind":"Pod","spec":[]})"),
      Json::parse(R"({"kind":"Pod","spec":{"containers":{}}})"),
      Json::parse(R"({"kind":"Pod","spec":{"containers":[7]}})"),
      Json::parse(R"({"kind":"Pod","spec":{"containers":[{"name":"a","env":{}}]}})"),
      Json::parse(R"({"kind":"Pod","spec":{"containers":[{"name":"a","resources":[]}]}})"),
      Json::parse(
          R"({"kind":"Pod","spec":{"containers":[{"name":"a","resources":{"limits":[]}}]}})"),
      Json::parse(R"({"kind":"Pod","spec":{"containers":[{"name":"a",
                      "resources":{"limits":{"nvidia.com/gpu":{"x":1}}}}]}})"),
      Json::parse(R"({"kind":"Pod","spec":{"containers":[{"name":"a",
                      "resources":{"limits":{"nvidia.com/gpu":1e300}}}]}})"),
      Json::parse(R"({"kind":"Pod","spec":{"containers":[{"name":"a",
                      "resources":{"limits":{"nvidia.com/gpu":18446744073709551615}}}]}})"),
      Json::parse(R"({"kind":"Pod","spec":{"containers":[{"name":"a",
                      "resources":{"limits":{"nvidia.com/gpumem":"99999999999999999999999"}}}]}})"),
      Json::parse(R"({"kind":"Pod","spec":{"containers":[{"name":"a",
                      "resources":{"limits":{"nvidia.com/gpumem":"4Gi"}}}]}})"),
  };
  for (const Json& object : objects) {
    Json review = Request(Json::object());
    review["request"]["object"] = object;
    Result<std::string> r =
        HandleAdmissionReview(review.dump(), vendors_, config_, options_, nullptr);
    ASSERT_TRUE(r.ok()) << object.dump();
    Json response = Json::parse(*r)["response"];
    EXPECT_FALSE(response["allowed"].get<bool>()) << object.dump();
    EXPECT_EQ(response["status"]["code"], 400) << object.dump() << " -> " << response.dump();
  }
  Json no_object = Request(Json::object());
  no_object["request"].erase("object");
  Result<std::string> r =
      HandleAdmissionReview(no_object.dump(), vendors_, config_, options_, nullptr);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(Json::parse(*r)["response"]["status"]["code"], 400);

  Json not_pod = Request(GpuPod({{"nvidia.com/gpu", "1"}}));
  not_pod["request"]["kind"]["kind"] = "Deployment";
  r = HandleAdmissionReview(not_pod.dump(), vendors_, config_, options_, nullptr);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(Json::parse(*r)["response"]["status"]["code"], 400);
}

TEST_F(WebhookTest, CorruptedBodiesNeverCrash) {
  FakeQuota fake;
  nvidia().overwrite_env = true;
  nvidia().runtime_class_name = "nvidia";
  Json pod = PodOf(
      {Container("a", {{"nvidia.com/gpu", "1"}, {"nvidia.com/priority", "1"}}), Container("b")},
      {Container("i", {{"nvidia.com/gpumem", "10"}})});
  pod["spec"]["containers"][1]["env"] = Json::parse(R"([{"name":"X","value":"y"}])");
  const std::string body = Request(pod).dump();
  std::mt19937 rng(12345);
  const std::string alphabet = "{}[]\":,0123456789-.eE\\ntfa/~x";
  int answered = 0, patched = 0;
  for (int i = 0; i < 3000; ++i) {
    std::string mutated = body;
    int edits = 1 + static_cast<int>(rng() % 4);
    for (int e = 0; e < edits; ++e) {
      size_t at = rng() % mutated.size();
      switch (rng() % 3) {
        case 0:
          mutated[at] = alphabet[rng() % alphabet.size()];
          break;
        case 1:
          mutated.erase(at, 1 + rng() % 8);
          break;
        default:
          mutated.insert(at, 1, alphabet[rng() % alphabet.size()]);
      }
      if (mutated.empty()) mutated = "{";
    }
    Result<std::string> r = HandleAdmissionReview(mutated, vendors_, config_, options_, &fake);
    if (r.ok()) {
      ++answered;
      Json answer = Json::parse(*r, nullptr, false);
      ASSERT_FALSE(answer.is_discarded());
      ASSERT_TRUE(answer["response"].is_object());
      if (answer["response"].contains("patch")) {
        // Whatever was accepted, the patch applies cleanly to what was sent.
        Json sent = Json::parse(mutated)["request"]["object"];
        Json patch =
            Json::parse(Base64Decode(answer["response"]["patch"].get<std::string>()).value());
        EXPECT_NO_THROW(sent.patch(patch)) << mutated;
        ++patched;
      }
    }
  }
  EXPECT_GT(answered, 0);
  EXPECT_GT(patched, 0);
}

}  // namespace
}  // namespace hami::extender
