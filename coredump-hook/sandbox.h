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

// The unwinder's process. The core is the crashed program's bytes: every
// parse of it (the reducer's reading of its headers and notes, libunwind's
// and libdwfl's) runs in a child as the crashed user (nobody for root's
// crashes), not dumpable, with no_new_privs, CPU, address-space, time and
// output limits and a seccomp filter (UnwinderSeccomp) that kills it on any
// system call beyond reading files and memory: a hostile core can neither
// take the hook down nor act as root or as anyone. The child is started
// before the hook drops its own privileges (making it another user needs
// CAP_SETUID/CAP_SETGID) and becomes that user at once; the hook then copies
// the core to it through a pipe as it stores it, and the child cuts out what
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
  // Ends the core, lets the child unwind and returns its JSON, or null with
  // *why.
  nlohmann::json Run(std::string* why);

 private:
  Subprocess child_;
  ScopedFd core_, out_;
  bool fed_failed_ = false;
  std::string feed_why_;
};

// The unwinder with its copy of the core: an unnamed file in /var/tmp, owned
// by the user the child runs as. Started while the hook is still privileged.
class SandboxedBacktrace {
 public:
  // Notes nothing: why there is no unwinder is reported by Finish.
  void Start(const HookOptions& o, const Crash& c);
  bool running() const { return tmp_.valid(); }
  void Feed(const char* data, size_t n) {
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
