// What the simulated API server asks of a node's kubelet on a client's behalf (pods/log), over
// HTTPS to the address the node publishes, as kube-apiserver does. Like kube-apiserver started
// without --kubelet-certificate-authority, it does not verify the kubelet's (self-signed)
// serving certificate.
//
// Thread safety: stateless.
#pragma once

#include <string>

#include "common/status.h"

namespace hami::sim {

struct KubeletReply {
  int status = 0;
  std::string body;
};

// GET https://<host>:<port><path>; Unavailable when the kubelet cannot be reached.
Result<KubeletReply> KubeletGet(const std::string& host, int port, const std::string& path);

}  // namespace hami::sim
