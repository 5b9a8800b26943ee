// Status / StatusOr: the one error type of flightrec.
//
// Why: recoverable errors are returned, never thrown across component
// boundaries; only main() turns them into exit codes (see docs/CONTRIBUTING.md).
// A Status carries a code, the errno that caused it (0 if none) and a message
// that already names the object involved ("record X: section 'core': ...").
#pragma once

#include <cerrno>
#include <optional>
#include <string>
#include <utility>
#include <variant>

namespace flightrec {

enum class StatusCode {
  kOk = 0,
  kInvalidArgument,  // the caller asked for something malformed
  kNotFound,         // a named thing does not exist
  kAlreadyExists,
  kPermissionDenied,
  kCorrupt,      // data on disk or on the wire fails validation
  kUnsupported,  // this machine/kernel/format version cannot do it
  kNoSpace,      // ENOSPC / EDQUOT / a configured limit
  kUnavailable,  // a peer (daemon, device) is not there or timed out
  kResourceExhausted,
  kInternal,
};

const char* StatusCodeName(StatusCode code);

class [[nodiscard]] Status {
 public:
  Status() = default;
  Status(StatusCode code, std::string message, int err = 0)
      : code_(code), errno_(err), message_(std::move(message)) {}

  static Status Ok() { return Status(); }
  bool ok() const { return code_ == StatusCode::kOk; }
  StatusCode code() const { return code_; }
  int err() const { return errno_; }
  const std::string& message() const { return message_; }
  // "message: strerror(errno)" — what a user should read.
  std::string ToString() const;
  // Prefixes context: Annotate("opening store /x") → "opening store /x: <msg>".
  Status Annotate(const std::string& context) const;

 private:
  StatusCode code_ = StatusCode::kOk;
  int errno_ = 0;
  std::string message_;
};

inline Status OkStatus() { return Status(); }
Status InvalidArgument(std::string msg);
Status NotFound(std::string msg);
Status Corrupt(std::string msg);
Status Unsupported(std::string msg);
Status Unavailable(std::string msg);
Status Internal(std::string msg);
// Maps errno to a code (ENOSPC/EDQUOT → kNoSpace, EACCES/EPERM →
// kPermissionDenied, ENOENT → kNotFound, ...) and appends strerror.
Status ErrnoStatus(int err, std::string msg);
// ErrnoStatus(errno, msg), reading errno at the call.
Status ErrnoStatus(std::string msg);

template <typename T>
class [[nodiscard]] StatusOr {
 public:
  StatusOr(const T& value) : v_(value) {}             // NOLINT: implicit by design
  StatusOr(T&& value) : v_(std::move(value)) {}       // NOLINT
  StatusOr(Status status) : v_(std::move(status)) {}  // NOLINT
  bool ok() const { return std::holds_alternative<T>(v_); }
  const Status& status() const {
    static const Status kOk;
    return ok() ? kOk : std::get<Status>(v_);
  }
  T& value() & { return std::get<T>(v_); }
  const T& value() const& { return std::get<T>(v_); }
  T&& value() && { return std::get<T>(std::move(v_)); }
  T& operator*() & { return value(); }
  const T& operator*() const& { return value(); }
  T&& operator*() && { return std::move(*this).value(); }
  // The value, or `fallback` when this holds an error.
  T value_or(T fallback) && { return ok() ? std::move(*this).value() : std::move(fallback); }
  T* operator->() { return &value(); }
  const T* operator->() const { return &value(); }

 private:
  std::variant<Status, T> v_;
};

}  // namespace flightrec

#define FLIGHTREC_CONCAT_INNER(a, b) a##b
#define FLIGHTREC_CONCAT(a, b) FLIGHTREC_CONCAT_INNER(a, b)

#define RETURN_IF_ERROR(expr)         \
  do {                                \
    ::flightrec::Status _st = (expr); \
    if (!_st.ok()) return _st;        \
  } while (0)

#define ASSIGN_OR_RETURN_IMPL(tmp, lhs, expr) \
  auto tmp = (expr);                          \
  if (!tmp.ok()) return tmp.status();         \
  lhs = std::move(tmp).value()

// ASSIGN_OR_RETURN(auto x, Foo()); — declares x or returns Foo()'s error.
#define ASSIGN_OR_RETURN(lhs, expr) \
  ASSIGN_OR_RETURN_IMPL(FLIGHTREC_CONCAT(_status_or_, __LINE__), lhs, expr)
