// The sandboxed backtrace (systemd-coredump's coredump-backtrace, in a
// child): every parse of the crashed program's core runs in a process as the
// crashed user, confined by limits and a seccomp filter.
#pragma once

#include <sys/types.h>

#include <map>
#include <string>

#include <nlohmann/json.hpp>

#include "common/scoped_fd.h"
#include "common/status.h"
#include "common/subprocess.h"
#include "coredump-hook/context.h"
#include "coredump-hook/core_reducer.h"

namespace flightrec::coredump {

// Where the hook sends its copy of the core (the sandboxed unwinder; a test's
// collector). The hook offers each chunk first as TeeFrom, then as Feed if
// that could not take it.
class CoreCopyTarget {
 public:
  virtual ~CoreCopyTarget() = default;
  // Duplicates up to `max` bytes at the head of the pipe `in_fd` into the
  // copy without consuming them (tee(2): no byte is copied), waiting for the
  // kernel as a read would. Returns how many (the caller then reads exactly
  // those from in_fd), 0 at the end of in_fd, or -1 when it cannot (in_fd
  // is not a pipe, the copy is gone or stopped): then Feed.
  virtual ssize_t TeeFrom(int in_fd, size_t max) = 0;
  // The next n bytes of the core, copied.
  virtual void Feed(const char* data, size_t n) = 0;
};

// tee(2) of up to `max` bytes from pipe in_fd to pipe out_fd: waits without
// limit for input (the kernel writes the core at its own pace) and at most
// out_timeout_ms for room in out_fd. Returns the count, 0 at the end of
// in_fd, -1 with errno (ETIMEDOUT: out_fd's reader stopped; EINVAL: not
// pipes).
ssize_t TeePipe(int in_fd, int out_fd, size_t max, int out_timeout_ms);

// The unwinder's process. The core is the crashed program's bytes: every
// parse of it (the reducer's reading of its headers and notes, libunwind's
// and libdwfl's) runs in a child as the crashed user (nobody for root's
// crashes), not dumpable, with no_new_privs, CPU, address-space, time and
// output limits and a seccomp filter (UnwinderSeccomp) that kills it on any
// system call beyond reading files and memory: a hostile core can neither
// take the hook down nor act as root or as anyone. The child is started
// before the hook drops its own privileges (making it another user needs
// CAP_SETUID/CAP_SETGID) and becomes that user at once; the hook then gives
// it the core through a pipe as it stores it (tee(2) of the kernel's pipe
// buffers, else a copy: CoreCopyTarget), and the child cuts out what
// unwinding needs (CoreReducer) into the temporary file, unwinds at the end
// of the core and writes JSON back. Stopping it after the deadline is why
// the hook keeps CAP_KILL: the kernel lets uid 0 without capabilities signal
// only processes of uid 0.
class UnwinderChild {
 public:
  UnwinderChild() = default;
  UnwinderChild(const UnwinderChild&) = delete;
  UnwinderChild& operator=(const UnwinderChild&) = delete;
  // A child never given a whole core sees its pipe close early and exits
  // without unwinding; it is reaped (killed first if it stopped reading).
  ~UnwinderChild();

  // Forks the child, which reduces the core it is fed into tmp_fd and
  // unwinds it once Run() is called.
  Status Start(int tmp_fd, const std::string& maps, const HookArgs& a,
               const std::map<pid_t, pid_t>& global_tids, CoreReducer::Limits limits);
  pid_t pid() const { return child_.pid(); }
  // The next n bytes of the core. A child that stops reading for 15 s (or
  // is gone) gets no more: the hook stores the core whatever it does.
  void Feed(const char* data, size_t n);
  // The same by tee(2) from the kernel's pipe (CoreCopyTarget::TeeFrom).
  ssize_t TeeFrom(int in_fd, size_t max);
  // Ends the core, lets the child unwind and returns its JSON, or null with
  // *why.
  nlohmann::json Run(std::string* why);

 private:
  Subprocess child_;
  ScopedFd core_, out_;
  bool fed_failed_ = false;
  bool tee_off_ = false;  // tee(2) refused once: Feed from then on
  std::string feed_why_;
};

// The unwinder with its copy of the core: an unnamed file in /var/tmp, owned
// by the user the child runs as. Started while the hook is still privileged.
class SandboxedBacktrace : public CoreCopyTarget {
 public:
  // Notes nothing: why there is no unwinder is reported by Finish.
  void Start(const HookOptions& o, const Crash& c);
  bool running() const { return tmp_.valid(); }
  ssize_t TeeFrom(int in_fd, size_t max) override { return tmp_ ? child_.TeeFrom(in_fd, max) : -1; }
  void Feed(const char* data, size_t n) override {
    if (tmp_) child_.Feed(data, n);
  }
  // The backtrace into c->backtrace, or why not into c->notes; frees the
  // temporary file.
  void Finish(Crash* c);

 private:
  ScopedFd tmp_;
  std::string why_;
  UnwinderChild child_;
};

}  // namespace flightrec::coredump
