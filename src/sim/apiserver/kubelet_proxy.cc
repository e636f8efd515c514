#include "sim/apiserver/kubelet_proxy.h"

#include <httplib.h>

namespace hami::sim {

Result<KubeletReply> KubeletGet(const std::string& host, int port, const std::string& path) {
  httplib::SSLClient kubelet(host, port);
  kubelet.enable_server_certificate_verification(false);
  kubelet.set_connection_timeout(5);
  kubelet.set_read_timeout(30);
  httplib::Result r = kubelet.Get(path);
  if (!r) {
    return Status(StatusCode::kUnavailable, "cannot reach the kubelet at " + host + ":" +
                                                std::to_string(port) + ": " +
                                                httplib::to_string(r.error()));
  }
  return KubeletReply{r->status, r->body};
}

}  // namespace hami::sim
