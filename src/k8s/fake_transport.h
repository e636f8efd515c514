// FakeTransport: a scripted Transport for tests of the client and of components built on it.
//
// Tests queue responses for (method, URL substring) pairs; each Do() consumes the first queued
// entry that matches, in order. A 2xx entry with stream chunks feeds them one by one to a
// streaming request (a watch), which is how tests split events across chunk boundaries. A request
// no entry matches blocks until its Cancellation fires (so an informer's watch parks there) or, if
// it has none, fails with Unavailable. Every request is recorded.
//
//   FakeTransport fake;
//   fake.Push("GET", "/api/v1/nodes", FakeTransport::Json(200, R"({"items":[]})"));
//
// Thread safety: all methods may be called from any thread.
#pragma once

#include <chrono>
#include <condition_variable>
#include <deque>
#include <functional>
#include <mutex>
#include <string>
#include <vector>

#include "common/thread_annotations.h"
#include "k8s/transport.h"

namespace hami::k8s {

class FakeTransport final : public Transport {
 public:
  static HttpResponse Json(int status, std::string body,
                           std::vector<std::pair<std::string, std::string>> headers = {});

  // Queues a response (or a transport error) for the next matching request.
  void Push(std::string method, std::string url_substring, Result<HttpResponse> response,
            std::vector<std::string> stream_chunks = {});

  Result<HttpResponse> Do(const HttpRequest& request) override;

  // Recorded requests (on_body and cancel cleared).
  std::vector<HttpRequest> requests() const;
  size_t pending() const;
  // Blocks until at least `n` requests have been made (real time, for threaded tests).
  void WaitForRequests(size_t n) const;
  // Blocks until some request made so far, or made meanwhile, satisfies `match`, or until
  // `timeout` of real time passed; true when one did. `match` runs under the transport's lock,
  // so it must not call the transport.
  bool WaitForRequest(const std::function<bool(const HttpRequest&)>& match,
                      std::chrono::milliseconds timeout) const;

 private:
  struct Entry {
    std::string method;
    std::string url_substring;
    Result<HttpResponse> response;
    std::vector<std::string> chunks;
  };
  mutable Mutex mu_;
  mutable std::condition_variable cv_;
  std::deque<Entry> entries_ GUARDED_BY(mu_);
  std::vector<HttpRequest> requests_ GUARDED_BY(mu_);
};

}  // namespace hami::k8s
