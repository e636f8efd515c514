#include "sim/world/manifests.h"

#include <sstream>

#include "common/base64.h"

namespace hami::sim {
namespace {

using Json = nlohmann::json;

}  // namespace

std::vector<std::string> SplitYamlDocuments(const std::string& text) {
  std::vector<std::string> docs(1);
  std::istringstream in(text);
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("---", 0) == 0) {
      docs.emplace_back();
      continue;
    }
    docs.back() += line + "\n";
  }
  std::vector<std::string> out;
  for (std::string& d : docs) {
    if (d.find_first_not_of(" \n\t") != std::string::npos) out.push_back(std::move(d));
  }
  return out;
}

k8s::Object HamiWebhookConfiguration(const std::string& url, const std::string& ca_pem) {
  Json hook;
  hook["apiVersion"] = "admissionregistration.k8s.io/v1";
  hook["kind"] = "MutatingWebhookConfiguration";
  hook["metadata"]["name"] = "hami-webhook";
  Json w;
  w["name"] = "vgpu.hami.io";
  w["admissionReviewVersions"] = {"v1beta1"};
  w["clientConfig"]["url"] = url + "/webhook";
  w["clientConfig"]["caBundle"] = Base64Encode(ca_pem);
  w["failurePolicy"] = "Fail";
  w["sideEffects"] = "None";
  w["timeoutSeconds"] = 10;
  w["rules"] = Json::array({Json{{"operations", {"CREATE"}},
                                 {"apiGroups", {""}},
                                 {"apiVersions", {"v1"}},
                                 {"resources", {"pods"}},
                                 {"scope", "*"}}});
  w["objectSelector"]["matchExpressions"] = Json::array(
      {Json{{"key", "hami.io/webhook"}, {"operator", "NotIn"}, {"values", {"ignore"}}}});
  hook["webhooks"] = Json::array({w});
  return hook;
}

std::string KubeSchedulerConfigYaml(const std::string& url, const std::string& leader_election) {
  bool https = url.rfind("https://", 0) == 0;
  return R"(apiVersion: kubescheduler.config.k8s.io/v1
kind: KubeSchedulerConfiguration
leaderElection:
)" + leader_election +
         R"(profiles:
- schedulerName: hami-scheduler
extenders:
- urlPrefix: ")" +
         url + R"("
  filterVerb: filter
  bindVerb: bind
)" + (https ? "  enableHTTPS: true\n  tlsConfig:\n    insecure: true\n" : "") +
         R"(  nodeCacheCapable: true
  weight: 1
  httpTimeout: 30s
  managedResources:
  - name: nvidia.com/gpu
    ignoredByScheduler: true
  - name: nvidia.com/gpumem
    ignoredByScheduler: true
  - name: nvidia.com/gpucores
    ignoredByScheduler: true
  - name: nvidia.com/gpumem-percentage
    ignoredByScheduler: true
  - name: nvidia.com/priority
    ignoredByScheduler: true
)";
}

}  // namespace hami::sim
