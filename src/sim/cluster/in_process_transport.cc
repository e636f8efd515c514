#include "sim/cluster/in_process_transport.h"

#include <cctype>
#include <string>
#include <string_view>

namespace hami::sim {
namespace {

int HexValue(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

// %XX decoding (and '+' as a space in query strings), as an HTTP server does before routing.
std::string Decode(std::string_view in, bool plus_is_space) {
  std::string out;
  out.reserve(in.size());
  for (size_t i = 0; i < in.size(); ++i) {
    if (in[i] == '%' && i + 2 < in.size()) {
      int hi = HexValue(in[i + 1]), lo = HexValue(in[i + 2]);
      if (hi >= 0 && lo >= 0) {
        out.push_back(static_cast<char>(hi * 16 + lo));
        i += 2;
        continue;
      }
    }
    out.push_back(plus_is_space && in[i] == '+' ? ' ' : in[i]);
  }
  return out;
}

// Collects a streaming response that is not a watch (none of the simulated server's are).
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

}  // namespace

Result<k8s::HttpResponse> InProcessTransport::Do(const k8s::HttpRequest& request) {
  if (request.on_body) return streams_->Do(request);
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
  req.path = Decode(target.substr(0, q), false);
  if (q != std::string_view::npos) {
    std::string_view query = target.substr(q + 1);
    while (!query.empty()) {
      size_t amp = query.find('&');
      std::string_view pair = query.substr(0, amp);
      size_t eq = pair.find('=');
      if (!pair.empty()) {
        req.params.emplace(Decode(pair.substr(0, eq), true),
                           eq == std::string_view::npos ? "" : Decode(pair.substr(eq + 1), true));
      }
      if (amp == std::string_view::npos) break;
      query.remove_prefix(amp + 1);
    }
  }
  req.body = request.body;
  req.remote_addr = "in-process";
  for (const auto& [k, v] : request.headers) req.headers.emplace(k, v);

  net::HttpResponse res;
  server_.ServeInProcess(req, res);
  k8s::HttpResponse out;
  out.status = res.status;
  out.body = std::move(res.body);
  if (res.stream) {
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
