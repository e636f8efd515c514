// ApiServer::Impl's routing: the discovery, version and OpenAPI routes, and every verb on the
// resource paths, dispatched from HandleResource; get, list and watch are served here.
#include "sim/apiserver/api_server_internal.h"

#include <algorithm>
#include <chrono>
#include <ctime>

#include "sim/apiserver/tables.h"

namespace hami::sim {

using api_server_internal::ExpiredEventLine;
using api_server_internal::ParseTarget;
using api_server_internal::Split;
using api_server_internal::WantsTable;
using api_server_internal::WriteError;
using api_server_internal::WriteObject;
using api_server_internal::WriteStatus;
using SteadyClock = std::chrono::steady_clock;

// /version, /debug/authorization, and the API discovery documents.
void ApiServer::Impl::HandleDiscovery(net::HttpServer& s) {
  Impl* self = this;
  s.Handle("GET", "/version", [self](const HttpRequest& req, HttpResponse& res) {
    if (!self->Authorized(req, res)) return;
    json v = {{"major", "1"},
              {"minor", "32"},
              {"gitVersion", "v1.32.0-hami-sim"},
              {"gitCommit", "0000000000000000000000000000000000000000"},
              {"gitTreeState", "clean"},
              {"buildDate", "2026-01-01T00:00:00Z"},
              {"goVersion", "go1.23"},
              {"compiler", "gc"},
              {"platform", "linux/amd64"}};
    WriteObject(res, 200, v);
  });
  s.Handle("GET", "/debug/authorization", [self](const HttpRequest& req, HttpResponse& res) {
    std::optional<UserInfo> user = self->Authenticate(req, res);
    if (!user) return;
    if (self->options.rbac && user->name != "hami-sim-admin") {
      return WriteStatus(
          res, 403, "Forbidden",
          "forbidden: User \"" + user->name + "\" cannot get path \"/debug/authorization\"");
    }
    res.SetJson(200, self->DecisionReport());
  });
  s.Handle("GET", "/api", [self](const HttpRequest& req, HttpResponse& res) {
    if (!self->Authorized(req, res)) return;
    res.SetJson(200, self->registry.CoreVersions(self->options.host + ":" +
                                                 std::to_string(self->http->port())));
  });
  s.Handle("GET", "/apis", [self](const HttpRequest& req, HttpResponse& res) {
    if (!self->Authorized(req, res)) return;
    res.SetJson(200, self->registry.Groups());
  });
}

// The OpenAPI v3 index and its per group-version documents.
void ApiServer::Impl::HandleOpenApi(net::HttpServer& s) {
  Impl* self = this;
  s.Handle("GET", "/openapi/v3", [self](const HttpRequest& req, HttpResponse& res) {
    if (!self->Authorized(req, res)) return;
    res.SetJson(200, self->registry.OpenApiV3Index());
  });
  s.HandlePrefix("GET", "/openapi/v3/", [self](const HttpRequest& req, HttpResponse& res) {
    if (!self->Authorized(req, res)) return;
    std::vector<std::string> seg = Split(req.path);  // openapi v3 api v1 | openapi v3 apis g v
    std::string doc;
    if (seg.size() == 4 && seg[2] == "api") {
      doc = self->registry.OpenApiV3GroupVersion("", seg[3]);
    } else if (seg.size() == 5 && seg[2] == "apis") {
      doc = self->registry.OpenApiV3GroupVersion(seg[3], seg[4]);
    }
    if (doc.empty()) {
      return WriteStatus(res, 404, "NotFound", "the server could not find the requested resource");
    }
    res.SetJson(200, std::move(doc));
  });
}

// Every verb on the core (/api/) and group (/apis/) resource paths.
void ApiServer::Impl::HandleResources(net::HttpServer& s) {
  Impl* self = this;
  auto resource = [self](const HttpRequest& req, HttpResponse& res) {
    self->HandleResource(req, res);
  };
  for (const char* method : {"GET", "POST", "PUT", "PATCH", "DELETE"}) {
    s.HandlePrefix(method, "/api/", resource);
    s.HandlePrefix(method, "/apis/", resource);
  }
}

void ApiServer::Impl::HandleResource(const HttpRequest& req, HttpResponse& res) {
  std::optional<UserInfo> user = Authenticate(req, res);
  if (!user) return;
  Result<Target> target = ParseTarget(registry, req.path);
  if (!target.ok()) return WriteError(res, target.status());
  const Target& t = *target;
  if (t.discovery) {
    if (req.method != "GET")
      return WriteStatus(res, 405, "MethodNotAllowed", "method not allowed");
    return ServeDiscovery(t, res);
  }
  if (!Permitted(req, *user, t, res)) return;
  if (t.sub == "token") return TokenRequest(req, t, res);
  const ResourceInfo& r = *t.resource;
  {
    std::string key = req.method == "GET" && t.name.empty() &&
                              (req.Param("watch") == "true" || req.Param("watch") == "1")
                          ? std::string("WATCH")
                          : req.method;
    key += ' ';
    key += r.resource;
    if (!t.sub.empty()) key += "/" + t.sub;
    MutexLock lock(counts_mu);
    ++request_counts[key];
  }
  json details = {{"name", t.name}, {"group", r.group}, {"kind", r.resource}};
  try {
    if (t.sub == "log") {
      if (req.method != "GET")
        return WriteStatus(res, 405, "MethodNotAllowed", "method not allowed");
      return Log(req, t, res);
    }
    if (t.sub == "exec") {
      if (req.method != "GET" && req.method != "POST")
        return WriteStatus(res, 405, "MethodNotAllowed", "method not allowed");
      return Exec(req, t, res);
    }
    if (req.method == "GET" || req.method == "HEAD") {
      if (t.name.empty()) {
        std::string w = req.Param("watch");
        if (w == "true" || w == "1") return Watch(req, t, res);
        return List(req, t, res);
      }
      std::shared_ptr<const LazyText> text;
      Result<ObjectPtr> obj = store.Get(r, t.ns, t.name, &text);
      if (!obj.ok()) return WriteError(res, obj.status(), details);
      if (WantsTable(req))
        return WriteObject(res, 200, TableOf(r, {*obj}, store.revision(), std::time(nullptr)));
      return res.SetJson(200, text->Get(**obj));
    }
    if (req.method == "POST") {
      if (t.sub == "binding") return Bind(req, t, res);
      if (!t.name.empty()) return WriteStatus(res, 405, "MethodNotAllowed", "method not allowed");
      json body = json::parse(req.body, nullptr, /*allow_exceptions=*/false);
      if (body.is_discarded()) return BadBody(res);
      std::shared_ptr<const LazyText> text;
      Result<ObjectPtr> created = Create(r, t.ns, std::move(body), User(req), &text);
      if (!created.ok()) return WriteError(res, created.status(), details);
      return res.SetJson(201, text->Get(**created));
    }
    if (req.method == "PUT") return Update(req, t, res);
    if (req.method == "PATCH") return Patch(req, t, res);
    if (req.method == "DELETE") {
      if (t.name.empty()) return DeleteCollection(req, t, res);
      return Delete(req, t, res);
    }
    WriteStatus(res, 405, "MethodNotAllowed", "method not allowed");
  } catch (const json::exception& e) {
    // A field of an untrusted body had an unexpected JSON type.
    WriteStatus(res, 400, "BadRequest", std::string("malformed object: ") + e.what());
  }
}

std::string ApiServer::Impl::User(const HttpRequest& req) {
  return req.Header("Authorization").empty() ? "system:anonymous" : "hami-sim-user";
}

void ApiServer::Impl::BadBody(HttpResponse& res) {
  WriteStatus(res, 400, "BadRequest",
              "the body of the request was in an unknown format - accepted media types "
              "include: application/json");
}

void ApiServer::Impl::ServeDiscovery(const Target& t, HttpResponse& res) {
  if (t.version.empty()) {  // /apis/<group>
    std::string groups = registry.Groups();
    json all = json::parse(groups);
    for (const json& g : all["groups"]) {
      if (g["name"] == t.group) {
        json doc = g;
        doc["kind"] = "APIGroup";
        doc["apiVersion"] = "v1";
        return WriteObject(res, 200, doc);
      }
    }
    return WriteStatus(res, 404, "NotFound", "the server could not find the requested resource");
  }
  std::string doc = registry.ResourceList(t.group, t.version);
  if (doc.empty()) {
    return WriteStatus(res, 404, "NotFound", "the server could not find the requested resource");
  }
  res.SetJson(200, doc);
}

Result<ApiServer::Impl::Selectors> ApiServer::Impl::ParseSelectors(const HttpRequest& req) {
  Selectors s;
  HAMI_ASSIGN_OR_RETURN(s.labels, LabelSelector::Parse(req.Param("labelSelector")));
  HAMI_ASSIGN_OR_RETURN(s.fields, FieldSelector::Parse(req.Param("fieldSelector")));
  return s;
}

void ApiServer::Impl::List(const HttpRequest& req, const Target& t, HttpResponse& res) {
  Result<Selectors> sel = ParseSelectors(req);
  if (!sel.ok()) return WriteError(res, sel.status());
  int64_t revision = 0;
  std::vector<ObjectPtr> all = store.List(*t.resource, t.ns, &revision);
  std::vector<ObjectPtr> matched;
  for (ObjectPtr& o : all) {
    if (sel->Matches(*o)) matched.push_back(std::move(o));
  }
  if (WantsTable(req))
    return WriteObject(res, 200, TableOf(*t.resource, matched, revision, std::time(nullptr)));
  std::string body = "{\"kind\":\"" + t.resource->list_kind() + "\",\"apiVersion\":\"" +
                     t.resource->api_version() + "\",\"metadata\":{\"resourceVersion\":\"" +
                     std::to_string(revision) + "\"},\"items\":[";
  for (size_t i = 0; i < matched.size(); ++i) {
    if (i) body += ',';
    body += matched[i]->dump();
  }
  body += "]}";
  res.SetJson(200, std::move(body));
}

void ApiServer::Impl::Watch(const HttpRequest& req, const Target& t, HttpResponse& res) {
  Result<Selectors> sel = ParseSelectors(req);
  if (!sel.ok()) return WriteError(res, sel.status());
  std::string rv_param = req.Param("resourceVersion");
  auto deadline = SteadyClock::now() + options.max_watch_duration;
  if (req.HasParam("timeoutSeconds")) {
    char* end = nullptr;
    std::string ts = req.Param("timeoutSeconds");
    long secs = std::strtol(ts.c_str(), &end, 10);  // NOLINT(runtime/int)
    if (ts.empty() || *end != '\0' || secs < 0) {
      return WriteStatus(res, 400, "BadRequest", "invalid timeoutSeconds: " + ts);
    }
    deadline = std::min(deadline, SteadyClock::now() + std::chrono::seconds(secs));
  }
  bool bookmarks = req.Param("allowWatchBookmarks") == "true";
  bool table = WantsTable(req);
  const ResourceInfo* r = t.resource;
  std::vector<WatchEvent> initial;
  int64_t start = 0;
  if (rv_param.empty() || rv_param == "0") {
    // No resourceVersion: the current state as ADDED events, then changes.
    for (ObjectPtr& o : store.List(*r, t.ns, &start)) {
      initial.push_back({start, "ADDED", r, t.ns, std::move(o), nullptr});
    }
  } else {
    char* end = nullptr;
    long long v = std::strtoll(rv_param.c_str(), &end, 10);  // NOLINT(runtime/int)
    if (*end != '\0' || v < 0) {
      return WriteStatus(res, 400, "BadRequest", "invalid resourceVersion: " + rv_param);
    }
    // The events since `v`; a compacted revision is answered with 410 Gone.
    int64_t now = v;
    Status s = store.EventsSince(
        v, [r](const ResourceInfo& x) { return &x == r; }, &initial, &now);
    if (s.code() == StatusCode::kOutOfRange) {
      if (!options.expired_watch_as_error_event) return WriteError(res, s);
      std::string line = ExpiredEventLine(s.message());
      res.status = 200;
      res.content_type = "application/json";
      res.stream = [line](net::ChunkWriter& w) { (void)w.Write(line); };
      return;
    }
    if (!s.ok()) return WriteStatus(res, 503, "ServiceUnavailable", s.message());
    start = now;
  }
  res.status = 200;
  res.content_type = "application/json";
  WatchSpec spec;
  spec.resource = r;
  spec.ns = t.ns;
  spec.labels = std::move(sel->labels);
  spec.fields = std::move(sel->fields);
  if (table) {  // kubectl get -w: every event object is a one-row Table
    spec.render = [r](const WatchEvent& e) {
      return TableOf(*r, {e.object}, e.revision, std::time(nullptr)).dump();
    };
  }
  spec.bookmarks = bookmarks;
  spec.bookmark_every = options.bookmark_interval;
  spec.deadline = deadline;
  WatchHub* hub = &watches;
  res.stream = [hub, spec = std::move(spec), initial = std::move(initial),
                start](net::ChunkWriter& w) mutable {
    // The current state (or the events since the requested revision) from this thread, in
    // chunks of about 1 MiB; then the hub takes over.
    std::string out;
    for (const WatchEvent& e : initial) {
      spec.AppendEvent(e, &out);
      if (out.size() >= (1 << 20)) {
        if (!w.Write(out)) return;
        out.clear();
      }
    }
    if (!out.empty() && !w.Write(out)) return;
    hub->Serve(std::move(spec), start, w);
  };
}

}  // namespace hami::sim
