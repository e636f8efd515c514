// Prometheus histograms as the benchmarks read them from a component's /metrics page: the
// cumulative buckets of one histogram and a quantile from them, as PromQL's histogram_quantile
// computes it.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <map>
#include <string>
#include <vector>

#include "sim/world/demo.h"

namespace hami::bench {

// `q`-quantile of a Prometheus histogram's cumulative buckets (upper bound -> count), by linear
// interpolation inside the bucket, as histogram_quantile does.
inline double Quantile(const std::map<double, double>& buckets, double q) {
  if (buckets.empty()) return NAN;
  double total = buckets.rbegin()->second;
  if (total <= 0) return NAN;
  double rank = q * total, lower = 0, below = 0;
  for (const auto& [le, count] : buckets) {
    if (count >= rank) {
      if (std::isinf(le)) return lower;
      return lower + (le - lower) * (rank - below) / std::max(count - below, 1e-9);
    }
    lower = le;
    below = count;
  }
  return lower;
}

// The cumulative buckets (upper bound -> count) of histogram `name`, summed over the series
// whose labels include every pair of `want`.
inline std::map<double, double> Buckets(const std::vector<hami::sim::MetricSample>& page,
                                        const std::string& name,
                                        const std::map<std::string, std::string>& want) {
  std::map<double, double> out;
  for (const hami::sim::MetricSample& m : page) {
    auto le = m.labels.find("le");
    if (m.name != name + "_bucket" || le == m.labels.end()) continue;
    bool match = true;
    for (const auto& [k, v] : want) {
      auto it = m.labels.find(k);
      match = match && it != m.labels.end() && it->second == v;
    }
    if (match) out[std::strtod(le->second.c_str(), nullptr)] += m.value;  // "+Inf" reads as inf
  }
  return out;
}

}  // namespace hami::bench
