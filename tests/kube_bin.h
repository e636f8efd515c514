// Which pinned Kubernetes release a `realkube` test runs against (tools/kube/versions.env).
// CTest runs those tests once per pin: with $HAMI_KUBE_BIN naming the second pin's folder for
// the copies whose names end in "@newest", else the folder the build was configured with
// (HAMI_KUBE_BIN, the oldest pin). Header-only, for tests.
#pragma once

#include <cstdlib>
#include <string>

#include "common/subprocess.h"

namespace hami::kube_pin {

// The folder of kube-apiserver, etcd, kubectl, helm, ...; "" when none was built.
inline std::string BinDir() {
  const char* env = std::getenv("HAMI_KUBE_BIN");
  if (env != nullptr && *env != '\0') return env;
  return HAMI_KUBE_BIN;
}

// The kubectl of that release; else the configured one (HAMI_KUBECTL, when the target defines
// it) or one on PATH; "" when there is none.
inline std::string Kubectl() {
  std::string dir = BinDir();
  if (!dir.empty()) return dir + "/kubectl";
#ifdef HAMI_KUBECTL
  if (*HAMI_KUBECTL) return HAMI_KUBECTL;
#endif
  return FindOnPath("kubectl");
}

}  // namespace hami::kube_pin
