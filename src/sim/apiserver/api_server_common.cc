// The helpers of api_server_internal.h: names and times, errors in the shape of metav1.Status,
// and request paths.
#include "sim/apiserver/api_server_internal.h"

#include <ctime>
#include <random>
#include <sstream>

#include "common/uuid.h"

namespace hami::sim::api_server_internal {

using net::HttpRequest;
using net::HttpResponse;

// ---- small helpers -------------------------------------------------------------------------

// Now plus `seconds`, in the API's timestamp form.
std::string Rfc3339After(int64_t seconds) {
  std::time_t t = std::time(nullptr) + static_cast<std::time_t>(seconds);
  std::tm tm{};
  gmtime_r(&t, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
}

std::string NowRfc3339() { return Rfc3339After(0); }

std::string RandomSuffix(size_t n) {
  static const char kChars[] = "bcdfghjklmnpqrstvwxz2456789";
  static thread_local std::mt19937_64 rng{std::random_device{}()};
  std::string out;
  for (size_t i = 0; i < n; ++i) out += kChars[rng() % (sizeof kChars - 1)];
  return out;
}

std::string NewUid() { return NewRandomUuid(); }

bool ValidName(const std::string& name) {
  if (name.empty() || name.size() > 253 || name == "." || name == "..") return false;
  for (char c : name) {
    if (c == '/' || c == '%' || static_cast<unsigned char>(c) < 0x21) return false;
  }
  return true;
}

// ---- errors in the shape of metav1.Status --------------------------------------------------

namespace {

struct HttpError {
  int code;
  const char* reason;
};

HttpError Classify(StatusCode code) {
  switch (code) {
    case StatusCode::kNotFound:
      return {404, "NotFound"};
    case StatusCode::kAlreadyExists:
      return {409, "AlreadyExists"};
    case StatusCode::kAborted:
      return {409, "Conflict"};
    case StatusCode::kInvalidArgument:
      return {400, "BadRequest"};
    case StatusCode::kFailedPrecondition:
      return {422, "Invalid"};
    case StatusCode::kOutOfRange:
      return {410, "Expired"};
    case StatusCode::kUnimplemented:
      return {405, "MethodNotAllowed"};
    case StatusCode::kPermissionDenied:
      return {403, "Forbidden"};
    case StatusCode::kUnavailable:
      return {503, "ServiceUnavailable"};
    case StatusCode::kDeadlineExceeded:
      return {504, "Timeout"};
    default:
      return {500, "InternalError"};
  }
}

}  // namespace

json StatusObject(int code, const std::string& reason, const std::string& message,
                  const json& details) {
  json s = {{"kind", "Status"},    {"apiVersion", "v1"}, {"metadata", json::object()},
            {"status", "Failure"}, {"message", message}, {"reason", reason},
            {"code", code}};
  if (!details.is_null()) s["details"] = details;
  return s;
}

// The watch event that ends a stream whose position fell out of the history window.
std::string ExpiredEventLine(const std::string& message) {
  return json{{"type", "ERROR"}, {"object", StatusObject(410, "Expired", message)}}.dump() + "\n";
}

void WriteStatus(HttpResponse& res, int code, const std::string& reason, const std::string& message,
                 const json& details) {
  res.SetJson(code, StatusObject(code, reason, message, details).dump());
}

void WriteError(HttpResponse& res, const Status& status, const json& details) {
  HttpError e = Classify(status.code());
  WriteStatus(res, e.code, e.reason, status.message(), details);
}

void WriteObject(HttpResponse& res, int code, const json& object) {
  res.SetJson(code, object.dump());
}

// ---- request targets -----------------------------------------------------------------------

std::vector<std::string> Split(const std::string& path) {
  std::vector<std::string> out;
  std::stringstream ss(path);
  std::string seg;
  while (std::getline(ss, seg, '/')) {
    if (!seg.empty()) out.push_back(seg);
  }
  return out;
}

Result<Target> ParseTarget(const ResourceRegistry& registry, const std::string& path) {
  std::vector<std::string> seg = Split(path);
  Target t;
  size_t i;
  if (!seg.empty() && seg[0] == "api" && seg.size() >= 2) {
    t.version = seg[1];
    i = 2;
  } else if (!seg.empty() && seg[0] == "apis" && seg.size() >= 2) {
    t.group = seg[1];
    if (seg.size() == 2) {
      t.discovery = true;
      return t;
    }
    t.version = seg[2];
    i = 3;
  } else {
    return NotFoundError("the server could not find the requested resource");
  }
  std::vector<std::string> rest(seg.begin() + static_cast<long>(i), seg.end());  // NOLINT
  if (rest.empty()) {
    t.discovery = true;
    return t;
  }
  if (rest[0] == "namespaces" && rest.size() >= 3) {
    const ResourceInfo* r = registry.Find(t.group, t.version, rest[2]);
    if (r && r->namespaced) {
      t.ns = rest[1];
      rest.erase(rest.begin(), rest.begin() + 2);
    }
  }
  if (rest.size() > 3) return NotFoundError("the server could not find the requested resource");
  t.resource = registry.Find(t.group, t.version, rest[0]);
  if (!t.resource) return NotFoundError("the server could not find the requested resource");
  if (rest.size() >= 2) t.name = rest[1];
  if (rest.size() == 3) t.sub = rest[2];
  if (t.resource->namespaced && t.ns.empty() && !t.name.empty()) {
    return NotFoundError("the server could not find the requested resource");
  }
  bool token_request =
      t.sub == "token" && t.group.empty() && t.resource->resource == "serviceaccounts";
  if (!t.sub.empty() && !token_request &&
      !((t.sub == "status" && t.resource->has_status) ||
        ((t.sub == "binding" || t.sub == "log" || t.sub == "exec") && t.resource->has_binding))) {
    return NotFoundError("the server could not find the requested resource");
  }
  return t;
}

// ---- kubectl's Table output ----------------------------------------------------------------

bool WantsTable(const HttpRequest& req) {
  return req.Header("Accept").find("as=Table") != std::string::npos;
}

}  // namespace hami::sim::api_server_internal
