#include "sim/apiserver/rbac.h"

#include <algorithm>
#include <nlohmann/json.hpp>

#include "sim/apiserver/json_fields.h"

namespace hami::sim {

using nlohmann::json;

namespace {

// o[key] for a possibly malformed stored object (a client may create a binding without roleRef
// or an object whose metadata is not an object): null when absent. Never `operator[]` on a const
// json here: a missing key there is undefined behaviour.
using json_fields::Member;
using json_fields::Str;

// Whether the string list `o[key]` holds `want` (or "*" when `star` is set).
bool ListHas(const json& o, const char* key, const std::string& want, bool star = true) {
  auto it = o.find(key);
  if (it == o.end() || !it->is_array()) return false;
  for (const json& v : *it) {
    if (!v.is_string()) continue;
    const std::string& s = v.get_ref<const std::string&>();
    if (s == want || (star && s == "*")) return true;
  }
  return false;
}

bool ResourceMatches(const json& rule, const Attributes& a) {
  auto it = rule.find("resources");
  if (it == rule.end() || !it->is_array()) return false;
  std::string full = a.subresource.empty() ? a.resource : a.resource + "/" + a.subresource;
  for (const json& v : *it) {
    if (!v.is_string()) continue;
    const std::string& s = v.get_ref<const std::string&>();
    if (s == full || s == "*") return true;
    if (!a.subresource.empty() && s == "*/" + a.subresource) return true;
  }
  return false;
}

bool RuleAllows(const json& rule, const Attributes& a) {
  if (!rule.is_object()) return false;
  if (!ListHas(rule, "verbs", a.verb)) return false;
  if (!ListHas(rule, "apiGroups", a.api_group)) return false;
  if (!ResourceMatches(rule, a)) return false;
  const json& names = Member(rule, "resourceNames");
  if (names.is_array() && !names.empty()) {
    return !a.name.empty() && ListHas(rule, "resourceNames", a.name, /*star=*/false);
  }
  return true;
}

bool SubjectMatches(const json& subject, const UserInfo& user, const std::string& binding_ns) {
  if (!subject.is_object()) return false;
  std::string kind = Str(subject, "kind"), name = Str(subject, "name");
  if (kind == "User") return name == user.name;
  if (kind == "Group") {
    return std::find(user.groups.begin(), user.groups.end(), name) != user.groups.end();
  }
  if (kind == "ServiceAccount") {
    std::string ns = Str(subject, "namespace");
    if (ns.empty()) ns = binding_ns;
    return user.name == "system:serviceaccount:" + ns + ":" + name;
  }
  return false;
}

bool BindingMatches(const json& binding, const UserInfo& user) {
  const json& subjects = Member(binding, "subjects");
  if (!subjects.is_array()) return false;
  std::string ns = Str(Member(binding, "metadata"), "namespace");
  for (const json& s : subjects) {
    if (SubjectMatches(s, user, ns)) return true;
  }
  return false;
}

const json* FindRole(const std::vector<ObjectPtr>& roles, const std::string& ns,
                     const std::string& name) {
  for (const ObjectPtr& r : roles) {
    const json& md = Member(*r, "metadata");
    if (Str(md, "name") == name && Str(md, "namespace") == ns) return r.get();
  }
  return nullptr;
}

bool RoleAllows(const json* role, const Attributes& a) {
  if (role == nullptr) return false;
  const json& rules = Member(*role, "rules");
  if (!rules.is_array()) return false;
  return std::any_of(rules.begin(), rules.end(),
                     [&](const json& rule) { return RuleAllows(rule, a); });
}

}  // namespace

UserInfo ServiceAccountUser(const std::string& ns, const std::string& name) {
  return UserInfo{
      "system:serviceaccount:" + ns + ":" + name,
      {"system:serviceaccounts", "system:serviceaccounts:" + ns, "system:authenticated"}};
}

bool Allows(const RbacPolicy& policy, const UserInfo& user, const Attributes& a) {
  if (std::find(user.groups.begin(), user.groups.end(), "system:masters") != user.groups.end()) {
    return true;
  }
  for (const ObjectPtr& b : policy.cluster_role_bindings) {
    if (!BindingMatches(*b, user)) continue;
    const json& ref = Member(*b, "roleRef");
    if (Str(ref, "kind") != "ClusterRole") continue;
    if (RoleAllows(FindRole(policy.cluster_roles, "", Str(ref, "name")), a)) return true;
  }
  if (a.ns.empty()) return false;
  for (const ObjectPtr& b : policy.role_bindings) {
    if (Str(Member(*b, "metadata"), "namespace") != a.ns || !BindingMatches(*b, user)) continue;
    const json& ref = Member(*b, "roleRef");
    const json* role = Str(ref, "kind") == "ClusterRole"
                           ? FindRole(policy.cluster_roles, "", Str(ref, "name"))
                       : Str(ref, "kind") == "Role" ? FindRole(policy.roles, a.ns, Str(ref, "name"))
                                                    : nullptr;
    if (RoleAllows(role, a)) return true;
  }
  return false;
}

std::string ForbiddenMessage(const UserInfo& user, const Attributes& a) {
  std::string resource = a.subresource.empty() ? a.resource : a.resource + "/" + a.subresource;
  std::string qualified = a.api_group.empty() ? a.resource : a.resource + "." + a.api_group;
  std::string out = qualified;
  if (!a.name.empty()) out += " \"" + a.name + "\"";
  out += " is forbidden: User \"" + user.name + "\" cannot " + a.verb + " resource \"" + resource +
         "\" in API group \"" + a.api_group + "\"";
  out += a.ns.empty() ? " at the cluster scope" : " in the namespace \"" + a.ns + "\"";
  return out;
}

}  // namespace hami::sim
