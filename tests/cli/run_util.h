// Runs a built executable and captures its exit code, stdout and stderr —
// for tests that check what a user of the command line sees.
#pragma once

#include <fcntl.h>
#include <grp.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <optional>
#include <string>
#include <vector>

namespace flightrec::testing {

struct RunResult {
  int exit_code = -1;
  std::string out;
  std::string err;
};

inline std::string BuildPath(const std::string& rel) {
  const char* b = std::getenv("FLIGHTREC_BUILD_DIR");
  return std::string(b ? b : ".") + "/" + rel;
}

inline std::string ReadAll(int fd) {
  std::string s;
  char buf[65536];
  ssize_t n;
  while ((n = read(fd, buf, sizeof(buf))) > 0) s.append(buf, static_cast<size_t>(n));
  return s;
}

// Runs argv with extra environment entries ("K=V"); stdin is /dev/null.
// With `as_uid`, the child drops every group and becomes that uid (and gid)
// before exec: how the tests run the CLI as another user.
inline RunResult RunCommand(const std::vector<std::string>& argv,
                            const std::vector<std::string>& env = {},
                            std::optional<uid_t> as_uid = std::nullopt) {
  int out[2], err[2];
  if (pipe(out) != 0 || pipe(err) != 0) return {};
  pid_t pid = fork();
  if (pid == 0) {
    dup2(out[1], 1);
    dup2(err[1], 2);
    close(out[0]);
    close(err[0]);
    for (const auto& e : env) putenv(const_cast<char*>(e.c_str()));
    if (as_uid && (setgroups(0, nullptr) != 0 || setgid(*as_uid) != 0 || setuid(*as_uid) != 0)) {
      _exit(126);
    }
    std::vector<char*> args;
    for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
    args.push_back(nullptr);
    execv(args[0], args.data());
    _exit(127);
  }
  close(out[1]);
  close(err[1]);
  RunResult r;
  // stderr is small in these tests; read stdout fully first, then stderr.
  r.out = ReadAll(out[0]);
  r.err = ReadAll(err[0]);
  close(out[0]);
  close(err[0]);
  int st = 0;
  waitpid(pid, &st, 0);
  r.exit_code = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
  return r;
}

// Starts argv[0] with the given arguments in a child process and returns its
// pid (the caller waits). quiet sends the child's stdout to /dev/null.
inline pid_t Spawn(const std::vector<std::string>& args, bool quiet = true) {
  pid_t pid = fork();
  if (pid == 0) {
    if (quiet) {
      int devnull = open("/dev/null", O_WRONLY);
      dup2(devnull, 1);
    }
    std::vector<char*> argv;
    for (const auto& a : args) argv.push_back(const_cast<char*>(a.c_str()));
    argv.push_back(nullptr);
    execv(argv[0], argv.data());
    _exit(127);
  }
  return pid;
}

}  // namespace flightrec::testing
