#include "tests/support/daemon.h"

#include <algorithm>

#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <thread>

#include "tests/support/files.h"

namespace flightrec::testing {

Daemon::Daemon(const std::string& dir, std::vector<std::string> extra) : dir_(dir) {
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
  // Deaths are watched system-wide: a test's store would fill with the
  // deaths of every other test on the machine. Only tests of deaths ask.
  if (std::find(extra.begin(), extra.end(), "--deaths") == extra.end()) {
    args.insert(args.end(), {"--deaths", "off"});
  }
  args.insert(args.end(), extra.begin(), extra.end());
  pid_ = fork();
  if (pid_ == 0) {
    int log = open((dir + "/recorderd.log").c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    dup2(log, 1);
    dup2(log, 2);
    ExecAs(std::nullopt, args);
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

Daemon::~Daemon() {
  if (pid_ > 0) {
    kill(pid_, SIGTERM);
    int st;
    waitpid(pid_, &st, 0);
  }
}

bool Daemon::StopWithin(std::chrono::milliseconds timeout) {
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

RunResult Daemon::Cli(std::vector<std::string> args) const {
  args.insert(args.begin(),
              {BuildPath("recorder/cli/recorder"), "--store", store_, "--socket", sock_});
  return RunCommand(args);
}

std::string Daemon::Log() const { return ReadFile(dir_ + "/recorderd.log"); }

}  // namespace flightrec::testing
