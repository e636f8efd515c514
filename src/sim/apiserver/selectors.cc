#include "sim/apiserver/selectors.h"

#include <nlohmann/json.hpp>

namespace hami::sim {
namespace {

using nlohmann::json;

std::string_view Trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
  return s;
}

bool ValidKey(std::string_view k) {
  if (k.empty() || k.size() > 317) return false;
  for (char c : k) {
    if (!(std::isalnum(static_cast<unsigned char>(c)) || c == '.' || c == '-' || c == '_' ||
          c == '/')) {
      return false;
    }
  }
  return true;
}

bool ValidValue(std::string_view v) {
  if (v.size() > 63) return false;
  for (char c : v) {
    if (!(std::isalnum(static_cast<unsigned char>(c)) || c == '.' || c == '-' || c == '_')) {
      return false;
    }
  }
  return true;
}

// Splits on commas that are not inside parentheses.
Result<std::vector<std::string_view>> SplitTerms(std::string_view text) {
  std::vector<std::string_view> out;
  int depth = 0;
  size_t start = 0;
  for (size_t i = 0; i <= text.size(); ++i) {
    char c = i < text.size() ? text[i] : ',';
    if (c == '(') ++depth;
    if (c == ')' && --depth < 0) return InvalidArgumentError("unbalanced ')' in selector");
    if (c == ',' && depth == 0) {
      out.push_back(Trim(text.substr(start, i - start)));
      start = i + 1;
    }
  }
  if (depth != 0) return InvalidArgumentError("unbalanced '(' in selector");
  return out;
}

Status BadSelector(std::string_view term, std::string_view why) {
  return InvalidArgumentError("unable to parse requirement \"" + std::string(term) +
                              "\": " + std::string(why));
}

}  // namespace

Result<LabelSelector> LabelSelector::Parse(std::string_view text) {
  LabelSelector sel;
  text = Trim(text);
  if (text.empty()) return sel;
  HAMI_ASSIGN_OR_RETURN(std::vector<std::string_view> terms, SplitTerms(text));
  for (std::string_view term : terms) {
    if (term.empty()) return BadSelector(term, "empty requirement");
    Requirement req;
    size_t paren = term.find('(');
    if (term.front() == '!') {
      req.key = std::string(Trim(term.substr(1)));
      req.op = Op::kDoesNotExist;
    } else if (paren != std::string_view::npos) {
      if (term.back() != ')') return BadSelector(term, "expected ')' at the end");
      std::string_view head = Trim(term.substr(0, paren));
      size_t sp = head.find_last_of(" \t");
      if (sp == std::string_view::npos) return BadSelector(term, "expected 'in' or 'notin'");
      std::string_view op = head.substr(sp + 1);
      req.key = std::string(Trim(head.substr(0, sp)));
      if (op == "in") {
        req.op = Op::kIn;
      } else if (op == "notin") {
        req.op = Op::kNotIn;
      } else {
        return BadSelector(term, "unknown operator '" + std::string(op) + "'");
      }
      std::string_view inner = term.substr(paren + 1, term.size() - paren - 2);
      size_t start = 0;
      for (size_t i = 0; i <= inner.size(); ++i) {
        if (i == inner.size() || inner[i] == ',') {
          std::string_view v = Trim(inner.substr(start, i - start));
          if (!ValidValue(v)) return BadSelector(term, "invalid value '" + std::string(v) + "'");
          req.values.emplace_back(v);
          start = i + 1;
        }
      }
    } else if (size_t ne = term.find("!="); ne != std::string_view::npos) {
      req.key = std::string(Trim(term.substr(0, ne)));
      req.op = Op::kNotEquals;
      req.values.emplace_back(Trim(term.substr(ne + 2)));
    } else if (size_t eq = term.find('='); eq != std::string_view::npos) {
      size_t vstart = eq + 1 < term.size() && term[eq + 1] == '=' ? eq + 2 : eq + 1;
      req.key = std::string(Trim(term.substr(0, eq)));
      req.op = Op::kEquals;
      req.values.emplace_back(Trim(term.substr(vstart)));
    } else {
      req.key = std::string(term);
      req.op = Op::kExists;
    }
    if (!ValidKey(req.key)) return BadSelector(term, "invalid label key '" + req.key + "'");
    for (const auto& v : req.values) {
      if (!ValidValue(v)) return BadSelector(term, "invalid label value '" + v + "'");
    }
    sel.requirements_.push_back(std::move(req));
  }
  return sel;
}

