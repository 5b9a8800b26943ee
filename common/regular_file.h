// Opening a file whose path came from a record, a core or a peer (a mapped
// binary, a debug file), or a name in a directory others can write (a
// store's records): the path can name a FIFO, a device or a socket.
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

// An fd on `name` (relative to `dirfd`, or AT_FDCWD) when it is a regular
// file, else an empty ScopedFd with errno set (EINVAL for a file of another
// type): callers treat both as a missing file. `flags` adds open flags
// (O_NOFOLLOW for a name in a directory others write). A name that is not a
// regular file is not even opened (opening a device can act on it); the
// fstat after the open catches one swapped in meanwhile, and O_NONBLOCK
// keeps such a FIFO from blocking the open.
inline ScopedFd OpenRegularFileAt(int dirfd, const std::string& name, int flags = 0) {
  struct stat st {};
  const int at = (flags & O_NOFOLLOW) != 0 ? AT_SYMLINK_NOFOLLOW : 0;
  if (::fstatat(dirfd, name.c_str(), &st, at) != 0) return ScopedFd();
  if (!S_ISREG(st.st_mode)) {
    errno = S_ISLNK(st.st_mode) ? ELOOP : EINVAL;
    return ScopedFd();
  }
  ScopedFd fd(::openat(dirfd, name.c_str(), O_RDONLY | O_NONBLOCK | O_NOCTTY | O_CLOEXEC | flags));
  if (!fd) return fd;
  if (::fstat(fd.get(), &st) != 0) return ScopedFd();
  if (!S_ISREG(st.st_mode)) {
    errno = EINVAL;
    return ScopedFd();
  }
  return fd;
}

inline ScopedFd OpenRegularFile(const std::string& path) {
  return OpenRegularFileAt(AT_FDCWD, path);
}

}  // namespace flightrec
