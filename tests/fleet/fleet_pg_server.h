// A real PostgreSQL 15 (Debian's /usr/lib/postgresql/15/bin) for the fleet
// tests and benchmark: initdb + postgres in a temporary directory, run as
// the unprivileged `postgres` account (we are root; PostgreSQL refuses to
// run as root anyway), listening only on 127.0.0.1 at a free port and on a
// unix socket in its directory, with password (SCRAM) authentication so
// that a wrong credential can be tested.
//
// Bounded: small shared_buffers and connection count, RLIMIT_CPU, and the
// postmaster gets SIGKILL when the test process dies (PR_SET_PDEATHSIG, set
// after the uid change that would clear it); Stop() and the destructor shut
// it down and remove the directory. Readiness is the postmaster's own "ready
// to accept connections" line, read from its stderr by a thread and waited
// for on a condition variable with a deadline: no sleeps.
#pragma once

#include <sys/types.h>

#include <condition_variable>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

#include "common/status.h"

namespace flightrec::testing {

class PgServer {
 public:
  struct Options {
    bool fsync = false;  // off for tests; the benchmark turns it on
    int start_timeout_s = 60;
  };
  static StatusOr<std::unique_ptr<PgServer>> Start(const Options& o);
  static StatusOr<std::unique_ptr<PgServer>> Start() { return Start(Options{}); }
  ~PgServer();

  // libpq keywords for database `db` over TCP (the password is separate).
  std::string ConnInfo(const std::string& db = "postgres") const;
  const std::string& password() const { return password_; }
  int port() const { return port_; }
  const std::string& dir() const { return dir_; }

  // A fresh, empty database (each test gets its own).
  StatusOr<std::string> CreateDatabase(const std::string& name);

  // Fast shutdown (SIGINT: sessions are terminated, as in a restart for an
  // upgrade); Launch() starts it again on the same port and data.
  Status Stop();
  Status Launch();
  bool running() const { return pid_ > 0; }
  // What the server wrote to stderr so far (for failure messages).
  std::string Log() const;

 private:
  PgServer() = default;
  Status WaitReady(int timeout_s);

  std::string dir_;
  std::string password_;
  int port_ = 0;
  uid_t uid_ = 0;
  gid_t gid_ = 0;
  Options opts_;
  pid_t pid_ = -1;
  int pidfd_ = -1;
  std::thread drain_;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::string log_;   // guarded by mu_
  bool eof_ = false;  // guarded by mu_: the server's stderr closed
  size_t log_mark_ = 0;
};

// One server for every test of the binary, started on first use and
// stopped when the tests end (a gtest Environment).
PgServer& SharedPgServer();

// One value of a one-row, one-column query on the shared server, as the
// test's own view of the index (not FleetIndex's); "(error)" if the query
// failed or did not return exactly one row.
std::string PgScalar(const std::string& conninfo, const std::string& sql);

}  // namespace flightrec::testing