Result<LabelSelector> LabelSelector::FromJson(const json& selector) {
  LabelSelector sel;
  if (selector.is_null()) return sel;
  if (!selector.is_object()) return InvalidArgumentError("label selector must be an object");
  if (auto it = selector.find("matchLabels"); it != selector.end() && it->is_object()) {
    for (const auto& [k, v] : it->items()) {
      if (!v.is_string()) return InvalidArgumentError("matchLabels values must be strings");
      sel.requirements_.push_back({k, Op::kEquals, {v.get<std::string>()}});
    }
  }
  if (auto it = selector.find("matchExpressions"); it != selector.end() && it->is_array()) {
    for (const json& e : *it) {
      if (!e.is_object() || !e.contains("key") || !e["key"].is_string() ||
          !e.contains("operator") || !e["operator"].is_string()) {
        return InvalidArgumentError("matchExpressions entries need key and operator");
      }
      Requirement req;
      req.key = e["key"].get<std::string>();
      std::string op = e["operator"].get<std::string>();
      if (op == "In") {
        req.op = Op::kIn;
      } else if (op == "NotIn") {
        req.op = Op::kNotIn;
      } else if (op == "Exists") {
        req.op = Op::kExists;
      } else if (op == "DoesNotExist") {
        req.op = Op::kDoesNotExist;
      } else {
        return InvalidArgumentError("unknown matchExpressions operator " + op);
      }
      if (auto vs = e.find("values"); vs != e.end() && vs->is_array()) {
        for (const json& v : *vs) {
          if (v.is_string()) req.values.push_back(v.get<std::string>());
        }
      }
      sel.requirements_.push_back(std::move(req));
    }
  }
  return sel;
}

bool LabelSelector::Matches(const std::map<std::string, std::string>& labels) const {
  for (const Requirement& r : requirements_) {
    auto it = labels.find(r.key);
    bool has = it != labels.end();
    auto in_values = [&] {
      for (const auto& v : r.values) {
        if (v == it->second) return true;
      }
      return false;
    };
    switch (r.op) {
      case Op::kEquals:
        if (!has || it->second != r.values[0]) return false;
        break;
      case Op::kNotEquals:
        if (has && it->second == r.values[0]) return false;
        break;
      case Op::kIn:
        if (!has || !in_values()) return false;
        break;
      case Op::kNotIn:
        if (has && in_values()) return false;
        break;
      case Op::kExists:
        if (!has) return false;
        break;
      case Op::kDoesNotExist:
        if (has) return false;
        break;
    }
  }
  return true;
}

bool LabelSelector::MatchesObject(const json& object) const {
  if (requirements_.empty()) return true;
  std::map<std::string, std::string> labels;
  if (object.is_object()) {
    auto md = object.find("metadata");
    if (md != object.end() && md->is_object()) {
      auto ls = md->find("labels");
      if (ls != md->end() && ls->is_object()) {
        for (const auto& [k, v] : ls->items()) {
          if (v.is_string()) labels[k] = v.get<std::string>();
        }
      }
    }
  }
  return Matches(labels);
}

Result<FieldSelector> FieldSelector::Parse(std::string_view text) {
  FieldSelector sel;
  text = Trim(text);
  if (text.empty()) return sel;
  size_t start = 0;
  for (size_t i = 0; i <= text.size(); ++i) {
    if (i < text.size() && text[i] != ',') continue;
    std::string_view term = Trim(text.substr(start, i - start));
    start = i + 1;
    Term t;
    size_t ne = term.find("!=");
    size_t eq = term.find('=');
    if (ne != std::string_view::npos && ne < eq) {
      t.field = std::string(Trim(term.substr(0, ne)));
      t.equals = false;
      t.value = std::string(Trim(term.substr(ne + 2)));
    } else if (eq != std::string_view::npos) {
      size_t vstart = eq + 1 < term.size() && term[eq + 1] == '=' ? eq + 2 : eq + 1;
      t.field = std::string(Trim(term.substr(0, eq)));
      t.equals = true;
      t.value = std::string(Trim(term.substr(vstart)));
    } else {
      return InvalidArgumentError("invalid field selector term \"" + std::string(term) +
                                  "\": expected field=value or field!=value");
    }
    if (!ValidKey(t.field)) {
      return InvalidArgumentError("invalid field selector field \"" + t.field + "\"");
    }
    sel.terms_.push_back(std::move(t));
  }
  return sel;
}

bool FieldSelector::Matches(const json& object) const {
  for (const Term& t : terms_) {
    if ((FieldValue(object, t.field) == t.value) != t.equals) return false;
  }
  return true;
}

const std::string* FieldSelector::RequiredValue(std::string_view field) const {
  for (const Term& t : terms_) {
    if (t.equals && t.field == field) return &t.value;
  }
  return nullptr;
}

std::string FieldValue(const json& object, std::string_view path) {
  const json* cur = &object;
  size_t start = 0;
  while (start <= path.size()) {
    size_t dot = path.find('.', start);
    std::string key(
        path.substr(start, dot == std::string_view::npos ? std::string_view::npos : dot - start));
    if (!cur->is_object()) return "";
    auto it = cur->find(key);
    if (it == cur->end()) return "";
    cur = &*it;
    if (dot == std::string_view::npos) break;
    start = dot + 1;
  }
  if (cur->is_string()) return cur->get<std::string>();
  if (cur->is_null()) return "";
  return cur->dump();
}

}  // namespace hami::sim
