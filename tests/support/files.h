// Files for tests: a temporary directory that cleans up after itself, and a
// whole file read into a string.
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

}  // namespace flightrec::testing
