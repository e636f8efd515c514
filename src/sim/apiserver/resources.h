// The resource types the simulated API server serves, and the discovery documents derived from
// them (/api, /api/v1, /apis, /apis/<group>/<version>).
//
// Thread safety: the registry is immutable after construction; share it freely.
#pragma once

#include <string>
#include <vector>

namespace hami::sim {

struct ResourceInfo {
  std::string group;     // "" for the core group
  std::string version;   // "v1"
  std::string resource;  // plural, e.g. "pods"
  std::string singular;  // "pod"
  std::string kind;      // "Pod"
  bool namespaced = true;
  bool has_status = false;   // a /status subresource exists; the main endpoint ignores status
  bool has_binding = false;  // pods/binding and pods/log
  std::vector<std::string> short_names;

  // "v1" or "<group>/<version>".
  std::string api_version() const { return group.empty() ? version : group + "/" + version; }
  std::string list_kind() const { return kind + "List"; }
  // "pods" or "leases.coordination.k8s.io" (used in error messages, like the real server).
  std::string qualified() const { return group.empty() ? resource : resource + "." + group; }
};

class ResourceRegistry {
 public:
  ResourceRegistry();
  // nullptr when unknown.
  const ResourceInfo* Find(const std::string& group, const std::string& version,
                           const std::string& resource) const;
  const std::vector<ResourceInfo>& all() const { return resources_; }

  // Discovery documents (JSON text).
  std::string CoreVersions(const std::string& server_address) const;  // /api
  std::string Groups() const;                                         // /apis
  // /api/v1 or /apis/<group>/<version>; "" when the group/version is not served.
  std::string ResourceList(const std::string& group, const std::string& version) const;
  // /openapi/v3: the index of group-version documents.
  std::string OpenApiV3Index() const;
  // /openapi/v3/api/v1 or /openapi/v3/apis/<group>/<version>: a minimal OpenAPI 3 document that
  // lists, per resource, the item path with a PATCH operation tagged with its
  // x-kubernetes-group-version-kind and the fieldValidation query parameter. That is what kubectl
  // reads to decide that the server validates fields itself (so it needs no schemas). "" when
  // the group/version is not served.
  std::string OpenApiV3GroupVersion(const std::string& group, const std::string& version) const;

 private:
  std::vector<ResourceInfo> resources_;
};

}  // namespace hami::sim
