// The rule both Volcano node-agent protocols use to pick the pod an Allocate is for: among the
// candidates, the one with the smallest scheduling time. Several sharing that time are all
// returned, so that the caller refuses rather than guesses (kubelet's call does not say which pod
// it is admitting).
//
// Thread safety: a pure function.
#pragma once

#include <cstdint>
#include <vector>

namespace hami::device {

// The candidates (each with a `uint64_t time` member) whose time is the smallest, in their
// order; empty only for no candidates.
template <typename Candidate>
std::vector<const Candidate*> OldestCandidates(const std::vector<Candidate>& candidates) {
  std::vector<const Candidate*> oldest;
  for (const Candidate& c : candidates) {
    if (!oldest.empty() && c.time > oldest.front()->time) continue;
    if (!oldest.empty() && c.time < oldest.front()->time) oldest.clear();
    oldest.push_back(&c);
  }
  return oldest;
}

}  // namespace hami::device
