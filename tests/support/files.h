// Files for tests: a temporary directory that cleans up after itself, a
// whole file read into a string, a small tmpfs.
#pragma once

#include <string>

namespace flightrec::testing {

// A fresh directory under the system's temporary directory (mkdtemp), removed
// with everything in it when the object goes.
class TempDir {
 public:
  TempDir();
  ~TempDir();
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

// The bytes of the file at `path` ("" if it cannot be read).
std::string ReadFile(const std::string& path);

// A tmpfs mounted at `dir` (created) with mount `options`, for the object's
// life (root only; CI runs as root).
class ScopedTmpfs {
 public:
  ScopedTmpfs(const std::string& dir, const std::string& options);
  ~ScopedTmpfs();
  ScopedTmpfs(const ScopedTmpfs&) = delete;
  ScopedTmpfs& operator=(const ScopedTmpfs&) = delete;
  bool ok() const { return ok_; }

 private:
  std::string dir_;
  bool ok_ = false;
};

}  // namespace flightrec::testing
