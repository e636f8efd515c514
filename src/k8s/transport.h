// Transport: one HTTP exchange with the API server. The seam between the REST client and the
// network: SocketTransport (socket_transport.h) in production, CurlTransport (curl_transport.h)
// behind a proxy, FakeTransport (fake_transport.h) in tests.
//
// Error contract of Do() (the REST client's retry policy depends on it):
//   Unavailable       the request was certainly not delivered (connect/resolve/TLS handshake
//                     failure): safe to retry for any method.
//   Unknown           the connection failed after the request may have been sent.
//   DeadlineExceeded  the request timed out (possibly processed).
//   Cancelled         HttpRequest::cancel fired.
//   FailedPrecondition  TLS verification failed or the TLS material is unusable (never retried).
// Any HTTP status, including 4xx/5xx, is a successful Do() with that status in the response.
//
// Thread safety: implementations must allow concurrent Do() calls from many threads.
#pragma once

#include <chrono>
#include <functional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "common/clock.h"
#include "common/status.h"

namespace hami::k8s {

struct HttpRequest {
  std::string method = "GET";
  std::string url;  // absolute
  std::vector<std::pair<std::string, std::string>> headers;
  std::string body;
  std::chrono::milliseconds timeout{0};  // whole exchange; 0 = none (watches)
  // When set, the body of a 2xx response is streamed here chunk by chunk instead of being
  // collected; returning false ends the exchange early (Do() then succeeds). Non-2xx bodies are
  // always collected into HttpResponse::body.
  std::function<bool(std::string_view)> on_body;
  const Cancellation* cancel = nullptr;
};

struct HttpResponse {
  int status = 0;
  std::vector<std::pair<std::string, std::string>> headers;  // names lower-cased
  std::string body;

  // The first header with this (lower-case) name, or "".
  std::string Header(std::string_view lower_name) const {
    for (const auto& [k, v] : headers) {
      if (k == lower_name) return v;
    }
    return std::string();
  }
};

class Transport {
 public:
  virtual ~Transport() = default;
  virtual Result<HttpResponse> Do(const HttpRequest& request) = 0;
  // Several requests to one server, answered in order (one result per request). The default
  // sends them one after another; SocketTransport pipelines them on one connection (all written
  // at once, the answers read back in order), which costs one round trip instead of N. For
  // non-idempotent requests the caller must accept that a connection lost mid-batch leaves the
  // fate of the unanswered ones unknown (they are reported as errors, never retried). Requests
  // with `on_body` are not allowed here.
  virtual std::vector<Result<HttpResponse>> DoBatch(const std::vector<HttpRequest>& requests) {
    std::vector<Result<HttpResponse>> out;
    out.reserve(requests.size());
    for (const HttpRequest& r : requests) out.push_back(Do(r));
    return out;
  }
};

}  // namespace hami::k8s
