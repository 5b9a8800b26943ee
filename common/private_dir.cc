#include "common/private_dir.h"

#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <filesystem>

#include <fmt/format.h>

namespace flightrec {

Status CheckPrivateDir(const std::string& dir, const std::string& what) {
  if (dir.empty() || dir[0] != '/') {
    return InvalidArgument(fmt::format("{} {} is not an absolute path", what, dir));
  }
  const std::filesystem::path p(dir);
  std::filesystem::path cur;
  for (const auto& part : p) {
    cur /= part;
    if (mkdir(cur.c_str(), 0700) != 0 && errno != EEXIST) {
      return ErrnoStatus(fmt::format("{} {}: creating {}", what, dir, cur.string()));
    }
  }
  for (std::filesystem::path d = p;; d = d.parent_path()) {
    struct stat sb;
    if (lstat(d.c_str(), &sb) != 0) return ErrnoStatus(fmt::format("{} {}", what, dir));
    if (!S_ISDIR(sb.st_mode)) {
      return InvalidArgument(fmt::format("{} {}: {} is not a directory (symlinks are refused)",
                                         what, dir, d.string()));
    }
    if (sb.st_uid != 0 && sb.st_uid != geteuid()) {
      return Status(StatusCode::kPermissionDenied,
                    fmt::format("{} {}: {} belongs to uid {}, not root or uid {}", what, dir,
                                d.string(), sb.st_uid, geteuid()));
    }
    // A sticky directory (/tmp) lets nobody rename or remove our entries.
    if ((sb.st_mode & 022) != 0 && (d == p || (sb.st_mode & S_ISVTX) == 0)) {
      return Status(StatusCode::kPermissionDenied,
                    fmt::format("{} {}: {} is writable by other users", what, dir, d.string()));
    }
    if (d == d.parent_path()) break;
  }
  return OkStatus();
}

}  // namespace flightrec
