// Role-based access control for the simulated API server: the subset of kube-apiserver's RBAC
// authorizer that a least-privilege deployment needs to be checked against.
//
//   RbacPolicy policy;                               // snapshot of the RBAC objects
//   policy.cluster_roles = ...; policy.cluster_role_bindings = ...;
//   policy.roles = ...; policy.role_bindings = ...;  // all namespaces
//   UserInfo u = ServiceAccountUser("kube-system", "hami-monitor");
//   Attributes a{.verb = "patch", .resource = "nodes", .name = "node-a"};
//   if (!Allows(policy, u, a)) res = 403 with ForbiddenMessage(u, a);
//
// Semantics, as the real authorizer: a request is allowed when any rule of any role bound to the
// user (by name, by one of its groups, or as a ServiceAccount subject) matches. A ClusterRole
// bound by a ClusterRoleBinding applies everywhere; a Role or ClusterRole bound by a RoleBinding
// applies in the binding's namespace only. A rule matches when its verbs, apiGroups and resources
// ("pods", "pods/binding", "*" for everything, "*/status") contain the request's, and, if it lists
// resourceNames, the request names one of them (so list, watch and create, which name no object,
// never match such a rule). Bindings to roles that do not exist grant nothing. Members of
// "system:masters" may do everything. Not modelled: aggregated ClusterRoles, nonResourceURLs
// (every authenticated user may read discovery, /version and /openapi), escalation checks.
//
// Thread safety: pure functions over values.
#pragma once

#include <string>
#include <vector>

#include "sim/apiserver/store.h"

namespace hami::sim {

struct UserInfo {
  std::string name;                 // "system:serviceaccount:<ns>:<name>", "admin", ...
  std::vector<std::string> groups;  // "system:authenticated", "system:serviceaccounts", ...
};

// A ServiceAccount's identity as kube-apiserver derives it from the account's token.
UserInfo ServiceAccountUser(const std::string& ns, const std::string& name);

struct Attributes {
  std::string verb;         // get list watch create update patch delete deletecollection
  std::string api_group;    // "" for the core group
  std::string resource;     // plural: "pods"
  std::string subresource;  // "", "binding", "status", "log", "token"
  std::string ns;           // "" for cluster-scoped objects and cluster-wide lists
  std::string name;         // "" for list, watch, create and deletecollection
};

struct RbacPolicy {
  std::vector<ObjectPtr> cluster_roles, cluster_role_bindings, roles, role_bindings;
};

bool Allows(const RbacPolicy& policy, const UserInfo& user, const Attributes& a);

// kube-apiserver's wording, e.g. `pods "p" is forbidden: User "system:serviceaccount:kube-system:
// hami-monitor" cannot patch resource "pods" in API group "" in the namespace "default"`.
std::string ForbiddenMessage(const UserInfo& user, const Attributes& a);

}  // namespace hami::sim
