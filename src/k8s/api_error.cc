#include "k8s/api_error.h"

#include <string>

#include "k8s/object.h"

namespace hami::k8s {

Status StatusFromHttp(int http_status, std::string_view body) {
  std::string reason;
  std::string message;
  if (Result<Object> parsed = ParseObject(body); parsed.ok()) {
    reason = GetString(*parsed, "/reason");
    message = GetString(*parsed, "/message");
  }
  if (message.empty()) message = std::string(body.substr(0, 256));
  std::string text = "HTTP " + std::to_string(http_status);
  if (!reason.empty()) text += " " + reason;
  if (!message.empty()) text += ": " + message;

  StatusCode code;
  switch (http_status) {
    case 400:
    case 422:
      code = StatusCode::kInvalidArgument;
      break;
    case 401:
    case 403:
      code = StatusCode::kPermissionDenied;
      break;
    case 404:
      code = StatusCode::kNotFound;
      break;
    case 409:
      code = reason == "AlreadyExists" ? StatusCode::kAlreadyExists : StatusCode::kAborted;
      break;
    case 410:
      code = StatusCode::kOutOfRange;
      break;
    case 429:
      code = StatusCode::kResourceExhausted;
      break;
    case 504:
      code = StatusCode::kDeadlineExceeded;
      break;
    default:
      code = http_status >= 500 ? StatusCode::kUnavailable : StatusCode::kUnknown;
  }
  return Status(code, std::move(text));
}

}  // namespace hami::k8s
