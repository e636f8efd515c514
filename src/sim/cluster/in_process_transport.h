// InProcessTransport: a k8s::Transport that hands each request straight to an in-process
// ApiServer (ApiServer::ServeInProcess) instead of sending it over a socket. The server does all
// it does for a network request (routing, auth, admission, storage, watch events, request
// counts); only the HTTP transport is skipped.
//
// What it is for: the extender benchmark plays every node's device plugin and kubelet in its own
// process. In a cluster their API traffic goes from thousands of machines to kube-apiserver, none
// of it on the scheduler's machine; over loopback HTTP it would take a third of the 2 cores the
// benchmark shares with the scheduler.
//
// Watches run in process too: the calling thread serves the watch request itself, and the
// server's watch dispatcher hands each batch of events straight to the request's `on_body` (on
// the dispatcher's thread, with its lock held, never concurrently with another call for the same
// watch: `on_body` may write to the server but must not open another watch on it). The watch
// ends when `on_body` returns false, when `cancel` fires (noticed within the dispatcher's idle
// check, 200 ms), at its timeout, or when the server stops; Do() then returns as over the
// network (OK, or Cancelled after `cancel`).
//
// Thread safety: Do() may be called from any number of threads while the server runs; the
// server must outlive the transport's use.
#pragma once

#include "k8s/transport.h"
#include "sim/apiserver/api_server.h"

namespace hami::sim {

class InProcessTransport final : public k8s::Transport {
 public:
  explicit InProcessTransport(const ApiServer& server) : server_(server) {}

  Result<k8s::HttpResponse> Do(const k8s::HttpRequest& request) override;

 private:
  const ApiServer& server_;
};

}  // namespace hami::sim
