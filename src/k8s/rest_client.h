// RestClient: typed-agnostic access to the Kubernetes REST API (GET, LIST, WATCH, POST, PUT, PATCH,
// DELETE) with authentication, client-side QPS limits and retries.
//
//   HAMI_ASSIGN_OR_RETURN(auto client, RestClient::Create(config));      // curl transport
//   HAMI_ASSIGN_OR_RETURN(Object pod, client->Get(kPods, "default", "p"));
//   Status s = client->Update(kPods, "default", pod);   // IsConflict(s) on a stale resourceVersion
//
// Retries (RetryPolicy): 429 is retried for every method (the server did not process it); a 5xx
// carrying Retry-After is retried for every method (the server asks for it); other 5xx, timeouts
// and connections lost after sending are retried only for idempotent methods (GET, PUT, DELETE);
// connect failures (request never sent) are retried for every method. The delay doubles from
// initial_backoff up to max_backoff; a Retry-After header (seconds) replaces it, capped at
// max_retry_after. Every attempt, retries included, takes a rate-limiter token.
//
// Errors are Status values as described in k8s/api_error.h.
//
// Thread safety: all methods may be called concurrently; Watch blocks its calling thread.
#pragma once

#include <chrono>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

#include "common/clock.h"
#include "common/status.h"
#include "common/thread_annotations.h"
#include "k8s/config.h"
#include "k8s/object_fwd.h"
#include "k8s/rate_limiter.h"
#include "k8s/transport.h"
#include "k8s/watch_stream.h"

namespace hami::k8s {

// A resource type: "v1"/"pods", "coordination.k8s.io/v1"/"leases", ...
struct Resource {
  std::string group_version{};
  std::string plural{};
  bool namespaced = true;
};

inline const Resource kPods{"v1", "pods", true};
inline const Resource kNodes{"v1", "nodes", false};
inline const Resource kEvents{"v1", "events", true};
inline const Resource kNamespaces{"v1", "namespaces", false};
inline const Resource kConfigMaps{"v1", "configmaps", true};
inline const Resource kLeases{"coordination.k8s.io/v1", "leases", true};

struct ListOptions {
  std::string label_selector{};
  std::string field_selector{};
  int64_t limit = 0;               // page size; 0 = server default (everything)
  std::string continue_token{};    // from a previous page's metadata.continue
  std::string resource_version{};  // LIST: consistency hint; WATCH: start after this version
  int64_t timeout_seconds = 0;     // WATCH: server-side timeout (the client gives up a grace later)
  bool allow_watch_bookmarks = true;
};

enum class PatchType { kMerge, kJsonPatch, kStrategicMerge };
std::string_view PatchContentType(PatchType type);

struct DeleteOptions {
  std::string precondition_resource_version{};  // 409 (IsConflict) if the object changed
  std::string precondition_uid{};
  int64_t grace_period_seconds = -1;  // < 0: server default
};

struct RetryPolicy {
  int max_attempts = 5;  // including the first
  std::chrono::milliseconds initial_backoff{100};
  std::chrono::milliseconds max_backoff{5000};
  std::chrono::seconds max_retry_after{60};
};

// The URL path of a collection or object: "/api/v1/namespaces/ns/pods/name/binding".
std::string ResourcePath(const Resource& r, std::string_view ns, std::string_view name = "",
                         std::string_view subresource = "");
// Percent-encodes a query value.
std::string UrlEncode(std::string_view s);

// What a write returned when the caller does not need the object back: its new
// resourceVersion (empty for replies without one, such as a Binding's Status).
struct WriteAck {
  std::string resource_version{};
};

class RestClient {
 public:
  // Production client on the real clock: a SocketTransport, or a CurlTransport when a proxy
  // environment variable applies to the server (ProxyConfiguredFor).
  static Result<std::unique_ptr<RestClient>> Create(const RestConfig& config);
  // Any transport and clock (tests; a shared transport). `clock` must outlive the client.
  RestClient(RestConfig config, std::unique_ptr<Transport> transport, Clock& clock,
             RetryPolicy retry = {});
  RestClient(const RestClient&) = delete;
  RestClient& operator=(const RestClient&) = delete;

  const RestConfig& config() const { return config_; }
  Clock& clock() const { return clock_; }

