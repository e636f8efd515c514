// Status and Result<T>: how every module outside libvgpu reports failure.
//
// A Status is a canonical code plus a human-readable message; Result<T> is either a value or a
// non-OK Status. Both are small value types in the Abseil spirit, header-light (no third-party
// includes) so any component can use them:
//
//   Result<Config> LoadConfig(std::string_view text);
//
//   HAMI_ASSIGN_OR_RETURN(Config cfg, LoadConfig(text));   // inside a Status/Result function
//   if (Result<int> r = Parse(s); !r.ok()) Log(r.status().ToString());
//
// Exceptions never cross a module boundary: adapters around throwing libraries convert them into
// a Status where they are caught.
//
// Thread safety: plain values; distinct objects may be used concurrently, one object is not
// synchronised.
#pragma once

#include <cassert>
#include <optional>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>

namespace hami {

// Canonical error space (same numbering as absl::StatusCode / gRPC codes).
enum class StatusCode : int {
  kOk = 0,
  kCancelled = 1,
  kUnknown = 2,
  kInvalidArgument = 3,
  kDeadlineExceeded = 4,
  kNotFound = 5,
  kAlreadyExists = 6,
  kPermissionDenied = 7,
  kResourceExhausted = 8,
  kFailedPrecondition = 9,
  kAborted = 10,
  kOutOfRange = 11,
  kUnimplemented = 12,
  kInternal = 13,
  kUnavailable = 14,
  kDataLoss = 15,
};

// "INVALID_ARGUMENT" etc.; "UNKNOWN_CODE" for values outside the enum.
std::string_view StatusCodeName(StatusCode code);

class [[nodiscard]] Status {
 public:
  // OK.
  Status() = default;
  // A non-OK code with a message. Passing kOk yields OK and drops the message.
  Status(StatusCode code, std::string message);

  bool ok() const { return code_ == StatusCode::kOk; }
  StatusCode code() const { return code_; }
  const std::string& message() const { return message_; }

  // "OK" or "<CODE_NAME>: <message>".
  std::string ToString() const;

  // Returns a copy whose message is "<context>: <message>" (OK stays OK). Used to say where in a
  // larger input an error was found: Status("bad int").WithContext("devices[2].count").
  Status WithContext(std::string_view context) const;

  friend bool operator==(const Status& a, const Status& b) {
    return a.code_ == b.code_ && a.message_ == b.message_;
  }

 private:
  StatusCode code_ = StatusCode::kOk;
  std::string message_;
};

inline Status OkStatus() { return Status(); }
Status InvalidArgumentError(std::string message);
Status NotFoundError(std::string message);
Status AlreadyExistsError(std::string message);
Status FailedPreconditionError(std::string message);
Status OutOfRangeError(std::string message);
Status UnavailableError(std::string message);
Status InternalError(std::string message);
Status UnimplementedError(std::string message);
Status ResourceExhaustedError(std::string message);
Status AbortedError(std::string message);
Status DeadlineExceededError(std::string message);
Status PermissionDeniedError(std::string message);
Status DataLossError(std::string message);

namespace status_internal {
// Prints "Result holds no value: <status>" to stderr and aborts (a Result read on an error).
[[noreturn]] void DieReadingError(const Status& status);
}  // namespace status_internal

// Result<T>: a T or an error Status. Constructing from an OK Status is a programming error
// (caught by assert in debug builds; becomes an kInternal error in release builds).
template <typename T>
class [[nodiscard]] Result {
  static_assert(!std::is_same_v<std::decay_t<T>, Status>, "Result<Status> is meaningless");

 public:
  // Implicit so that `return value;` and `return SomeError(...);` both work.
  Result(const T& value) : value_(value) {}             // NOLINT(google-explicit-constructor)
  Result(T&& value) : value_(std::move(value)) {}       // NOLINT(google-explicit-constructor)
  Result(Status status) : status_(std::move(status)) {  // NOLINT(google-explicit-constructor)
    assert(!status_.ok() && "Result constructed from an OK Status");
    if (status_.ok()) status_ = Status(StatusCode::kInternal, "Result built from OK status");
  }
  // Converting constructor: Result<std::string> from a const char*, Result<long> from int, ...
  template <typename U, typename = std::enable_if_t<std::is_constructible_v<T, U&&> &&
                                                    !std::is_same_v<std::decay_t<U>, T> &&
                                                    !std::is_same_v<std::decay_t<U>, Status> &&
                                                    !std::is_same_v<std::decay_t<U>, Result>>>
  Result(U&& value) : value_(T(std::forward<U>(value))) {}  // NOLINT

  bool ok() const { return value_.has_value(); }
  // OK when a value is held.
  const Status& status() const { return status_; }

  // Precondition: ok(). Reading the value of an error aborts with the status message (never
  // undefined behaviour).
  const T& value() const& { return Checked(); }
  T& value() & { return Checked(); }
  T&& value() && { return std::move(Checked()); }
  const T& operator*() const& { return Checked(); }
  T& operator*() & { return Checked(); }
  T&& operator*() && { return std::move(Checked()); }
  const T* operator->() const { return &Checked(); }
  T* operator->() { return &Checked(); }

  // The value, or `fallback` on error.
  template <typename U>
  T value_or(U&& fallback) const& {
    return ok() ? *value_ : static_cast<T>(std::forward<U>(fallback));
  }

 private:
  const T& Checked() const {
    if (!value_.has_value()) [[unlikely]]
      status_internal::DieReadingError(status_);
    return *value_;
  }
  T& Checked() {
    if (!value_.has_value()) [[unlikely]]
      status_internal::DieReadingError(status_);
    return *value_;
  }

  Status status_;
  std::optional<T> value_;
};

namespace status_internal {
inline const Status& GetStatus(const Status& s) { return s; }
template <typename T>
const Status& GetStatus(const Result<T>& r) {
  return r.status();
}
}  // namespace status_internal

}  // namespace hami

#define HAMI_STATUS_CONCAT_INNER_(a, b) a##b
#define HAMI_STATUS_CONCAT_(a, b) HAMI_STATUS_CONCAT_INNER_(a, b)

// Returns the Status of `expr` (a Status or a Result) from the enclosing function if not OK.
#define HAMI_RETURN_IF_ERROR(expr)                                  \
  do {                                                              \
    const auto& hami_status_tmp_ = (expr);                          \
    if (!::hami::status_internal::GetStatus(hami_status_tmp_).ok()) \
      return ::hami::status_internal::GetStatus(hami_status_tmp_);  \
  } while (false)

// Evaluates `rexpr` (a Result<T>); on error returns its Status, else binds the value to `lhs`
// (a declaration such as `int n` or an existing lvalue).
#define HAMI_ASSIGN_OR_RETURN(lhs, rexpr) \
  HAMI_ASSIGN_OR_RETURN_IMPL_(HAMI_STATUS_CONCAT_(hami_result_, __LINE__), lhs, rexpr)
#define HAMI_ASSIGN_OR_RETURN_IMPL_(result, lhs, rexpr) \
  auto result = (rexpr);                                \
  if (!result.ok()) return result.status();             \
  lhs = std::move(result).value()
