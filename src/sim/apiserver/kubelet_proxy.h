// What the simulated API server asks of a node's kubelet on a client's behalf (pods/log), over
// plain HTTP to the address the node publishes.
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

// GET http://<host>:<port><path>; Unavailable when the kubelet cannot be reached.
Result<KubeletReply> KubeletGet(const std::string& host, int port, const std::string& path);

}  // namespace hami::sim
