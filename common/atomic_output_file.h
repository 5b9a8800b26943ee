// An output file a person names on the command line (`recorder export -o`,
// `flamegraph -o`, `crash core -o`), written by a process that may be root,
// often into a sticky world-writable directory such as /tmp where other
// users can plant names first. A predictable temporary name opened without
// O_EXCL, or a stat() that follows a planted symlink, lets such a user make
// root write through a link into a file of their choosing (with
// fs.protected_symlinks=0), or receive root's output in a file they own.
//
// So the output is a new file nobody else can name: an unnamed O_TMPFILE in
// the target's directory (else a random name created O_EXCL|O_NOFOLLOW),
// linked and renamed over the target only once complete. rename() replaces
// whatever is at the target (a symlink, another user's file) without
// following or opening it: the old inode and a link's target are untouched.
// An existing FIFO or character device (-o /dev/null), or a name of one of
// the process's descriptors (-o /dev/stdout, /dev/fd/N), is written in place,
// as writing a temporary and renaming it would replace the device node or
// the link; one reached through a symlink the kernel's protected_symlinks
// rule would not follow, or owned by another user in a sticky world-writable
// directory (as protected_fifos), is refused. The checks use lstat/fstat on
// descriptors, never stat() on the path. Used on the CLI's thread.
#pragma once

#include <sys/types.h>

#include <streambuf>
#include <string>

#include "common/scoped_fd.h"
#include "common/status.h"

namespace flightrec {

class AtomicOutputFile {
 public:
  // Prepares `path` for writing with permission bits `mode` (less the umask)
  // for a new file.
  static StatusOr<AtomicOutputFile> Open(const std::string& path, mode_t mode = 0666);
  AtomicOutputFile(AtomicOutputFile&&) noexcept = default;
  AtomicOutputFile& operator=(AtomicOutputFile&&) noexcept = default;
  ~AtomicOutputFile();

  int fd() const { return fd_.get(); }
  // True for a FIFO, device or descriptor written in place (Commit renames
  // nothing).
  bool in_place() const { return in_place_; }
  // Flushes to disk and puts the file at its path; without a Commit (an
  // error on the way) the target is left as it was and nothing remains.
  Status Commit();

 private:
  AtomicOutputFile() = default;
  Status OpenInPlace(bool follow, bool alias);
  Status OpenNew(mode_t mode);

  std::string path_, dir_, base_;
  ScopedFd dir_fd_, fd_;
  std::string tmp_name_;  // a named temporary (no O_TMPFILE), removed unless committed
  bool in_place_ = false;
};

// A std::streambuf writing to an fd it does not own, for writers that take
// an std::ostream; the stream goes bad on a failed write.
class FdStreambuf : public std::streambuf {
 public:
  explicit FdStreambuf(int fd) : fd_(fd) { setp(buf_, buf_ + sizeof(buf_)); }
  ~FdStreambuf() override { sync(); }

 protected:
  int_type overflow(int_type c) override;
  int sync() override;

 private:
  bool Drain();
  int fd_;
  char buf_[1 << 16];
};

// `contents` written as the file `path` through an AtomicOutputFile.
Status WriteFileAtomically(const std::string& path, const std::string& contents,
                           mode_t mode = 0644);

}  // namespace flightrec
