#include "device/topology_score.h"

#include <limits>

#include "device/json_util.h"

namespace hami::device {

using json_util::Json;

std::string EncodePairScores(const DevicePairScores& scores) {
  std::string out = "[";
  for (size_t i = 0; i < scores.size(); ++i) {
    const DevicePairScore& s = scores[i];
    if (i > 0) out.push_back(',');
    out.push_back('{');
    bool first = true;
    if (!s.uuid.empty()) {
      out += "\"uuid\":";
      json_util::AppendGoString(&out, s.uuid);
      first = false;
    }
    if (!s.scores.empty()) {
      if (!first) out.push_back(',');
      out += "\"score\":{";
      bool first_peer = true;
      for (const auto& [peer, score] : s.scores) {
        if (!first_peer) out.push_back(',');
        first_peer = false;
        json_util::AppendGoString(&out, peer);
        out.push_back(':');
        out += std::to_string(score);
      }
      out.push_back('}');
    }
    out.push_back('}');
  }
  out.push_back(']');
  return out;
}

Result<DevicePairScores> DecodePairScores(std::string_view text) {
  HAMI_ASSIGN_OR_RETURN(Json j, json_util::Parse(text, "device pair scores"));
  DevicePairScores out;
  if (j.is_null()) return out;
  if (!j.is_array()) return InvalidArgumentError("device pair scores: expected a JSON array");
  for (size_t i = 0; i < j.size(); ++i) {
    const Json& e = j[i];
    std::string path = json_util::Indexed("scores", i);
    if (e.is_null()) continue;  // Go decodes null into a zero struct; it carries nothing
    if (!e.is_object()) return InvalidArgumentError(path + ": expected an object");
    DevicePairScore s;
    HAMI_RETURN_IF_ERROR(json_util::ReadOptional(e, "uuid", path, &s.uuid));
    if (const Json* m = json_util::Member(e, "score")) {
      std::string m_path = json_util::Field(path, "score");
      if (!m->is_object()) return InvalidArgumentError(m_path + ": expected an object");
      for (auto it = m->begin(); it != m->end(); ++it) {
        int64_t v = 0;
        HAMI_RETURN_IF_ERROR(json_util::ReadInt64(it.value(), json_util::Field(m_path, it.key()),
                                                  std::numeric_limits<int64_t>::min(),
                                                  std::numeric_limits<int64_t>::max(), &v));
        s.scores[it.key()] = v;
      }
    }
    out.push_back(std::move(s));
  }
  return out;
}

int64_t PairScore(const DevicePairScores& scores, std::string_view a, std::string_view b) {
  for (const DevicePairScore& s : scores) {
    if (s.uuid == a) {
      auto it = s.scores.find(std::string(b));
      if (it != s.scores.end()) return it->second;
    }
  }
  for (const DevicePairScore& s : scores) {
    if (s.uuid == b) {
      auto it = s.scores.find(std::string(a));
      if (it != s.scores.end()) return it->second;
    }
  }
  return 0;
}

}  // namespace hami::device
