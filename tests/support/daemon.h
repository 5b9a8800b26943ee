// A real recorderd for end-to-end tests: started on a test store and socket,
// ready when it answers `status` (bounded wait), stopped with SIGTERM.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <string>
#include <vector>

#include "tests/support/run.h"

namespace flightrec::testing {

inline constexpr int kDaemonHz = 999;

class Daemon {
 public:
  // recorderd on dir/store and dir/control.sock, logging to
  // dir/recorderd.log, with `extra` options; ready() says whether it
  // answered within 20 s.
  explicit Daemon(const std::string& dir, std::vector<std::string> extra = {});
  ~Daemon();
  Daemon(const Daemon&) = delete;
  Daemon& operator=(const Daemon&) = delete;

  // SIGTERM, then wait at most `timeout` for the exit; true if it exited.
  // On a timeout the destructor still kills and reaps it.
  bool StopWithin(std::chrono::milliseconds timeout);
  // The recorder CLI on this daemon's store and socket.
  RunResult Cli(std::vector<std::string> args) const;
  std::string Log() const;
  bool ready() const { return ready_; }
  pid_t pid() const { return pid_; }
  const std::string& store() const { return store_; }
  const std::string& sock() const { return sock_; }

 private:
  std::string dir_, store_, sock_;
  pid_t pid_ = -1;
  bool ready_ = false;
};

}  // namespace flightrec::testing
