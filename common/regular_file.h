// Opening a file whose path came from a record, a core or a peer (a mapped
// binary, a debug file): the path can name a FIFO, a device or a socket.
// open(O_RDONLY) on a FIFO without a writer blocks forever (a record naming
// one would hang `recorder report`), and reading /dev/zero never ends. So:
// O_NONBLOCK (opening a FIFO returns at once; it has no effect on a regular
// file's reads), then only a regular file is kept.
#pragma once

#include <fcntl.h>
#include <sys/stat.h>

#include <cerrno>
#include <string>

#include "common/scoped_fd.h"

namespace flightrec {

// An fd on `path` when it is a regular file, else an empty ScopedFd with
// errno set (EINVAL for a file of another type): callers treat both as a
// missing file.
inline ScopedFd OpenRegularFile(const std::string& path) {
  ScopedFd fd(::open(path.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC));
  if (!fd) return fd;
  struct stat st {};
  if (::fstat(fd.get(), &st) != 0) return ScopedFd();
  if (!S_ISREG(st.st_mode)) {
    errno = EINVAL;
    return ScopedFd();
  }
  return fd;
}

}  // namespace flightrec
