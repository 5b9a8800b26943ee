// The one place flightrec starts processes: fork + exec of a program
// (objcopy, gdb, a profiled command) and fork of a worker that runs code (the
// core hook's sandboxed unwinder). A Subprocess owns the child's pid as a
// ScopedFd owns an fd: a child not waited for is reaped when its owner goes
// (killed first when asked to), so no caller leaves a zombie behind.
//
// Thread: a Subprocess is used by the thread that started it.
#pragma once

#include <sys/types.h>

#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "common/scoped_fd.h"
#include "common/status.h"

namespace flightrec {

struct SpawnOptions {
  // argv[0] is looked up in $PATH (execvp); otherwise it must be a path.
  bool search_path = false;
  // The child's stdout and stderr go to /dev/null (a helper's chatter must
  // not reach the user's terminal or a hook's log).
  bool quiet = false;
  // The child's stdin is /dev/null (never the caller's: a pipe from the
  // kernel or a terminal).
  bool null_stdin = false;
};

class Subprocess {
 public:
  Subprocess() = default;
  Subprocess(Subprocess&& o) noexcept
      : pid_(std::exchange(o.pid_, -1)), kill_on_destroy_(o.kill_on_destroy_) {}
  Subprocess& operator=(Subprocess&& o) noexcept;
  Subprocess(const Subprocess&) = delete;
  Subprocess& operator=(const Subprocess&) = delete;
  // Reaps a child still running (SIGKILL first if set_kill_on_destroy).
  ~Subprocess();

  // fork + exec of argv (non-empty). The strings are copied before the fork:
  // the child only calls async-signal-safe functions.
  static StatusOr<Subprocess> Spawn(const std::vector<std::string>& argv,
                                    const SpawnOptions& opts = {});
  // fork; the child runs `child` and _exits with its return value (never
  // returns into the caller's stack). For workers that run code of this
  // program in a confined process.
  static StatusOr<Subprocess> Fork(const std::function<int()>& child);

  pid_t pid() const { return pid_; }
  bool running() const { return pid_ > 0; }
  void set_kill_on_destroy(bool on) { kill_on_destroy_ = on; }
  // Sends SIGKILL (the child is still reaped by Wait or the destructor).
  void Kill();
  // Waits for the child (retrying EINTR); returns its wait status
  // (WIFEXITED/WEXITSTATUS...). Afterwards the Subprocess owns nothing.
  StatusOr<int> Wait();

 private:
  explicit Subprocess(pid_t pid) : pid_(pid) {}
  pid_t pid_ = -1;
  bool kill_on_destroy_ = false;
};

// Spawns argv and waits: OK if it exited with status 0, else an error that
// says how it ended.
Status RunToCompletion(const std::vector<std::string>& argv, const SpawnOptions& opts = {});

// A pipe whose ends are close-on-exec: {read end, write end}.
StatusOr<std::pair<ScopedFd, ScopedFd>> MakePipe();

}  // namespace flightrec
