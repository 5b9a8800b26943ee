#include "common/status.h"

#include <cstring>

namespace flightrec {

const char* StatusCodeName(StatusCode code) {
  switch (code) {
    case StatusCode::kOk:
      return "ok";
    case StatusCode::kInvalidArgument:
      return "invalid argument";
    case StatusCode::kNotFound:
      return "not found";
    case StatusCode::kAlreadyExists:
      return "already exists";
    case StatusCode::kPermissionDenied:
      return "permission denied";
    case StatusCode::kCorrupt:
      return "corrupt";
    case StatusCode::kUnsupported:
      return "unsupported";
    case StatusCode::kNoSpace:
      return "no space";
    case StatusCode::kUnavailable:
      return "unavailable";
    case StatusCode::kResourceExhausted:
      return "resource exhausted";
    case StatusCode::kInternal:
      return "internal error";
  }
  return "unknown";
}

std::string Status::ToString() const {
  if (ok()) return "ok";
  return message_;
}

Status Status::Annotate(const std::string& context) const {
  if (ok()) return *this;
  return Status(code_, context + ": " + message_, errno_);
}

Status InvalidArgument(std::string msg) {
  return Status(StatusCode::kInvalidArgument, std::move(msg));
}
Status NotFound(std::string msg) { return Status(StatusCode::kNotFound, std::move(msg)); }
Status Corrupt(std::string msg) { return Status(StatusCode::kCorrupt, std::move(msg)); }
Status Unsupported(std::string msg) { return Status(StatusCode::kUnsupported, std::move(msg)); }
Status Unavailable(std::string msg) { return Status(StatusCode::kUnavailable, std::move(msg)); }
Status Internal(std::string msg) { return Status(StatusCode::kInternal, std::move(msg)); }

Status ErrnoStatus(int err, std::string msg) {
  StatusCode code = StatusCode::kInternal;
  switch (err) {
    case ENOSPC:
    case EDQUOT:
    case EFBIG:
      code = StatusCode::kNoSpace;
      break;
    case EACCES:
    case EPERM:
      code = StatusCode::kPermissionDenied;
      break;
    case ENOENT:
    case ESRCH:
      code = StatusCode::kNotFound;
      break;
    case EEXIST:
      code = StatusCode::kAlreadyExists;
      break;
    case EINVAL:
      code = StatusCode::kInvalidArgument;
      break;
    case EOPNOTSUPP:
    case ENOSYS:
    case ENODEV:
      code = StatusCode::kUnsupported;
      break;
    case EMFILE:
    case ENFILE:
    case ENOMEM:
      code = StatusCode::kResourceExhausted;
      break;
    case ECONNREFUSED:
    case ETIMEDOUT:
    case EAGAIN:
      code = StatusCode::kUnavailable;
      break;
    default:
      break;
  }
  // strerror(ENOSPC) is "No space left on device": users grep for "no space".
  std::string text = msg + ": " + std::strerror(err);
  if (code == StatusCode::kNoSpace) text += " (no space)";
  return Status(code, std::move(text), err);
}

Status ErrnoStatus(std::string msg) { return ErrnoStatus(errno, std::move(msg)); }

}  // namespace flightrec
