// InProcessTransport: a k8s::Transport that hands each request straight to an in-process
// ApiServer (ApiServer::ServeInProcess) instead of sending it over a socket. The server does all
// it does for a network request (routing, auth, admission, storage, watch events, request
// counts); only the HTTP transport is skipped.
//
// What it is for: the extender benchmark plays every node's device plugin and kubelet in its own
// process. In a cluster their API traffic goes from thousands of machines to kube-apiserver, none
// of it on the scheduler's machine; over loopback HTTP it would take a third of the 2 cores the
// benchmark shares with the scheduler. Streaming requests (watches) go to `streams`, a network
// transport, so that cancelling a watch works as usual.
//
// Thread safety: Do() may be called from any number of threads while the server runs; the
// server must outlive the transport's use.
#pragma once

#include <memory>

#include "k8s/transport.h"
#include "sim/apiserver/api_server.h"

namespace hami::sim {

class InProcessTransport final : public k8s::Transport {
 public:
  InProcessTransport(const ApiServer& server, std::unique_ptr<k8s::Transport> streams)
      : server_(server), streams_(std::move(streams)) {}

  Result<k8s::HttpResponse> Do(const k8s::HttpRequest& request) override;

 private:
  const ApiServer& server_;
  std::unique_ptr<k8s::Transport> streams_;
};

}  // namespace hami::sim
