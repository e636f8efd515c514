// What the real-node tests (real_node_e2e_test.cc, real_node_seed_e2e_test.cc) share.
#pragma once

#include <cstdlib>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "common/subprocess.h"
#include "k8s/object.h"
#include "sim/world/world.h"
#include "tests/kube_bin.h"

namespace hami::e2e {

// The real node's tools: HAMI_NODE_BIN from the environment, else the configured folder.
inline std::string NodeBinDir() {
  const char* env = std::getenv("HAMI_NODE_BIN");
  return env != nullptr && *env != '\0' ? env : HAMI_NODE_BIN;
}

inline std::string ReadFile(const std::string& path) {
  std::ifstream in(path);
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

// The pinned kubectl against world `w`, as its administrator.
inline ProcessResult Kubectl(const sim::World& w, const std::vector<std::string>& args) {
  std::vector<std::string> argv = {kube_pin::Kubectl(), "--kubeconfig", w.kubeconfig(),
                                   "--request-timeout=30s"};
  argv.insert(argv.end(), args.begin(), args.end());
  return RunProcess(argv, {"HOME=" + w.dir(), "PATH=/usr/bin:/bin"});
}

// Whether kube-scheduler has found no node for pod `p`.
inline bool Unschedulable(const k8s::Object& p) {
  for (const auto& c : p["status"].value("conditions", k8s::Object::array())) {
    if (c.value("type", "") == "PodScheduled") return c.value("reason", "") == "Unschedulable";
  }
  return false;
}

}  // namespace hami::e2e
