#include "sim/cluster/in_process_transport.h"

#include <atomic>
#include <cctype>
#include <functional>
#include <string>
#include <string_view>

#include "net/http_wire.h"

namespace hami::sim {
namespace {

// Collects a streamed body (a non-2xx answer, or a stream the caller did not ask to stream).
class Collector : public net::ChunkWriter {
 public:
  explicit Collector(std::string& body) : body_(body) {}
  bool Write(std::string_view data) override {
    body_.append(data);
    return true;
  }
  bool ServerRunning() const override { return true; }

 private:
  std::string& body_;
};

// Hands a streamed body (a watch) to the request's on_body as it is written.
class CallbackWriter : public net::ChunkWriter {
 public:
  CallbackWriter(const std::function<bool(std::string_view)>& on_body,
                 const hami::Cancellation* cancel)
      : on_body_(on_body), cancel_(cancel) {}
  bool Write(std::string_view data) override {
    if (!ServerRunning()) return false;
    if (!on_body_(data)) done_.store(true);
    return !done_.load();
  }
  bool ServerRunning() const override {
    return !done_.load() && (cancel_ == nullptr || !cancel_->cancelled());
  }

 private:
  const std::function<bool(std::string_view)>& on_body_;
  const hami::Cancellation* const cancel_;
  std::atomic<bool> done_{false};  // the consumer ended the stream
};

}  // namespace

Result<k8s::HttpResponse> InProcessTransport::Do(const k8s::HttpRequest& request) {
  if (request.cancel != nullptr && request.cancel->cancelled()) {
    return Status(StatusCode::kCancelled, "request cancelled");
  }
  // "scheme://authority/path?query" -> path and query.
  std::string_view url(request.url);
  size_t scheme = url.find("://");
  size_t path_start = url.find('/', scheme == std::string_view::npos ? 0 : scheme + 3);
  std::string_view target = path_start == std::string_view::npos ? "/" : url.substr(path_start);
  size_t q = target.find('?');
  net::HttpRequest req;
  req.method = request.method;
  // Decoded as the HTTP server decodes a request line.
  req.path = net::wire::PercentDecode(target.substr(0, q), false);
  if (q != std::string_view::npos) net::wire::ParseQuery(target.substr(q + 1), &req.params);
  req.body = request.body;
  req.remote_addr = "in-process";
  for (const auto& [k, v] : request.headers) req.headers.emplace(k, v);

  net::HttpResponse res;
  server_.ServeInProcess(req, res);
  k8s::HttpResponse out;
  out.status = res.status;
  out.body = std::move(res.body);
  if (request.on_body && res.status >= 200 && res.status < 300) {
    // Streamed to the caller, as a network transport does with a 2xx body.
    bool more = out.body.empty() || request.on_body(out.body);
    out.body.clear();
    if (res.stream && more) {
      CallbackWriter writer(request.on_body, request.cancel);
      res.stream(writer);
    }
    if (request.cancel != nullptr && request.cancel->cancelled()) {
      return Status(StatusCode::kCancelled, "request cancelled");
    }
  } else if (res.stream) {
    Collector collector(out.body);
    res.stream(collector);
  }
  out.headers.emplace_back("content-type", res.content_type);
  for (auto& [k, v] : res.headers) {
    std::string name = k;
    for (char& c : name) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    out.headers.emplace_back(std::move(name), std::move(v));
  }
  return out;
}

}  // namespace hami::sim
