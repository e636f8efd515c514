// Label and field selectors as the Kubernetes API accepts them in ?labelSelector= and
// ?fieldSelector= (and label selectors in the metav1.LabelSelector JSON form used by webhook
// namespaceSelector/objectSelector).
//
//   labels: "app=web,tier!=db,env in (a,b),zone notin (x),gpu,!legacy"   (= and == are equal)
//   fields: "metadata.name=p1,spec.nodeName!=,status.phase=Running"
//
// Field selectors accept any dotted path into the object (a missing field reads as ""); the real
// server restricts the set per resource, we are more permissive.
//
// Thread safety: immutable values after parsing.
#pragma once

#include <map>
#include <nlohmann/json_fwd.hpp>
#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"

namespace hami::sim {

class LabelSelector {
 public:
  enum class Op { kEquals, kNotEquals, kIn, kNotIn, kExists, kDoesNotExist };
  struct Requirement {
    std::string key;
    Op op;
    std::vector<std::string> values;
  };

  // The empty selector matches everything.
  static Result<LabelSelector> Parse(std::string_view text);
  // metav1.LabelSelector: {"matchLabels": {...}, "matchExpressions": [{key, operator, values}]}.
  // A null/absent selector matches everything.
  static Result<LabelSelector> FromJson(const nlohmann::json& selector);

  bool Matches(const std::map<std::string, std::string>& labels) const;
  // Matches the object's metadata.labels.
  bool MatchesObject(const nlohmann::json& object) const;
  bool empty() const { return requirements_.empty(); }

 private:
  std::vector<Requirement> requirements_;
};

class FieldSelector {
 public:
  static Result<FieldSelector> Parse(std::string_view text);
  bool Matches(const nlohmann::json& object) const;
  bool empty() const { return terms_.empty(); }
  // The value required for `field` by an equality term, or nullptr.
  const std::string* RequiredValue(std::string_view field) const;

 private:
  struct Term {
    std::string field;
    bool equals;
    std::string value;
  };
  std::vector<Term> terms_;
};

// Reads a dotted path ("spec.nodeName") from an object as a string; "" when absent. Strings are
// returned as-is, other scalars in their JSON form.
std::string FieldValue(const nlohmann::json& object, std::string_view path);

}  // namespace hami::sim
