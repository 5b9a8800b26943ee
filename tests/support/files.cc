#include "tests/support/files.h"

#include <stdlib.h>

#include <filesystem>
#include <fstream>
#include <iterator>

#include "tests/support/run.h"

namespace flightrec::testing {

TempDir::TempDir() {
  std::string tmpl = (std::filesystem::temp_directory_path() / "flightrec-test-XXXXXX").string();
  path_ = mkdtemp(tmpl.data());
}

TempDir::~TempDir() {
  std::error_code ec;
  std::filesystem::remove_all(path_, ec);
}

std::string ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

ScopedTmpfs::ScopedTmpfs(const std::string& dir, const std::string& options) : dir_(dir) {
  std::filesystem::create_directories(dir);
  ok_ = RunCommand({"/bin/mount", "-t", "tmpfs", "-o", options, "tmpfs", dir}).exit_code == 0;
}

ScopedTmpfs::~ScopedTmpfs() {
  if (ok_) RunCommand({"/bin/umount", "-l", dir_});
}

}  // namespace flightrec::testing
