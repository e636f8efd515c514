// Router: the HTTP server's routes and the call of the matching handler.
//
// Exact (method, path) routes win over prefix routes; among prefix routes the longest prefix
// wins. "GET" routes also answer HEAD. Unmatched requests get 404 (405 when the path is known for
// another method); a handler that throws yields 500.
//
// Thread safety: Add only before the server starts (no lock guards the table); Serve may then
// run concurrently on any number of threads.
#pragma once

#include <string>
#include <vector>

#include "net/http_server.h"

namespace hami::net {

class Router {
 public:
  // `prefix`: every path starting with `path` matches, not only `path` itself.
  void Add(std::string method, std::string path, bool prefix, HttpHandler handler);
  // Runs the handler of `req`'s route on the calling thread (or answers 404/405/500 itself).
  void Serve(const HttpRequest& req, HttpResponse& res) const;

 private:
  struct Route {
    std::string method;
    std::string path;
    bool prefix = false;
    HttpHandler handler;
  };
  // The best route for (method, path), or null; *path_known says whether any route's path
  // matched, whatever its method.
  const Route* Find(const std::string& method, const std::string& path, bool* path_known) const;

  std::vector<Route> routes_;
};

}  // namespace hami::net
