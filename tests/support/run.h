// Runs built executables and other programs for tests: exit code, stdout and
// stderr as a user of the command line sees them, optionally as another user.
#pragma once

#include <sys/types.h>
#include <unistd.h>

#include <optional>
#include <string>
#include <vector>

namespace flightrec::testing {

struct RunResult {
  int exit_code = -1;
  std::string out;
  std::string err;
};

// `rel` under the build tree (FLIGHTREC_BUILD_DIR, which CTest sets; "." if
// unset).
std::string BuildPath(const std::string& rel);

// `rel` under the source tree (FLIGHTREC_SOURCE_DIR, which CTest sets; "."
// if unset).
std::string SourcePath(const std::string& rel);

// Everything readable from fd until end of file.
std::string ReadAll(int fd);

// Runs argv with extra environment entries ("K=V"). With `as_uid`, the
// child drops every group and becomes that uid (and gid) before exec: how
// the tests run the CLI as another user. The exit code is 128 + the signal
// for a child killed by one.
RunResult RunCommand(const std::vector<std::string>& argv, const std::vector<std::string>& env = {},
                     std::optional<uid_t> as_uid = std::nullopt);

// Starts argv[0] with the given arguments in a child process and returns its
// pid (the caller waits) once the child has exec'd argv[0] (or failed to).
// quiet sends the child's stdout to /dev/null;
// `as_uid` as for RunCommand.
pid_t Spawn(const std::vector<std::string>& args, bool quiet = true,
            std::optional<uid_t> as_uid = std::nullopt);

// Waits for pid; its wait status.
int WaitStatus(pid_t pid);

// Runs fn() in a forked child that exits with fn's return value; the
// child's wait status. Code under test that crashes there fails the test
// instead of killing the test binary.
template <typename Fn>
int RunInChild(Fn fn) {
  pid_t pid = fork();
  if (pid == 0) _exit(fn());
  return WaitStatus(pid);
}

// Runs argv (stdout to /dev/null) to its end; true if it exited with status
// 0. *pid is its pid, which a record's samples name.
bool RunToSuccess(const std::vector<std::string>& argv, pid_t* pid);

// In a forked child: drops every group, becomes uid (gid = uid) and execs
// argv; exits 126 if it could not become uid, 127 if exec failed.
[[noreturn]] void ExecAs(std::optional<uid_t> uid, const std::vector<std::string>& argv);

}  // namespace flightrec::testing
