// SocketTransport: the production Transport for direct connections to the API server. HTTP/1.1
// over pooled keep-alive TCP connections, plain or TLS (OpenSSL), with blocking I/O on the
// calling thread.
//
// Why not libcurl for this: a scheduler writes several small objects per pod, and every
// exchange through libcurl costs about ten system calls (connection liveness polls, a poll
// before each read and write, a read until EAGAIN). Here an exchange on a warm connection is one
// sendmsg and, for a small response, one recv. On a virtual machine where each system call and
// wake-up is expensive that halves the scheduler's CPU per pod (bench/RESULTS.md).
// RestClient::Create still picks CurlTransport when a proxy environment variable applies, since
// this transport speaks to the server directly only.
//
// Behaviour:
//   - One connection per concurrent exchange, returned to a pool after a complete response that
//     keeps the connection open (HTTP/1.1 without "Connection: close"). A connection idle for
//     more than a second is checked (one non-blocking peek) before reuse; if a reused connection
//     turns out closed before any response byte arrives, GET and HEAD are retried once on a
//     fresh connection and other methods fail with Unknown (the caller's retry policy decides).
//   - TLS material comes from memory (PEM). The server certificate is verified against the CA
//     (the system store when none is given) and the host name or IP address of the URL, or
//     TlsConfig::server_name when set (which is also sent as SNI).
//   - HttpRequest::timeout bounds each wait for the server; an exchange that keeps receiving
//     data may take up to twice as long before DeadlineExceeded. Cancellation ends a wait for
//     the server at once (Cancellation::WakeFd is polled beside the socket); a connect, or a
//     read where the kernel gave no eventfd, looks at it at least once a second.
//   - Responses: Content-Length, chunked and read-to-close bodies; 1xx responses are skipped.
//     Header names are lower-cased.
// The error contract is Transport's (transport.h).
//
// Thread safety: Do() may be called concurrently from any number of threads.
#pragma once

#include <chrono>
#include <memory>

#include "common/status.h"
#include "k8s/config.h"
#include "k8s/transport.h"

namespace hami::k8s {

struct SocketOptions {
  TlsConfig tls;
  std::chrono::milliseconds connect_timeout{10000};  // TCP connect plus TLS handshake
  size_t max_idle_connections = 64;                  // per server
};

class SocketTransport final : public Transport {
 public:
  // InvalidArgument for a certificate without its key (or the reverse). Unparsable PEM material
  // does not fail here but in every HTTPS exchange (FailedPrecondition), as a handshake would.
  static Result<std::unique_ptr<SocketTransport>> Create(SocketOptions options);
  ~SocketTransport() override;
  SocketTransport(const SocketTransport&) = delete;
  SocketTransport& operator=(const SocketTransport&) = delete;

  Result<HttpResponse> Do(const HttpRequest& request) override;
  // HTTP/1.1 pipelining when every request goes to the same server and none streams; otherwise
  // (and for a batch of one) the same as calling Do for each.
  std::vector<Result<HttpResponse>> DoBatch(const std::vector<HttpRequest>& requests) override;

  // Connections opened so far (for tests of connection reuse).
  uint64_t connections_opened() const;

 private:
  struct Impl;
  explicit SocketTransport(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

// For tests and the fuzz target: one exchange of `request` (its URL names the host only for the
// request line) over the connected plain socket `fd`, which stays open. Reading the response
// from a peer that sends anything at all must end in a response or an error, never a crash.
Result<HttpResponse> SocketTransportExchangeForTesting(int fd, const HttpRequest& request);

// The production transport for a server: SocketTransport, or CurlTransport when a proxy
// variable applies to `url` (ProxyConfiguredFor). `connect_timeout` bounds connecting (and the
// TLS handshake).
Result<std::unique_ptr<Transport>> NewTransportFor(const std::string& url, const TlsConfig& tls,
                                                   std::chrono::milliseconds connect_timeout);

// Whether libcurl would send a request to `url` through a proxy named by the environment
// (http_proxy for http://, https_proxy/HTTPS_PROXY for https://, all_proxy/ALL_PROXY, minus
// no_proxy/NO_PROXY host suffixes or "*").
bool ProxyConfiguredFor(const std::string& url);

}  // namespace hami::k8s
