#include "k8s/fake_transport.h"

#include <chrono>

namespace hami::k8s {

HttpResponse FakeTransport::Json(int status, std::string body,
                                 std::vector<std::pair<std::string, std::string>> headers) {
  HttpResponse r;
  r.status = status;
  r.body = std::move(body);
  r.headers = std::move(headers);
  r.headers.emplace_back("content-type", "application/json");
  return r;
}

void FakeTransport::Push(std::string method, std::string url_substring,
                         Result<HttpResponse> response, std::vector<std::string> stream_chunks) {
  MutexLock lock(mu_);
  entries_.push_back(Entry{std::move(method), std::move(url_substring), std::move(response),
                           std::move(stream_chunks)});
  cv_.notify_all();
}

Result<HttpResponse> FakeTransport::Do(const HttpRequest& request) {
  UniqueLock lock(mu_);
  HttpRequest recorded = request;
  recorded.on_body = nullptr;
  recorded.cancel = nullptr;
  requests_.push_back(std::move(recorded));
  cv_.notify_all();
  while (true) {
    for (auto it = entries_.begin(); it != entries_.end(); ++it) {
      if (it->method != request.method ||
          request.url.find(it->url_substring) == std::string::npos) {
        continue;
      }
      Entry entry = std::move(*it);
      entries_.erase(it);
      lock.Unlock();
      if (!entry.response.ok()) return entry.response.status();
      HttpResponse resp = std::move(entry.response).value();
      bool ok2xx = resp.status >= 200 && resp.status < 300;
      if (request.on_body && ok2xx) {
        if (entry.chunks.empty() && !resp.body.empty()) entry.chunks.push_back(resp.body);
        for (const std::string& chunk : entry.chunks) {
          if (!request.on_body(chunk)) break;
        }
        resp.body.clear();
      } else if (!entry.chunks.empty()) {
        for (const std::string& chunk : entry.chunks) resp.body += chunk;
      }
      return resp;
    }
    if (request.cancel == nullptr) {
      return UnavailableError("FakeTransport: no scripted response for " + request.method + " " +
                              request.url);
    }
    if (request.cancel->cancelled()) return Status(StatusCode::kCancelled, "cancelled");
    // Park until a new entry arrives or the request is cancelled (polled: Cancellation has its own
    // condition variable).
    cv_.wait_for(lock.native(), std::chrono::milliseconds(5));
  }
}

std::vector<HttpRequest> FakeTransport::requests() const {
  MutexLock lock(mu_);
  return requests_;
}

size_t FakeTransport::pending() const {
  MutexLock lock(mu_);
  return entries_.size();
}

void FakeTransport::WaitForRequests(size_t n) const {
  UniqueLock lock(mu_);
  cv_.wait(lock.native(), [&]() REQUIRES(mu_) { return requests_.size() >= n; });
}

bool FakeTransport::WaitForRequest(const std::function<bool(const HttpRequest&)>& match,
                                   std::chrono::milliseconds timeout) const {
  UniqueLock lock(mu_);
  size_t looked = 0;  // requests_ only grows, so each request is matched once
  return cv_.wait_for(lock.native(), timeout, [&]() REQUIRES(mu_) {
    for (; looked < requests_.size(); ++looked) {
      if (match(requests_[looked])) return true;
    }
    return false;
  });
}

}  // namespace hami::k8s
