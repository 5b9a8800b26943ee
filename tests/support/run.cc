#include "tests/support/run.h"

#include <fcntl.h>
#include <grp.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <optional>

namespace flightrec::testing {

std::string BuildPath(const std::string& rel) {
  const char* b = std::getenv("FLIGHTREC_BUILD_DIR");
  return std::string(b ? b : ".") + "/" + rel;
}

std::string SourcePath(const std::string& rel) {
  const char* s = std::getenv("FLIGHTREC_SOURCE_DIR");
  return std::string(s ? s : ".") + "/" + rel;
}

std::string ReadAll(int fd) {
  std::string s;
  char buf[65536];
  ssize_t n;
  while ((n = read(fd, buf, sizeof(buf))) > 0) s.append(buf, static_cast<size_t>(n));
  return s;
}

void ExecAs(std::optional<uid_t> uid, const std::vector<std::string>& argv) {
  if (uid && (setgroups(0, nullptr) != 0 || setresgid(*uid, *uid, *uid) != 0 ||
              setresuid(*uid, *uid, *uid) != 0)) {
    _exit(126);
  }
  std::vector<char*> args;
  for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  execv(args[0], args.data());
  _exit(127);
}

RunResult RunCommand(const std::vector<std::string>& argv, const std::vector<std::string>& env,
                     std::optional<uid_t> as_uid) {
  int out[2], err[2];
  if (pipe(out) != 0 || pipe(err) != 0) return {};
  pid_t pid = fork();
  if (pid == 0) {
    dup2(out[1], 1);
    dup2(err[1], 2);
    close(out[0]);
    close(err[0]);
    for (const auto& e : env) putenv(const_cast<char*>(e.c_str()));
    ExecAs(as_uid, argv);
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

pid_t Spawn(const std::vector<std::string>& args, bool quiet, std::optional<uid_t> as_uid) {
  // The write end closes at the child's exec (or its exit when exec
  // fails): reading to EOF returns once the child is argv[0], so a caller
  // that inspects /proc/PID never sees the forked copy of the test.
  int exec_done[2];
  if (pipe2(exec_done, O_CLOEXEC) != 0) return -1;
  pid_t pid = fork();
  if (pid == 0) {
    close(exec_done[0]);
    if (quiet) {
      int devnull = open("/dev/null", O_WRONLY);
      dup2(devnull, 1);
    }
    ExecAs(as_uid, args);
  }
  close(exec_done[1]);
  char c;
  while (pid > 0 && read(exec_done[0], &c, 1) < 0 && errno == EINTR) {
  }
  close(exec_done[0]);
  return pid;
}

int WaitStatus(pid_t pid) {
  int st = 0;
  waitpid(pid, &st, 0);
  return st;
}

bool RunToSuccess(const std::vector<std::string>& argv, pid_t* pid) {
  *pid = Spawn(argv);
  int st = WaitStatus(*pid);
  return WIFEXITED(st) && WEXITSTATUS(st) == 0;
}

}  // namespace flightrec::testing
