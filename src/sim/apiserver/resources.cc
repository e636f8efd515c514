#include "sim/apiserver/resources.h"

#include <map>
#include <nlohmann/json.hpp>

namespace hami::sim {

using nlohmann::json;

ResourceRegistry::ResourceRegistry() {
  auto add = [this](std::string group, std::string resource, std::string singular, std::string kind,
                    bool namespaced, bool has_status, std::vector<std::string> short_names) {
    ResourceInfo r;
    r.group = std::move(group);
    r.version = "v1";
    r.resource = std::move(resource);
    r.singular = std::move(singular);
    r.kind = std::move(kind);
    r.namespaced = namespaced;
    r.has_status = has_status;
    r.has_binding = r.group.empty() && r.resource == "pods";
    r.short_names = std::move(short_names);
    resources_.push_back(std::move(r));
  };
  add("", "namespaces", "namespace", "Namespace", false, true, {"ns"});
  add("", "nodes", "node", "Node", false, true, {"no"});
  add("", "pods", "pod", "Pod", true, true, {"po"});
  add("", "events", "event", "Event", true, false, {"ev"});
  add("", "configmaps", "configmap", "ConfigMap", true, false, {"cm"});
  add("", "resourcequotas", "resourcequota", "ResourceQuota", true, true, {"quota"});
  add("", "services", "service", "Service", true, true, {"svc"});
  add("", "serviceaccounts", "serviceaccount", "ServiceAccount", true, false, {"sa"});
  add("", "secrets", "secret", "Secret", true, false, {});
  add("apps", "deployments", "deployment", "Deployment", true, true, {"deploy"});
  add("apps", "daemonsets", "daemonset", "DaemonSet", true, true, {"ds"});
  add("rbac.authorization.k8s.io", "clusterroles", "clusterrole", "ClusterRole", false, false, {});
  add("rbac.authorization.k8s.io", "clusterrolebindings", "clusterrolebinding",
      "ClusterRoleBinding", false, false, {});
  add("rbac.authorization.k8s.io", "roles", "role", "Role", true, false, {});
  add("rbac.authorization.k8s.io", "rolebindings", "rolebinding", "RoleBinding", true, false, {});
  add("events.k8s.io", "events", "event", "Event", true, false, {"ev"});
  add("coordination.k8s.io", "leases", "lease", "Lease", true, false, {});
  add("admissionregistration.k8s.io", "mutatingwebhookconfigurations",
      "mutatingwebhookconfiguration", "MutatingWebhookConfiguration", false, false, {});
}

const ResourceInfo* ResourceRegistry::Find(const std::string& group, const std::string& version,
                                           const std::string& resource) const {
  for (const ResourceInfo& r : resources_) {
    if (r.group == group && r.version == version && r.resource == resource) return &r;
  }
  return nullptr;
}

std::string ResourceRegistry::CoreVersions(const std::string& server_address) const {
  json doc = {{"kind", "APIVersions"},
              {"versions", {"v1"}},
              {"serverAddressByClientCIDRs",
               {{{"clientCIDR", "0.0.0.0/0"}, {"serverAddress", server_address}}}}};
  return doc.dump();
}

std::string ResourceRegistry::Groups() const {
  std::map<std::string, bool> groups;
  for (const ResourceInfo& r : resources_) {
    if (!r.group.empty()) groups[r.group] = true;
  }
  json list = json::array();
  for (const auto& [g, unused] : groups) {
    json gv = {{"groupVersion", g + "/v1"}, {"version", "v1"}};
    list.push_back({{"name", g}, {"versions", {gv}}, {"preferredVersion", gv}});
  }
  json doc = {{"kind", "APIGroupList"}, {"apiVersion", "v1"}, {"groups", list}};
  return doc.dump();
}

std::string ResourceRegistry::ResourceList(const std::string& group,
                                           const std::string& version) const {
  json items = json::array();
  for (const ResourceInfo& r : resources_) {
    if (r.group != group || r.version != version) continue;
    json verbs = {"create", "delete", "deletecollection", "get",
                  "list",   "patch",  "update",           "watch"};
    json entry = {{"name", r.resource},
                  {"singularName", r.singular},
                  {"namespaced", r.namespaced},
                  {"kind", r.kind},
                  {"verbs", verbs},
                  {"storageVersionHash", ""}};
    if (!r.short_names.empty()) entry["shortNames"] = r.short_names;
    items.push_back(entry);
    if (r.has_status) {
      items.push_back({{"name", r.resource + "/status"},
                       {"singularName", ""},
                       {"namespaced", r.namespaced},
                       {"kind", r.kind},
                       {"verbs", {"get", "patch", "update"}}});
    }
    if (r.group.empty() && r.resource == "serviceaccounts") {
      items.push_back({{"name", "serviceaccounts/token"},
                       {"singularName", ""},
                       {"namespaced", true},
                       {"group", "authentication.k8s.io"},
                       {"version", "v1"},
                       {"kind", "TokenRequest"},
                       {"verbs", {"create"}}});
    }
    if (r.has_binding) {
      items.push_back({{"name", r.resource + "/binding"},
                       {"singularName", ""},
                       {"namespaced", true},
                       {"kind", "Binding"},
                       {"verbs", {"create"}}});
      items.push_back({{"name", r.resource + "/log"},
                       {"singularName", ""},
                       {"namespaced", true},
                       {"kind", "Pod"},
                       {"verbs", {"get"}}});
    }
  }
  if (items.empty()) return "";
  json doc = {{"kind", "APIResourceList"},
              {"apiVersion", "v1"},
              {"groupVersion", group.empty() ? version : group + "/" + version},
              {"resources", items}};
  return doc.dump();
}

std::string ResourceRegistry::OpenApiV3Index() const {
  json paths = json::object();
  for (const ResourceInfo& r : resources_) {
    std::string key = r.group.empty() ? "api/" + r.version : "apis/" + r.group + "/" + r.version;
    paths[key] = {{"serverRelativeURL", "/openapi/v3/" + key + "?hash=hami-sim"}};
  }
  return json{{"paths", paths}}.dump();
}

std::string ResourceRegistry::OpenApiV3GroupVersion(const std::string& group,
                                                    const std::string& version) const {
  json paths = json::object();
  for (const ResourceInfo& r : resources_) {
    if (r.group != group || r.version != version) continue;
    std::string base = group.empty() ? "/api/" + version : "/apis/" + group + "/" + version;
    std::string item =
        base + (r.namespaced ? "/namespaces/{namespace}/" : "/") + r.resource + "/{name}";
    json gvk = {{"group", r.group}, {"version", r.version}, {"kind", r.kind}};
    json param = {{"name", "fieldValidation"}, {"in", "query"}, {"schema", {{"type", "string"}}}};
    json op = {{"x-kubernetes-group-version-kind", gvk},
               {"x-kubernetes-action", "patch"},
               {"parameters", {param}},
               {"responses", {{"200", {{"description", "OK"}}}}}};
    paths[item] = {{"patch", op}};
  }
  if (paths.empty()) return "";
  json doc = {{"openapi", "3.0.0"},
              {"info", {{"title", "Kubernetes"}, {"version", "v1.32.0-hami-sim"}}},
              {"paths", paths},
              {"components", {{"schemas", json::object()}}}};
  return doc.dump();
}

}  // namespace hami::sim
