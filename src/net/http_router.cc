#include "net/http_router.h"

#include <exception>
#include <utility>

namespace hami::net {

void Router::Add(std::string method, std::string path, bool prefix, HttpHandler handler) {
  routes_.push_back({std::move(method), std::move(path), prefix, std::move(handler)});
}

const Router::Route* Router::Find(const std::string& method, const std::string& path,
                                  bool* path_known) const {
  const Route* best = nullptr;
  *path_known = false;
  for (const Route& r : routes_) {
    bool match = r.prefix ? path.compare(0, r.path.size(), r.path) == 0 : path == r.path;
    if (!match) continue;
    *path_known = true;
    bool method_ok = r.method == method || (method == "HEAD" && r.method == "GET");
    if (!method_ok) continue;
    if (!best || (best->prefix && !r.prefix) ||
        (best->prefix == r.prefix && r.path.size() > best->path.size())) {
      best = &r;
    }
  }
  return best;
}

void Router::Serve(const HttpRequest& req, HttpResponse& res) const {
  bool path_known = false;
  const Route* route = Find(req.method, req.path, &path_known);
  if (!route) {
    res.SetText(path_known ? 405 : 404, path_known ? "method not allowed\n" : "not found\n");
    return;
  }
  try {
    route->handler(req, res);
  } catch (const std::exception& e) {
    res = HttpResponse();
    res.SetText(500, std::string("internal error: ") + e.what() + "\n");
  } catch (...) {
    res = HttpResponse();
    res.SetText(500, "internal error\n");
  }
}

}  // namespace hami::net
