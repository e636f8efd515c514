// Diagnosis: why each node was rejected during one scheduling cycle, and the kube-scheduler style
// summary that goes into the FailedScheduling event.
//
//   Diagnosis d;
//   d.Add("node-a", "node(s) were unschedulable");
//   d.Add("node-b", "CardInsufficientMemory");
//   d.Message(3);  // "0/3 nodes are available: 1 CardInsufficientMemory, 1 node(s) were ..."
//
// The summary counts every (node, reason) pair, groups identical reasons as "<count> <reason>",
// sorts those strings and joins them with ", " after "0/<total> nodes are available: ", ending
// with a period, which is the shape operators know from kube-scheduler.
//
// Thread safety: a plain value.
#pragma once

#include <cstddef>
#include <map>
#include <string>
#include <vector>

namespace hami::sim {

// Built-in filter reasons (kube-scheduler's wording for the same checks).
inline constexpr char kReasonNodeUnschedulable[] = "node(s) were unschedulable";
inline constexpr char kReasonNodeSelectorMismatch[] =
    "node(s) didn't match Pod's node affinity/selector";

class Diagnosis {
 public:
  void Add(const std::string& node, const std::string& reason);
  bool Has(const std::string& node) const { return reasons_.count(node) > 0; }
  size_t size() const { return reasons_.size(); }
  const std::map<std::string, std::vector<std::string>>& reasons() const { return reasons_; }
  std::string Message(size_t total_nodes) const;

 private:
  std::map<std::string, std::vector<std::string>> reasons_;  // node -> reasons in arrival order
};

}  // namespace hami::sim
