#include "k8s/rest_client.h"

#include <algorithm>
#include <cstdlib>

#include "common/file_util.h"
#include "k8s/api_error.h"
#include "k8s/object.h"
#include "k8s/socket_transport.h"
#include "net/http_wire.h"

namespace hami::k8s {

namespace {

constexpr std::chrono::seconds kTokenFileRefresh{60};

bool IsIdempotent(std::string_view method) {
  return method == "GET" || method == "HEAD" || method == "PUT" || method == "DELETE";
}

void AppendQuery(std::string& q, std::string_view key, std::string_view value) {
  q += q.empty() ? '?' : '&';
  q += key;
  q += '=';
  q += UrlEncode(value);
}

std::string ListQuery(const ListOptions& o, bool watch) {
  std::string q;
  if (watch) AppendQuery(q, "watch", "true");
  if (!o.label_selector.empty()) AppendQuery(q, "labelSelector", o.label_selector);
  if (!o.field_selector.empty()) AppendQuery(q, "fieldSelector", o.field_selector);
  if (!o.resource_version.empty()) AppendQuery(q, "resourceVersion", o.resource_version);
  if (watch) {
    if (o.allow_watch_bookmarks) AppendQuery(q, "allowWatchBookmarks", "true");
    if (o.timeout_seconds > 0) AppendQuery(q, "timeoutSeconds", std::to_string(o.timeout_seconds));
  } else {
    if (o.limit > 0) AppendQuery(q, "limit", std::to_string(o.limit));
    if (!o.continue_token.empty()) AppendQuery(q, "continue", o.continue_token);
  }
  return q;
}

// Retry-After in seconds (the HTTP-date form is not used by the API server); -1 when absent.
int64_t RetryAfterSeconds(const HttpResponse& r) {
  std::string v = r.Header("retry-after");
  if (v.empty()) return -1;
  char* end = nullptr;
  long long n = std::strtoll(v.c_str(), &end, 10);
  if (end == v.c_str() || *end != '\0' || n < 0) return -1;
  return n;
}

}  // namespace

std::string_view PatchContentType(PatchType type) {
  switch (type) {
    case PatchType::kMerge:
      return "application/merge-patch+json";
    case PatchType::kJsonPatch:
      return "application/json-patch+json";
    case PatchType::kStrategicMerge:
      return "application/strategic-merge-patch+json";
  }
  return "application/merge-patch+json";
}

std::string UrlEncode(std::string_view s) { return net::wire::PercentEncode(s); }

std::string ResourcePath(const Resource& r, std::string_view ns, std::string_view name,
                         std::string_view subresource) {
  std::string p = r.group_version.find('/') == std::string::npos ? "/api/" : "/apis/";
  p += r.group_version;
  if (r.namespaced && !ns.empty()) {
    p += "/namespaces/";
    p += UrlEncode(ns);
  }
  p += '/';
  p += r.plural;
  if (!name.empty()) {
    p += '/';
    p += UrlEncode(name);
    if (!subresource.empty()) {
      p += '/';
      p += subresource;
    }
  }
  return p;
}

Result<std::unique_ptr<RestClient>> RestClient::Create(const RestConfig& config) {
  static RealClock* real_clock = new RealClock();  // process lifetime, never destroyed
  HAMI_ASSIGN_OR_RETURN(std::unique_ptr<Transport> transport,
                        NewTransportFor(config.server, config.tls, std::chrono::seconds(10)));
  return std::make_unique<RestClient>(config, std::move(transport), *real_clock);
}

RestClient::RestClient(RestConfig config, std::unique_ptr<Transport> transport, Clock& clock,
                       RetryPolicy retry)
    : config_(std::move(config)),
      transport_(std::move(transport)),
      clock_(clock),
      retry_(retry),
      limiter_(config_.qps, config_.burst, clock) {
  while (!config_.server.empty() && config_.server.back() == '/') config_.server.pop_back();
}

Result<std::string> RestClient::BearerToken() {
  if (config_.bearer_token_file.empty()) return config_.bearer_token;
  MutexLock lock(token_mu_);
  MonoTime now = clock_.Now();
  if (!token_read_ || now - token_read_at_ >= kTokenFileRefresh) {
    Result<std::string> t = ReadFileToString(config_.bearer_token_file);
    if (!t.ok()) {
      if (!token_read_) return t.status().WithContext("bearer token file");
      // Keep using the previous token; the file may be mid-rotation.
    } else {
      std::string v = std::move(*t);
      while (!v.empty() && (v.back() == '\n' || v.back() == '\r' || v.back() == ' ')) v.pop_back();
      cached_token_ = std::move(v);
      token_read_ = true;
      token_read_at_ = now;
    }
  }
  return cached_token_;
}

HttpRequest RestClient::NewRequest(std::string_view method, std::string_view path_and_query,
                                   std::string body, std::string_view content_type,
                                   const std::string& token) const {
  HttpRequest req;
  req.method = std::string(method);
  req.url = config_.server + std::string(path_and_query);
  req.body = std::move(body);
  req.timeout = config_.timeout;
  req.headers.emplace_back("Accept", "application/json");
  req.headers.emplace_back("User-Agent", config_.user_agent);
  if (!content_type.empty()) req.headers.emplace_back("Content-Type", std::string(content_type));
  if (!token.empty()) req.headers.emplace_back("Authorization", "Bearer " + token);
  return req;
}

Result<WriteAck> RestClient::AckOf(const HttpResponse& resp, std::string_view method,
                                   std::string_view path) {
  if (resp.status < 200 || resp.status >= 300) return StatusFromHttp(resp.status, resp.body);
  WriteAck ack;
  if (resp.body.empty()) return ack;
  Result<std::string> rv = ScanResourceVersion(resp.body);
  if (!rv.ok()) return rv.status().WithContext(std::string(method) + " " + std::string(path));
  ack.resource_version = std::move(*rv);
  return ack;
}

Result<HttpResponse> RestClient::Send(std::string_view method, std::string_view path_and_query,
                                      std::string body, std::string_view content_type,
                                      const Cancellation* cancel) {
  HAMI_ASSIGN_OR_RETURN(std::string token, BearerToken());
  HttpRequest req = NewRequest(method, path_and_query, std::move(body), content_type, token);
  req.cancel = cancel;

  const bool idempotent = IsIdempotent(method);
  std::chrono::milliseconds backoff = retry_.initial_backoff;
  for (int attempt = 1;; ++attempt) {
    if (limiter_.Accept(cancel)) return Status(StatusCode::kCancelled, "cancelled");
    Result<HttpResponse> resp = transport_->Do(req);
    bool retry = false;
    int64_t retry_after = -1;
    if (!resp.ok()) {
      StatusCode c = resp.status().code();
      retry = c == StatusCode::kUnavailable ||
              (idempotent && (c == StatusCode::kUnknown || c == StatusCode::kDeadlineExceeded));
    } else if (resp->status == 429 || resp->status >= 500) {
      retry_after = RetryAfterSeconds(*resp);
      retry = resp->status == 429 || retry_after >= 0 || idempotent;
    }
    if (!retry || attempt >= retry_.max_attempts) return resp;
    Duration delay = backoff;
    if (retry_after >= 0) {
      delay = std::chrono::seconds(std::min<int64_t>(retry_after, retry_.max_retry_after.count()));
    }
    backoff = std::min(backoff * 2, retry_.max_backoff);
    if (clock_.Sleep(delay, cancel)) return Status(StatusCode::kCancelled, "cancelled");
  }
}

Result<Object> RestClient::DoJson(std::string_view method, const std::string& path,
                                  std::string body, std::string_view content_type) {
  HAMI_ASSIGN_OR_RETURN(HttpResponse resp, Send(method, path, std::move(body), content_type));
  if (resp.status < 200 || resp.status >= 300) return StatusFromHttp(resp.status, resp.body);
  if (resp.body.empty()) return Object::object();
  Result<Object> obj = ParseObject(resp.body);
  if (!obj.ok()) return obj.status().WithContext(std::string(method) + " " + path);
  return obj;
}

Result<WriteAck> RestClient::DoAck(std::string_view method, const std::string& path,
                                   std::string body, std::string_view content_type) {
  HAMI_ASSIGN_OR_RETURN(HttpResponse resp, Send(method, path, std::move(body), content_type));
  return AckOf(resp, method, path);
}

Result<WriteAck> RestClient::CreateAck(const Resource& r, std::string_view ns,
                                       std::string_view name, std::string body,
                                       std::string_view subresource) {
  if (!subresource.empty() && name.empty()) {
    return InvalidArgumentError("Create: a subresource needs the object's name");
  }
  std::string path =
      subresource.empty() ? ResourcePath(r, ns) : ResourcePath(r, ns, name, subresource);
  return DoAck("POST", path, std::move(body), "application/json");
}

std::vector<Result<WriteAck>> RestClient::CreateAckBatch(
    const Resource& r, const std::vector<std::pair<std::string, std::string>>& items) {
  std::vector<BatchItem> batch;
  batch.reserve(items.size());
  for (const auto& [ns, body] : items) {
    batch.push_back({ResourcePath(r, ns), body, "application/json"});
  }
  return AckBatch("POST", std::move(batch));
}

std::vector<Result<WriteAck>> RestClient::PatchAckBatch(const std::vector<PatchItem>& items) {
  std::vector<BatchItem> batch;
  batch.reserve(items.size());
  for (const PatchItem& p : items) {
    if (p.resource == nullptr || p.name.empty()) {
      return std::vector<Result<WriteAck>>(
          items.size(), InvalidArgumentError("PatchAckBatch: an item has no resource or name"));
    }
    batch.push_back({ResourcePath(*p.resource, p.ns, p.name, p.subresource), p.patch,
                     PatchContentType(p.type)});
  }
  return AckBatch("PATCH", std::move(batch));
}

std::vector<Result<WriteAck>> RestClient::AckBatch(std::string_view method,
                                                   std::vector<BatchItem> items) {
  std::vector<Result<WriteAck>> out;
  out.reserve(items.size());
  Result<std::string> token = BearerToken();
  if (!token.ok()) {
    for (size_t i = 0; i < items.size(); ++i) out.push_back(token.status());
    return out;
  }
  std::vector<HttpRequest> reqs;
  reqs.reserve(items.size());
  for (BatchItem& item : items) {
    if (limiter_.Accept(nullptr)) {
      out.assign(items.size(), Status(StatusCode::kCancelled, "cancelled"));
      return out;
    }
    reqs.push_back(NewRequest(method, item.path, std::move(item.body), item.content_type, *token));
  }
  std::vector<Result<HttpResponse>> resps = transport_->DoBatch(reqs);
  for (size_t i = 0; i < resps.size(); ++i) {
    out.push_back(resps[i].ok() ? AckOf(*resps[i], method, items[i].path)
                                : Result<WriteAck>(resps[i].status()));
  }
  return out;
}

Result<WriteAck> RestClient::PatchAck(const Resource& r, std::string_view ns, std::string_view name,
                                      PatchType type, std::string patch,
                                      std::string_view subresource) {
  if (name.empty()) return InvalidArgumentError("Patch: empty name");
  return DoAck("PATCH", ResourcePath(r, ns, name, subresource), std::move(patch),
               PatchContentType(type));
}

Result<Object> RestClient::Get(const Resource& r, std::string_view ns, std::string_view name) {
  return DoJson("GET", ResourcePath(r, ns, name), "", "");
}

Result<Object> RestClient::List(const Resource& r, std::string_view ns,
                                const ListOptions& options) {
  return DoJson("GET", ResourcePath(r, ns) + ListQuery(options, false), "", "");
}

Result<Object> RestClient::ListAll(const Resource& r, std::string_view ns,
                                   const ListOptions& options) {
  ListOptions page = options;
  HAMI_ASSIGN_OR_RETURN(Object result, List(r, ns, page));
  if (!result.contains("items") || !result["items"].is_array()) result["items"] = Object::array();
  std::string cont = GetString(result, "/metadata/continue");
  while (!cont.empty()) {
    page.continue_token = cont;
    page.resource_version.clear();  // a continue token carries its own snapshot
    HAMI_ASSIGN_OR_RETURN(Object next, List(r, ns, page));
    auto it = next.find("items");
    if (it != next.end() && it->is_array()) {
      for (auto& item : *it) result["items"].push_back(std::move(item));
    }
    cont = GetString(next, "/metadata/continue");
  }
  if (result.contains("metadata") && result["metadata"].is_object()) {
    result["metadata"].erase("continue");
  }
  return result;
}

Result<Object> RestClient::Create(const Resource& r, std::string_view ns, const Object& obj,
                                  std::string_view subresource) {
  std::string path;
  if (subresource.empty()) {
    path = ResourcePath(r, ns);
  } else {
    path = ResourcePath(r, ns, Name(obj), subresource);
  }
  return DoJson("POST", path, obj.dump(), "application/json");
}

Result<Object> RestClient::Update(const Resource& r, std::string_view ns, const Object& obj,
                                  std::string_view subresource) {
  std::string name = Name(obj);
  if (name.empty()) return InvalidArgumentError("Update: object has no metadata.name");
  return DoJson("PUT", ResourcePath(r, ns, name, subresource), obj.dump(), "application/json");
}

Result<Object> RestClient::Patch(const Resource& r, std::string_view ns, std::string_view name,
                                 PatchType type, std::string_view patch,
                                 std::string_view subresource) {
  if (name.empty()) return InvalidArgumentError("Patch: empty name");
  return DoJson("PATCH", ResourcePath(r, ns, name, subresource), std::string(patch),
                PatchContentType(type));
}

Status RestClient::Delete(const Resource& r, std::string_view ns, std::string_view name,
                          const DeleteOptions& options) {
  if (name.empty()) return InvalidArgumentError("Delete: empty name");
  std::string body;
  if (!options.precondition_resource_version.empty() || !options.precondition_uid.empty() ||
      options.grace_period_seconds >= 0) {
    Object d = {{"apiVersion", "v1"}, {"kind", "DeleteOptions"}};
    if (!options.precondition_resource_version.empty()) {
      d["preconditions"]["resourceVersion"] = options.precondition_resource_version;
    }
    if (!options.precondition_uid.empty()) d["preconditions"]["uid"] = options.precondition_uid;
    if (options.grace_period_seconds >= 0) d["gracePeriodSeconds"] = options.grace_period_seconds;
    body = d.dump();
  }
  std::string_view content_type = body.empty() ? "" : "application/json";
  Result<Object> r2 = DoJson("DELETE", ResourcePath(r, ns, name), std::move(body), content_type);
  return r2.status();
}

Status RestClient::Watch(const Resource& r, std::string_view ns, const ListOptions& options,
                         const std::function<bool(const WatchEvent&)>& handler,
                         const Cancellation* cancel) {
  HttpRequest req;
  req.method = "GET";
  req.url = config_.server + ResourcePath(r, ns) + ListQuery(options, true);
  // A watch the server neither feeds nor ends (a dead proxy, a peer gone silent without closing)
  // must not hold its caller forever: the server was asked to end it after timeoutSeconds, so
  // the client gives up that long plus a grace (half of it, 2 to 30 s) later, with
  // DeadlineExceeded. Without timeoutSeconds there is no bound (the caller's cancellation).
  req.timeout = std::chrono::milliseconds(0);
  if (options.timeout_seconds > 0) {
    std::chrono::milliseconds asked = std::chrono::seconds(options.timeout_seconds);
    req.timeout = asked + std::clamp<std::chrono::milliseconds>(asked / 2, std::chrono::seconds(2),
                                                                std::chrono::seconds(30));
  }
  req.cancel = cancel;
  req.headers.emplace_back("Accept", "application/json");
  req.headers.emplace_back("User-Agent", config_.user_agent);
  HAMI_ASSIGN_OR_RETURN(std::string token, BearerToken());
  if (!token.empty()) req.headers.emplace_back("Authorization", "Bearer " + token);

  WatchStreamParser parser;
  Status stream_status;
  bool handler_stopped = false;
  req.on_body = [&](std::string_view chunk) {
    Status s = parser.Feed(chunk, [&](WatchEvent ev) {
      if (ev.type == WatchEvent::Type::kError) {
        int code = static_cast<int>(GetInt(*ev.object, "/code", 500));
        stream_status = StatusFromHttp(code, ev.object->dump());
        return false;
      }
      if (!handler(ev)) {
        handler_stopped = true;
        return false;
      }
      return true;
    });
    if (!s.ok()) {
      stream_status = s;
      return false;
    }
    return stream_status.ok() && !handler_stopped;
  };
  if (limiter_.Accept(cancel)) return Status(StatusCode::kCancelled, "cancelled");
  Result<HttpResponse> resp = transport_->Do(req);
  if (!resp.ok()) return resp.status();
  if (resp->status < 200 || resp->status >= 300) return StatusFromHttp(resp->status, resp->body);
  if (!stream_status.ok()) return stream_status;
  if (!handler_stopped && cancel != nullptr && cancel->cancelled()) {
    return Status(StatusCode::kCancelled, "cancelled");
  }
  return OkStatus();
}

}  // namespace hami::k8s
