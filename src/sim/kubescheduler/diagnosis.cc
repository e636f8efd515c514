#include "sim/kubescheduler/diagnosis.h"

#include <algorithm>

namespace hami::sim {

void Diagnosis::Add(const std::string& node, const std::string& reason) {
  reasons_[node].push_back(reason);
}

std::string Diagnosis::Message(size_t total_nodes) const {
  std::map<std::string, size_t> histogram;
  for (const auto& [node, reasons] : reasons_) {
    for (const std::string& r : reasons) ++histogram[r];
  }
  std::vector<std::string> parts;
  parts.reserve(histogram.size());
  for (const auto& [reason, count] : histogram)
    parts.push_back(std::to_string(count) + " " + reason);
  std::sort(parts.begin(), parts.end());
  std::string out = "0/" + std::to_string(total_nodes) + " nodes are available";
  if (parts.empty()) return out + ".";
  out += ": ";
  for (size_t i = 0; i < parts.size(); ++i) {
    if (i > 0) out += ", ";
    out += parts[i];
  }
  return out + ".";
}

}  // namespace hami::sim