  Result<Object> Get(const Resource& r, std::string_view ns, std::string_view name);
  // One page: the List object (items, metadata.resourceVersion, metadata.continue).
  Result<Object> List(const Resource& r, std::string_view ns, const ListOptions& options = {});
  // Follows continue tokens; returns a List whose items are all pages' items and whose
  // resourceVersion is the first page's (the snapshot the pages belong to).
  Result<Object> ListAll(const Resource& r, std::string_view ns, const ListOptions& options = {});
  // POST; `subresource` e.g. "binding". The object's namespace defaults to `ns`.
  Result<Object> Create(const Resource& r, std::string_view ns, const Object& obj,
                        std::string_view subresource = "");
  // PUT to the object's name; the object's metadata.resourceVersion, when set, is the optimistic
  // concurrency precondition (409 -> IsConflict).
  Result<Object> Update(const Resource& r, std::string_view ns, const Object& obj,
                        std::string_view subresource = "");
  Result<Object> Patch(const Resource& r, std::string_view ns, std::string_view name,
                       PatchType type, std::string_view patch, std::string_view subresource = "");
  Status Delete(const Resource& r, std::string_view ns, std::string_view name,
                const DeleteOptions& options = {});

  // Create and Patch for callers that only need to know the write happened: the reply is
  // checked and scanned for the resourceVersion, never parsed into a document (the scheduler's
  // per-pod writes, where building the returned object cost more than sending the request).
  Result<WriteAck> CreateAck(const Resource& r, std::string_view ns, std::string_view name,
                             std::string body, std::string_view subresource = "");
  Result<WriteAck> PatchAck(const Resource& r, std::string_view ns, std::string_view name,
                            PatchType type, std::string patch, std::string_view subresource = "");
  // Creates several objects of `r` (each item: namespace, JSON body) in one pipelined batch
  // (Transport::DoBatch): one result per item, in order. Each item takes a rate-limiter token.
  // Not retried: a connection lost mid-batch leaves the unanswered items unknown, so this is for
  // best-effort writes such as Events.
  std::vector<Result<WriteAck>> CreateAckBatch(
      const Resource& r, const std::vector<std::pair<std::string, std::string>>& items);
  // Several patches (of any objects) in one pipelined batch, answered in order, one result per
  // item; each item takes a rate-limiter token. Not retried, as above: a transport error
  // (Unavailable, Unknown, DeadlineExceeded) leaves that item's fate unknown, so callers send
  // only idempotent patches here and repeat one that failed that way with PatchAck.
  struct PatchItem {
    const Resource* resource = nullptr;
    std::string ns, name;
    PatchType type = PatchType::kMerge;
    std::string patch;
    std::string subresource;
  };
  std::vector<Result<WriteAck>> PatchAckBatch(const std::vector<PatchItem>& items);

  // One watch stream. Blocks, calling `handler` for each ADDED/MODIFIED/DELETED/BOOKMARK event,
  // until the server ends the stream (OK), `handler` returns false (OK), `cancel` fires
  // (Cancelled) or an error occurs. A 410 response or ERROR event with code 410 returns a status
  // for which IsGone() holds; other ERROR events become the matching API status. Resumption and
  // relisting are the caller's job (see Informer).
  Status Watch(const Resource& r, std::string_view ns, const ListOptions& options,
               const std::function<bool(const WatchEvent&)>& handler,
               const Cancellation* cancel = nullptr);

  // A raw exchange with auth, rate limit and retries (for paths the helpers do not cover).
  // `path_and_query` starts with '/'. Non-2xx responses are returned as responses, not errors.
  Result<HttpResponse> Send(std::string_view method, std::string_view path_and_query,
                            std::string body = "", std::string_view content_type = "",
                            const Cancellation* cancel = nullptr);

 private:
  Result<Object> DoJson(std::string_view method, const std::string& path, std::string body,
                        std::string_view content_type);
  // One pipelined batch of writes of one method: (path, body, content type) per item.
  struct BatchItem {
    std::string path, body;
    std::string_view content_type;
  };
  std::vector<Result<WriteAck>> AckBatch(std::string_view method, std::vector<BatchItem> items);
  Result<WriteAck> DoAck(std::string_view method, const std::string& path, std::string body,
                         std::string_view content_type);
  // A request to this client's server with its standard headers and `token` ("" = none).
  HttpRequest NewRequest(std::string_view method, std::string_view path_and_query, std::string body,
                         std::string_view content_type, const std::string& token) const;
  // The write acknowledgement a response carries: its status checked, its resourceVersion found.
  static Result<WriteAck> AckOf(const HttpResponse& resp, std::string_view method,
                                std::string_view path);
  Result<std::string> BearerToken();

  RestConfig config_;
  std::unique_ptr<Transport> transport_;
  Clock& clock_;
  RetryPolicy retry_;
  RateLimiter limiter_;

  Mutex token_mu_;
  std::string cached_token_ GUARDED_BY(token_mu_);
  MonoTime token_read_at_ GUARDED_BY(token_mu_);
  bool token_read_ GUARDED_BY(token_mu_) = false;
};

}  // namespace hami::k8s
