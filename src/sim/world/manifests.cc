#include "sim/world/manifests.h"

#include <yaml-cpp/yaml.h>

#include <charconv>
#include <sstream>

#include "common/base64.h"

namespace hami::sim {
namespace {

using Json = nlohmann::json;

Json ConvertYaml(const YAML::Node& n) {
  switch (n.Type()) {
    case YAML::NodeType::Map: {
      Json o = Json::object();
      for (const auto& kv : n) o[kv.first.as<std::string>()] = ConvertYaml(kv.second);
      return o;
    }
    case YAML::NodeType::Sequence: {
      Json a = Json::array();
      for (const auto& v : n) a.push_back(ConvertYaml(v));
      return a;
    }
    case YAML::NodeType::Scalar: {
      std::string s = n.Scalar();
      if (n.Tag() == "!") return s;  // quoted
      int64_t v = 0;
      auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
      if (ec == std::errc() && p == s.data() + s.size() && !s.empty()) return v;
      if (s == "true") return true;
      if (s == "false") return false;
      if (s == "null" || s == "~") return nullptr;
      return s;
    }
    default:
      return nullptr;
  }
}

}  // namespace

Result<k8s::Object> YamlToJson(const std::string& doc) {
  try {
    YAML::Node n = YAML::Load(doc);
    return ConvertYaml(n);
  } catch (const std::exception& e) {
    return InvalidArgumentError(std::string("yaml: ") + e.what());
  }
}

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
