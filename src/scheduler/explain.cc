#include "scheduler/explain.h"

#include <cstdio>

#include "device/scoring_weights.h"

namespace hami::scheduler {
namespace {

std::string Score(double s) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%.2f", s);
  return buf;
}

}  // namespace

std::string RenderExplain(const Ledger& ledger, const PodSpec& pod, const Decision& d) {
  std::string out = "pod " + pod.name_space + "/" + pod.name + " (" + pod.uid + "): ";
  if (!d.requests_devices) return out + "requests no device\n";
  if (d.fit()) {
    out += "placed on " + d.node + " (score " + Score(d.verdicts[d.chosen].score) + ")\n";
  } else {
    out += "not placed: " + d.FailedMessage() + "\n";
  }
  out += "policy: node=" + std::string(NodePolicyName(d.policies.node)) + " (" +
         std::string(PolicySourceName(d.policies.node_source)) +
         "), gpu=" + d.policies.gpu.ToString() + " (" +
         std::string(PolicySourceName(d.policies.gpu_source)) + "), weights " +
         device::EncodeScoringWeights(d.weights) + "\n";
  if (!d.policies.ignored.empty()) {
    out += "ignored policy tokens:";
    for (const std::string& t : d.policies.ignored) out += " " + t;
    out += "\n";
  }
  size_t dv = 0;
  for (size_t i = 0; i < d.verdicts.size(); ++i) {
    const NodeVerdict& v = d.verdicts[i];
    out += std::string(v.node) + ": ";
    if (v.fit) {
      out += "fit, score " + Score(v.score);
      if (v.policy != d.policies.node)
        out += " (node policy " + std::string(NodePolicyName(v.policy)) + ")";
      out += "\n";
    } else {
      out += v.failure.ToString();
      if (v.failure.container >= 0)
        out += " (container " + std::to_string(v.failure.container) + ")";
      out += "\n";
    }
    for (; dv < d.device_verdicts.size() && d.device_verdicts[dv].verdict == i; ++dv) {
      const DeviceVerdict& x = d.device_verdicts[dv];
      const LedgerNode& node = ledger.nodes()[v.slot];
      const LedgerDevice& dev = node.devices[x.device];
      out += "  container " + std::to_string(x.container) + " " +
             std::string(ledger.strings().uuids.Get(dev.uuid)) + " [" + std::to_string(dev.index) +
             "] ";
      if (x.passed) {
        out += "score " + Score(x.score) + (x.chosen ? " chosen" : "");
      } else {
        out += std::string(CardReasonName(x.reason));
      }
      out += "\n";
    }
  }
  return out;
}

}  // namespace hami::scheduler
