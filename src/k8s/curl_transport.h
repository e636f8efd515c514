// CurlTransport: the production Transport, on libcurl.
//
// TLS material comes from memory (CA, client certificate and key as PEM blobs), so kubeconfig
// *-data fields never touch disk. Easy handles are pooled: each Do() borrows one, so concurrent
// calls never share a handle while connections are still reused. libcurl.so.4 is loaded (dlopen)
// and initialised once, on the first construction, which fails with Unavailable when it cannot
// be; construct the first transport before starting threads that use curl elsewhere. Signals
// are disabled (CURLOPT_NOSIGNAL) so timeouts are safe in threaded daemons.
//
// Cancellation of a streaming request is observed at least once a second (libcurl's progress
// callback) and whenever data arrives.
//
// Thread safety: Do() may be called concurrently from any number of threads.
#pragma once

#include <chrono>
#include <memory>

#include "common/status.h"
#include "k8s/config.h"
#include "k8s/transport.h"

namespace hami::k8s {

struct CurlOptions {
  TlsConfig tls;
  std::chrono::milliseconds connect_timeout{10000};
};

class CurlTransport final : public Transport {
 public:
  // Fails (InvalidArgument) only for unusable options; TLS material is validated by the first
  // handshake.
  static Result<std::unique_ptr<CurlTransport>> Create(CurlOptions options);
  ~CurlTransport() override;
  CurlTransport(const CurlTransport&) = delete;
  CurlTransport& operator=(const CurlTransport&) = delete;

  Result<HttpResponse> Do(const HttpRequest& request) override;

 private:
  struct Pool;
  explicit CurlTransport(CurlOptions options);
  CurlOptions options_;
  std::unique_ptr<Pool> pool_;
};

}  // namespace hami::k8s
