// The fixture of the end-to-end tests that read one record: a real recorderd
// samples a program run to its end, then dumps the last seconds of it.
#pragma once

#include <gtest/gtest.h>
#include <sys/types.h>

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "tests/support/daemon.h"
#include "tests/support/files.h"
#include "tests/support/run.h"

namespace flightrec::testing {

// `recorder dump --last 5s [--pid PID] EXTRA... --json` on d (no --pid if
// pid is 0); *id is the new record's id. Fails the test (fatally) if the
// dump fails: call it under ASSERT_NO_FATAL_FAILURE.
void DumpLast5s(const Daemon& d, pid_t pid, const std::vector<std::string>& extra, std::string* id);

// `recorder report --json` output as key -> self samples (the rows of one
// key summed over their DSOs).
std::map<std::string, uint64_t> SelfByKey(const std::string& report_json);

// Base of a test suite whose tests share one recording (made once, in
// SetUpTestSuite): a recorderd on a fresh directory (StartDaemon), a program
// run to its end under it and the record dumped of it (Record). `Suite` is
// the derived class, so that each suite has its own recording.
template <typename Suite>
class RecordedSuite : public ::testing::Test {
 protected:
  static void StartDaemon() {
    dir_ = new TempDir();
    daemon_ = new Daemon(dir_->path());
    ASSERT_TRUE(daemon_->ready()) << daemon_->Log();
  }
  // Starts the daemon, runs argv to a clean exit (pid_ is its pid) and dumps
  // the last 5 s of its samples (with `dump_extra`) as id_.
  static void Record(const std::vector<std::string>& argv,
                     const std::vector<std::string>& dump_extra = {}) {
    ASSERT_NO_FATAL_FAILURE(StartDaemon());
    pid_t pid = 0;
    ASSERT_TRUE(RunToSuccess(argv, &pid));
    pid_ = pid;
    ASSERT_NO_FATAL_FAILURE(DumpLast5s(*daemon_, pid, dump_extra, &id_));
  }
  static void TearDownTestSuite() {
    delete daemon_;
    daemon_ = nullptr;
    delete dir_;
    dir_ = nullptr;
  }
  // A path in the suite's directory.
  static std::string Out(const std::string& name) { return dir_->path() + "/" + name; }

  static inline TempDir* dir_ = nullptr;
  static inline Daemon* daemon_ = nullptr;
  static inline std::string id_;
  static inline pid_t pid_ = 0;
};

}  // namespace flightrec::testing
