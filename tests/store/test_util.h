// Helpers shared by the store tests: temporary directories on the real
// filesystem and small record builders.
#pragma once

#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "store/store.h"

namespace flightrec::store::testing {

class TempDir {
 public:
  TempDir() {
    std::string tmpl = (std::filesystem::temp_directory_path() / "flightrec-test-XXXXXX").string();
    path_ = mkdtemp(tmpl.data());
  }
  ~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

inline StoreOptions TestOptions() {
  StoreOptions o;
  // Tests control retention explicitly; the filesystem-derived defaults would
  // depend on the machine.
  o.apply_retention_on_commit = false;
  o.writer.workers = 0;
  return o;
}

inline StatusOr<RecordRow> WriteSmallRecord(Store& s, const std::string& payload,
                                            nlohmann::json meta = nlohmann::json::object()) {
  ASSIGN_OR_RETURN(auto rec, s.BeginRecord("dump"));
  RETURN_IF_ERROR(rec->writer().AddSection("events", payload));
  RETURN_IF_ERROR(rec->writer().AddSection("config", "{\"x\":1}"));
  return s.Commit(std::move(rec), meta);
}

}  // namespace flightrec::store::testing
