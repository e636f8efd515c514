// Fuzzes the simulated API server's RBAC authorizer with arbitrary stored objects (clients create
// Roles and bindings of any shape): JSON text, one policy object per line, the first line the
// request's attributes. It must decide, never crash or throw; a system:masters user is always
// allowed and an empty policy never allows anyone else.
#include <cstddef>
#include <cstdint>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>

#include "sim/apiserver/rbac.h"

using nlohmann::json;

namespace {

std::string Field(const json& o, const char* k) {
  return o.is_object() && o.contains(k) && o[k].is_string() ? o[k].get<std::string>() : "";
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::istringstream in(std::string(reinterpret_cast<const char*>(data), size));
  std::string line;
  hami::sim::Attributes a;
  hami::sim::RbacPolicy policy;
  bool first = true;
  while (std::getline(in, line)) {
    json o = json::parse(line, nullptr, /*allow_exceptions=*/false);
    if (o.is_discarded()) continue;
    if (first) {
      a = {Field(o, "verb"), Field(o, "group"), Field(o, "resource"),
           Field(o, "sub"),  Field(o, "ns"),    Field(o, "name")};
      first = false;
      continue;
    }
    auto p = std::make_shared<const json>(o);
    switch (line.size() % 4) {
      case 0:
        policy.cluster_roles.push_back(p);
        break;
      case 1:
        policy.cluster_role_bindings.push_back(p);
        break;
      case 2:
        policy.roles.push_back(p);
        break;
      default:
        policy.role_bindings.push_back(p);
        break;
    }
  }
  hami::sim::UserInfo user = hami::sim::ServiceAccountUser(a.ns, a.name);
  (void)hami::sim::Allows(policy, user, a);
  (void)hami::sim::ForbiddenMessage(user, a);
  if (!hami::sim::Allows(policy, hami::sim::UserInfo{"root", {"system:masters"}}, a)) {
    __builtin_trap();
  }
  if (hami::sim::Allows(hami::sim::RbacPolicy{}, user, a)) __builtin_trap();
  return 0;
}
