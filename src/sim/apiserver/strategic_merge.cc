#include "sim/apiserver/strategic_merge.h"

#include <algorithm>
#include <map>
#include <nlohmann/json.hpp>
#include <vector>

namespace hami::sim {
namespace {

using json = nlohmann::json;

// The patch strategy of one field and the fields below it (of the object, or of each element
// of the list).
struct Field {
  bool merge_list = false;  // patchStrategy "merge" on a list
  std::string merge_key;    // patchMergeKey; empty: a list of scalars merged as a set
  std::map<std::string, const Field*> fields;
};

const Field* Child(const Field* f, const std::string& name) {
  if (f == nullptr) return nullptr;
  auto it = f->fields.find(name);
  return it == f->fields.end() ? nullptr : it->second;
}

// ---- the patch strategies of the stored kinds (k8s.io/api struct tags) ---------------------

const Field* Leaf() {
  static const Field f;
  return &f;
}
// The tables are built once and live for the process (never freed, so they stay reachable).
Field* Merged(std::string key, std::map<std::string, const Field*> fields = {}) {
  return new Field{true, std::move(key), std::move(fields)};
}
Field* Object(std::map<std::string, const Field*> fields) {
  return new Field{false, "", std::move(fields)};
}

const Field* ObjectMeta() {
  static const Field* f = Object({{"finalizers", Merged("")}, {"ownerReferences", Merged("uid")}});
  return f;
}

const Field* PodSpec() {
  static const Field* f = [] {
    static const Field* container = Object({{"ports", Merged("containerPort")},
                                            {"env", Merged("name")},
                                            {"volumeMounts", Merged("mountPath")},
                                            {"volumeDevices", Merged("devicePath")}});
    return Object({{"volumes", Merged("name")},  // merge,retainKeys: elements carry $retainKeys
                   {"initContainers", Merged("name", container->fields)},
                   {"containers", Merged("name", container->fields)},
                   {"ephemeralContainers", Merged("name", container->fields)},
                   {"imagePullSecrets", Merged("name")},
                   {"hostAliases", Merged("ip")},
                   {"topologySpreadConstraints", Merged("topologyKey")},
                   {"schedulingGates", Merged("name")},
                   {"resourceClaims", Merged("name")}});
  }();
  return f;
}

const Field* WithConditions() {
  static const Field* f = Object({{"conditions", Merged("type")}});
  return f;
}

const Field* Template() {
  static const Field* f = Object({{"metadata", ObjectMeta()}, {"spec", PodSpec()}});
  return f;
}

const Field* KindSchema(const std::string& kind) {
  // Never destroyed, like the fields it points to (a destroyed map would orphan them at exit).
  static const std::map<std::string, const Field*>& kinds = *[] {
    auto* m_ptr = new std::map<std::string, const Field*>;
    auto& m = *m_ptr;
    const Field* meta = ObjectMeta();
    m["Pod"] = Object({{"metadata", meta},
                       {"spec", PodSpec()},
                       {"status", Object({{"conditions", Merged("type")},
                                          {"hostIPs", Merged("ip")},
                                          {"podIPs", Merged("ip")},
                                          {"resourceClaimStatuses", Merged("name")}})}});
    m["Deployment"] = Object({{"metadata", meta},
                              {"spec", Object({{"template", Template()}, {"strategy", Leaf()}})},
                              {"status", WithConditions()}});
    m["DaemonSet"] = Object({{"metadata", meta},
                             {"spec", Object({{"template", Template()}})},
                             {"status", WithConditions()}});
    m["Node"] = Object(
        {{"metadata", meta},
         {"spec", Object({{"podCIDRs", Merged("")}})},
         {"status", Object({{"conditions", Merged("type")}, {"addresses", Merged("type")}})}});
    m["Namespace"] = Object({{"metadata", meta}, {"status", WithConditions()}});
    m["Service"] = Object({{"metadata", meta},
                           {"spec", Object({{"ports", Merged("port")}})},
                           {"status", WithConditions()}});
    m["ServiceAccount"] = Object({{"metadata", meta}, {"secrets", Merged("name")}});
    m["MutatingWebhookConfiguration"] = Object(
        {{"metadata", meta}, {"webhooks", Merged("name", {{"matchConditions", Merged("name")}})}});
    return m_ptr;
  }();
  auto it = kinds.find(kind);
  if (it != kinds.end()) return it->second;
  static const Field* only_meta = Object({{"metadata", ObjectMeta()}});
  return only_meta;
}

// ---- merging ---------------------------------------------------------------------------------

constexpr char kSetOrder[] = "$setElementOrder/";
constexpr char kDeleteFrom[] = "$deleteFromPrimitiveList/";

bool StartsWith(const std::string& s, const char* prefix) { return s.rfind(prefix, 0) == 0; }

// The identity of a list element: its merge key's value, or itself in a list of scalars.
const json* Identity(const json& element, const std::string& key) {
  if (key.empty()) return &element;
  if (!element.is_object()) return nullptr;
  auto it = element.find(key);
  return it == element.end() ? nullptr : &*it;
}

long IndexOf(const json& list, const json& id, const std::string& key) {
  for (size_t i = 0; i < list.size(); ++i) {
    const json* e = Identity(list[i], key);
    if (e != nullptr && *e == id) return static_cast<long>(i);
  }
  return -1;
}

Result<bool> MergeMap(json& into, const json& patch, const Field* schema);

// A patch value placed where the original has nothing: its directives are applied to an empty
// value, so none reach the stored object. False when it deletes itself.
Result<bool> Fresh(json& out, const json& patch, const Field* schema);

Result<json> MergeList(const json& original, const json& patch, const Field* schema,
                       const std::string& where) {
  const std::string& key = schema->merge_key;
  // {"$patch": "replace"} anywhere in the list: the list is the other elements.
  for (const json& p : patch) {
    if (p.is_object() && p.value("$patch", json()) == "replace") {
      json out = json::array();
      for (const json& q : patch) {
        if (&q == &p) continue;
        json fresh;
        HAMI_ASSIGN_OR_RETURN(bool keep, Fresh(fresh, q, schema));
        if (keep) out.push_back(std::move(fresh));
      }
      return out;
    }
  }
  json out = original.is_array() ? original : json::array();
  for (const json& p : patch) {
    if (key.empty()) {  // a set of scalars
      if (p.is_object() || p.is_array()) {
        return InvalidArgumentError(where + ": a merged list of scalars holds " + p.dump());
      }
      if (IndexOf(out, p, key) < 0) out.push_back(p);
      continue;
    }
    if (!p.is_object()) {
      return InvalidArgumentError(where + ": element " + p.dump() + " of a list merged by \"" +
                                  key + "\" is not an object");
    }
    const json* id = Identity(p, key);
    if (id == nullptr) {
      return InvalidArgumentError(where + ": element " + p.dump() +
                                  " does not contain the declared merge key \"" + key + "\"");
    }
    long at = IndexOf(out, *id, key);
    if (p.value("$patch", json()) == "delete") {
      while (at >= 0) {
        out.erase(static_cast<size_t>(at));
        at = IndexOf(out, *id, key);
      }
      continue;
    }
    if (at >= 0) {
      HAMI_ASSIGN_OR_RETURN(bool keep, MergeMap(out[static_cast<size_t>(at)], p, schema));
      if (!keep) out.erase(static_cast<size_t>(at));
    } else {
      json fresh;
      HAMI_ASSIGN_OR_RETURN(bool keep, Fresh(fresh, p, schema));
      if (keep) out.push_back(std::move(fresh));
    }
  }
  return out;
}

// Orders `list` (merged) by `order`: the listed elements in that order; the others keep their
// place relative to the listed ones as the pre-patch list `before` had them.
Status ApplyOrder(json& list, const json& order, const json& before, const std::string& key,
                  const std::string& where) {
  if (!order.is_array()) return InvalidArgumentError(where + ": $setElementOrder must be a list");
  std::vector<json> listed, others;
  for (json& e : list) {
    const json* id = Identity(e, key);
    bool in_order = false;
    if (id != nullptr) {
      for (const json& o : order) {
        const json* oid = Identity(o, key);
        in_order |= oid != nullptr && *oid == *id;
      }
    }
    (in_order ? listed : others).push_back(std::move(e));
  }
  auto rank = [&](const json& e) {
    const json* id = Identity(e, key);
    for (size_t i = 0; i < order.size(); ++i) {
      const json* oid = Identity(order[i], key);
      if (id != nullptr && oid != nullptr && *oid == *id) return i;
    }
    return order.size();
  };
  std::stable_sort(listed.begin(), listed.end(),
                   [&](const json& a, const json& b) { return rank(a) < rank(b); });
  auto was_at = [&](const json& e) {
    const json* id = Identity(e, key);
    return id == nullptr || !before.is_array() ? -1L : IndexOf(before, *id, key);
  };
  json out = json::array();
  size_t i = 0, j = 0;
  while (i < others.size() || j < listed.size()) {
    bool take_other;
    if (j >= listed.size()) {
      take_other = true;
    } else if (i >= others.size()) {
      take_other = false;
    } else {
      long a = was_at(others[i]), b = was_at(listed[j]);
      take_other = a >= 0 && b >= 0 && a < b;
    }
    out.push_back(std::move(take_other ? others[i++] : listed[j++]));
  }
  list = std::move(out);
  return OkStatus();
}

// $retainKeys: drops every key of `into` the list does not name.
Status RetainKeys(json& into, const json& keys) {
  if (!keys.is_array()) return InvalidArgumentError("$retainKeys must be a list of keys");
  for (auto it = into.begin(); it != into.end();) {
    if (std::find(keys.begin(), keys.end(), json(it.key())) == keys.end()) {
      it = into.erase(it);
    } else {
      ++it;
    }
  }
  return OkStatus();
}

// The list directives that act before the fields merge: $deleteFromPrimitiveList removes its
// values, and $setElementOrder records the list as it was (in `before`, by field) so that the
// order can be applied after the merge.
Status ApplyListDirectives(json& into, const json& patch, std::map<std::string, json>* before) {
  for (auto it = patch.begin(); it != patch.end(); ++it) {
    const std::string& k = it.key();
    if (StartsWith(k, kSetOrder)) {
      std::string field = k.substr(sizeof(kSetOrder) - 1);
      (*before)[field] = into.value(field, json::array());
    } else if (StartsWith(k, kDeleteFrom)) {
      std::string field = k.substr(sizeof(kDeleteFrom) - 1);
      if (!it->is_array()) return InvalidArgumentError(k + " must be a list");
      auto list = into.find(field);
      if (list == into.end() || !list->is_array()) continue;
      for (const json& gone : *it) {
        list->erase(std::remove(list->begin(), list->end(), gone), list->end());
      }
    }
  }
  return OkStatus();
}

// Merges the patch's value `v` for key `k` into `into`: null deletes, an object merges (or is
// created), a list the schema declares mergeable merges by its key, anything else replaces.
Status MergeField(json& into, const std::string& k, const json& v, const Field* schema) {
  const Field* child = Child(schema, k);
  if (v.is_null()) {
    into.erase(k);
  } else if (v.is_object()) {
    auto cur = into.find(k);
    Result<bool> keep = true;
    if (cur != into.end() && cur->is_object()) {
      keep = MergeMap(*cur, v, child);
    } else {
      json fresh;
      keep = Fresh(fresh, v, child);
      if (keep.ok() && *keep) into[k] = std::move(fresh);
    }
    if (!keep.ok()) return keep.status();
    if (!*keep) into.erase(k);
  } else if (v.is_array() && child != nullptr && child->merge_list) {
    HAMI_ASSIGN_OR_RETURN(json merged, MergeList(into.value(k, json::array()), v, child, k));
    into[k] = std::move(merged);
  } else if (v.is_array()) {
    json fresh;
    HAMI_ASSIGN_OR_RETURN(bool keep, Fresh(fresh, v, nullptr));
    if (keep) into[k] = std::move(fresh);
  } else {
    into[k] = v;
  }
  return OkStatus();
}

// $setElementOrder, after the merge, for the lists ApplyListDirectives recorded.
Status ApplyOrders(json& into, const json& patch, const std::map<std::string, json>& before,
                   const Field* schema) {
  for (auto& [field, was] : before) {
    const Field* child = Child(schema, field);
    auto list = into.find(field);
    if (child == nullptr || !child->merge_list || list == into.end() || !list->is_array()) {
      continue;  // an order for a list that is replaced, or absent, changes nothing
    }
    HAMI_RETURN_IF_ERROR(ApplyOrder(*list, patch[kSetOrder + field], was, child->merge_key, field));
  }
  return OkStatus();
}

Result<bool> MergeMap(json& into, const json& patch, const Field* schema) {
  if (!into.is_object()) into = json::object();
  if (auto d = patch.find("$patch"); d != patch.end()) {
    if (*d == "delete") return false;
    if (*d == "replace") {
      json rest = patch;
      rest.erase("$patch");
      json fresh;
      HAMI_ASSIGN_OR_RETURN(bool keep, Fresh(fresh, rest, schema));
      into = keep ? std::move(fresh) : json::object();
      return true;
    }
    if (*d != "merge") return InvalidArgumentError("unknown patch type: " + d->dump());
  }
  if (auto r = patch.find("$retainKeys"); r != patch.end()) {
    HAMI_RETURN_IF_ERROR(RetainKeys(into, *r));
  }
  std::map<std::string, json> before;  // lists as they were, for $setElementOrder
  HAMI_RETURN_IF_ERROR(ApplyListDirectives(into, patch, &before));
  for (auto it = patch.begin(); it != patch.end(); ++it) {
    const std::string& k = it.key();
    if (k == "$patch" || k == "$retainKeys" || StartsWith(k, kSetOrder) ||
        StartsWith(k, kDeleteFrom)) {
      continue;
    }
    if (!k.empty() && k[0] == '$') return InvalidArgumentError("unknown directive " + k);
    HAMI_RETURN_IF_ERROR(MergeField(into, k, it.value(), schema));
  }
  HAMI_RETURN_IF_ERROR(ApplyOrders(into, patch, before, schema));
  return true;
}

Result<bool> Fresh(json& out, const json& patch, const Field* schema) {
  if (patch.is_object()) {
    out = json::object();
    return MergeMap(out, patch, schema);
  }
  if (patch.is_array()) {
    out = json::array();
    for (const json& e : patch) {
      if (e.is_object() && e.contains("$patch")) continue;  // nothing to delete or replace
      json fresh;
      HAMI_ASSIGN_OR_RETURN(bool keep, Fresh(fresh, e, schema));
      if (keep) out.push_back(std::move(fresh));
    }
    return true;
  }
  out = patch;
  return true;
}

}  // namespace

Status ApplyStrategicMergePatch(const std::string& kind, json& object, const json& patch) {
  if (!patch.is_object()) return InvalidArgumentError("a strategic merge patch must be an object");
  HAMI_ASSIGN_OR_RETURN(bool keep, MergeMap(object, patch, KindSchema(kind)));
  if (!keep) return InvalidArgumentError("the patch deletes the whole object");
  return OkStatus();
}

}  // namespace hami::sim
