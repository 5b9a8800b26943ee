// A real recorderd for end-to-end tests: started on a test store and socket,
// ready when it answers `status` (bounded wait), stopped with SIGTERM.
#pragma once

#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <fstream>
#include <iterator>
#include <string>
#include <thread>
#include <vector>

#include "tests/cli/run_util.h"

namespace flightrec::testing {

inline constexpr int kDaemonHz = 999;

class Daemon {
 public:
  Daemon(const std::string& dir, std::vector<std::string> extra = {}) : dir_(dir) {
    store_ = dir + "/store";
    sock_ = dir + "/control.sock";
    std::vector<std::string> args = {BuildPath("recorder/daemon/recorderd"),
                                     "--store",
                                     store_,
                                     "--socket",
                                     sock_,
                                     "-F",
                                     std::to_string(kDaemonHz),
                                     "--foreground"};
    args.insert(args.end(), extra.begin(), extra.end());
    pid_ = fork();
    if (pid_ == 0) {
      int log = open((dir + "/recorderd.log").c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
      dup2(log, 1);
      dup2(log, 2);
      std::vector<char*> argv;
      for (auto& a : args) argv.push_back(a.data());
      argv.push_back(nullptr);
      execv(argv[0], argv.data());
      _exit(127);
    }
    // Ready when it answers status (bounded wait, no fixed sleep).
    auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
    while (std::chrono::steady_clock::now() < deadline) {
      auto r = Cli({"status", "--json"});
      if (r.exit_code == 0) {
        ready_ = true;
        break;
      }
      int st;
      if (waitpid(pid_, &st, WNOHANG) == pid_) break;  // died
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
  }
  ~Daemon() {
    if (pid_ > 0) {
      kill(pid_, SIGTERM);
      int st;
      waitpid(pid_, &st, 0);
    }
  }
  // SIGTERM, then wait at most `timeout` for the exit; true if it exited.
  // On a timeout the destructor still kills and reaps it.
  bool StopWithin(std::chrono::milliseconds timeout) {
    if (pid_ <= 0) return true;
    kill(pid_, SIGTERM);
    auto deadline = std::chrono::steady_clock::now() + timeout;
    while (std::chrono::steady_clock::now() < deadline) {
      int st;
      if (waitpid(pid_, &st, WNOHANG) == pid_) {
        pid_ = -1;
        return true;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    kill(pid_, SIGKILL);
    return false;
  }
  RunResult Cli(std::vector<std::string> args) const {
    args.insert(args.begin(),
                {BuildPath("recorder/cli/recorder"), "--store", store_, "--socket", sock_});
    return RunCommand(args);
  }
  std::string Log() const {
    std::ifstream in(dir_ + "/recorderd.log");
    return std::string(std::istreambuf_iterator<char>(in), {});
  }
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
