#include "common/read_file.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>

#include <fmt/format.h>

#include "common/scoped_fd.h"

namespace flightrec {

StatusOr<std::string> ReadFdToString(int fd, size_t max_bytes) {
  std::string out;
  char buf[65536];
  for (;;) {
    ssize_t n = ::read(fd, buf, sizeof(buf));
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return ErrnoStatus("read");
    if (n == 0) return out;
    if (out.size() + static_cast<size_t>(n) > max_bytes) {
      return Unsupported(fmt::format("longer than {} bytes", max_bytes));
    }
    out.append(buf, static_cast<size_t>(n));
  }
}

StatusOr<std::string> ReadFileToString(const std::string& path, size_t max_bytes) {
  ScopedFd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
  if (!fd) return ErrnoStatus(fmt::format("cannot open {}", path));
  auto text = ReadFdToString(fd.get(), max_bytes);
  if (!text.ok()) return text.status().Annotate(fmt::format("reading {}", path));
  return text;
}

}  // namespace flightrec
