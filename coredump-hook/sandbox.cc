#include "coredump-hook/sandbox.h"

#include <fcntl.h>
#include <grp.h>
#include <linux/capability.h>
#include <linux/securebits.h>
#include <poll.h>
#include <seccomp.h>
#include <signal.h>
#include <sys/ioctl.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstring>

#include <fmt/format.h>

#include "common/checked_json.h"
#include "common/terminal_escape.h"

namespace flightrec::coredump {

UnwinderChild::~UnwinderChild() {
  core_.reset();
  out_.reset();
  child_.set_kill_on_destroy(fed_failed_);
}

Status UnwinderChild::Start(int tmp_fd, const std::string& maps, const HookArgs& a,
                            const std::map<pid_t, pid_t>& global_tids, CoreReducer::Limits limits) {
  ASSIGN_OR_RETURN(auto core, MakePipe());
  // 1 MiB, the hook's read size (the default 64 KiB made the hook and the
  // unwinder switch 16 times per MiB of core); best effort: the default
  // pipe-max-size allows it, a lower one keeps the default.
  (void)fcntl(core.second.get(), F_SETPIPE_SZ, 1 << 20);
  ASSIGN_OR_RETURN(auto out, MakePipe());
  const uid_t uid = a.uid == 0 ? 65534 : a.uid;
  const gid_t gid = a.uid == 0 ? 65534 : a.gid;
  const pid_t parent = getpid();
  auto child = Subprocess::Fork([&]() -> int {
    core.second.reset();
    out.first.reset();
    // Not the core's reader: the kernel's pipe is the hook's alone.
    int devnull = open("/dev/null", O_RDONLY | O_CLOEXEC);
    if (devnull >= 0) dup2(devnull, STDIN_FILENO);
    prctl(PR_SET_DUMPABLE, 0);  // its own crash must not come back to us
    rlimit cpu{10, 10}, as{2ull << 30, 2ull << 30}, no_core{1, 1};
    setrlimit(RLIMIT_CPU, &cpu);
    setrlimit(RLIMIT_AS, &as);
    setrlimit(RLIMIT_CORE, &no_core);  // 1: the kernel never pipes its core to a hook
    if (setgroups(0, nullptr) != 0 || setresgid(gid, gid, gid) != 0 ||
        setresuid(uid, uid, uid) != 0 || prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0) {
      _exit(3);
    }
    // Set after the uid change, which clears it; then dies with the hook.
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (getppid() != parent) _exit(4);
    // From here on the child parses the core: files and memory only.
    const std::string tmp_path = fmt::format("/proc/self/fd/{}", tmp_fd);
    if (Status f = UnwinderSeccomp(); !f.ok()) _exit(5);
    CoreReducer reducer(tmp_fd, limits);
    uint64_t got = 0;
    std::vector<char> buf(1 << 20);
    for (;;) {
      ssize_t n = read(core.first.get(), buf.data(), buf.size());
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) break;
      reducer.Feed(buf.data(), static_cast<size_t>(n));
      got += static_cast<uint64_t>(n);
    }
    // Nothing sent: the hook is storing no core (rate limit, empty core).
    if (got == 0) _exit(0);
    nlohmann::json j;
    if (Status r = reducer.Finish(); !r.ok()) {
      j = {{"error", "no backtrace: " + r.message()}};
    } else {
      j = Backtrace(tmp_path, maps, a.pid, a.global_tid, global_tids);
      j["input"] = {{"core_memory_bytes", reducer.memory_bytes()},
                    {"kept_memory_bytes", reducer.kept_bytes()},
                    {"reduced", reducer.reduced()}};
      for (const auto& t : reducer.threads()) {
        if (!t.stack_kept) {
          auto g = global_tids.find(t.tid);
          j["input"]["stacks_left_out"].push_back(g != global_tids.end() ? g->second : t.tid);
        }
      }
    }
    // Symbol and file names come from the crashed program's files.
    std::string text = json::Dump(j);
    if (text.size() > (4u << 20)) text = R"({"error":"backtrace output over 4 MiB"})";
    size_t off = 0;
    while (off < text.size()) {
      ssize_t w = write(out.second.get(), text.data() + off, text.size() - off);
      if (w <= 0) break;
      off += static_cast<size_t>(w);
    }
    return 0;
  });
  if (!child.ok()) return child.status();
  core_ = std::move(core.second);
  out_ = std::move(out.first);
  child_ = std::move(*child);
  return OkStatus();
}

void UnwinderChild::Feed(const char* data, size_t n) {
  if (!core_ || fed_failed_) return;
  size_t off = 0;
  while (off < n) {
    pollfd pf{core_.get(), POLLOUT, 0};
    int r = poll(&pf, 1, 15000);
    if (r < 0 && errno == EINTR) continue;
    ssize_t w = r > 0 ? write(core_.get(), data + off, n - off) : -1;
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) {
      fed_failed_ = true;
      feed_why_ = r == 0 ? "the unwinder stopped reading the core"
                         : std::string("the unwinder is gone: ") + std::strerror(errno);
      return;
    }
    off += static_cast<size_t>(w);
  }
}

ssize_t TeePipe(int in_fd, int out_fd, size_t max, int out_timeout_ms) {
  for (;;) {
    // Input first, without a deadline: a read of the core would wait as
    // long. Then room in the copy's pipe, within its deadline.
    pollfd in{in_fd, POLLIN, 0};
    int r = poll(&in, 1, -1);
    if (r < 0 && errno == EINTR) continue;
    if (r < 0) return -1;
    pollfd out{out_fd, POLLOUT, 0};
    r = poll(&out, 1, out_timeout_ms);
    if (r < 0 && errno == EINTR) continue;
    if (r < 0) return -1;
    if (r == 0) {
      errno = ETIMEDOUT;
      return -1;
    }
    if ((out.revents & (POLLERR | POLLHUP)) != 0) {
      errno = EPIPE;
      return -1;
    }
    // Non-blocking on both pipes: the polls above did the waiting.
    ssize_t n = tee(in_fd, out_fd, max, SPLICE_F_NONBLOCK);
    if (n >= 0) return n;
    if (errno != EINTR && errno != EAGAIN) return -1;
  }
}

ssize_t UnwinderChild::TeeFrom(int in_fd, size_t max) {
  if (!core_ || fed_failed_ || tee_off_) return -1;
  ssize_t n = TeePipe(in_fd, core_.get(), max, 15000);
  if (n >= 0) return n;
  if (errno == ETIMEDOUT || errno == EPIPE) {
    fed_failed_ = true;
    feed_why_ = errno == ETIMEDOUT ? "the unwinder stopped reading the core"
                                   : "the unwinder is gone: " + std::string(std::strerror(errno));
  } else {
    tee_off_ = true;  // not pipes (or an old kernel): copies from now on
  }
  return -1;
}

nlohmann::json UnwinderChild::Run(std::string* why) {
  if (!child_.running()) {
    *why = "no unwinder process";
    return nullptr;
  }
  if (fed_failed_) {
    *why = "no backtrace: " + feed_why_;
    return nullptr;
  }
  core_.reset();
  std::string text;
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(15);
  bool killed = false;
  for (;;) {
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
                    deadline - std::chrono::steady_clock::now())
                    .count();
    pollfd pf{out_.get(), POLLIN, 0};
    if (left <= 0 || poll(&pf, 1, static_cast<int>(left)) <= 0) {
      child_.Kill();
      killed = true;
      break;
    }
    char buf[65536];
    ssize_t n = read(out_.get(), buf, sizeof(buf));
    if (n <= 0) break;
    text.append(buf, static_cast<size_t>(n));
    if (text.size() > (5u << 20)) {
      child_.Kill();
      killed = true;
      break;
    }
  }
  out_.reset();
  auto waited = child_.Wait();
  int status = waited.ok() ? *waited : 0;
  if (killed) {
    *why = "backtrace took too long or wrote too much: stopped";
    return nullptr;
  }
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
    *why = WIFSIGNALED(status)
               ? fmt::format("backtrace process died from SIG{}", sigabbrev_np(WTERMSIG(status)))
               : fmt::format("backtrace process failed ({})", WEXITSTATUS(status));
    return nullptr;
  }
  // The child parsed the attacker's core: were it subverted, its output
  // is the attacker's too. Bounded depth (a deep nest would overflow the
  // hook's stack), checked types.
  auto j = json::ParseBounded(text);
  if (j.is_discarded() || !j.is_object()) {
    *why = "backtrace output is not a JSON object";
    return nullptr;
  }
  if (j.contains("error") && !j.contains("threads")) {
    *why = ToValidUtf8(json::Str(j, "error", "no backtrace"));
    return nullptr;
  }
  return j;
}

void SandboxedBacktrace::Start(const HookOptions& o, const Crash& c) {
  const HookArgs& a = c.a;
  // The unwinder's copy of the core: unnamed, in /var/tmp (cores are large
  // for /tmp's tmpfs), owned by the user the unwinder runs as so that it can
  // open it through /proc/self/fd.
  tmp_.reset(open("/var/tmp", O_TMPFILE | O_RDWR | O_CLOEXEC, 0600));
  why_ = tmp_ ? "" : std::string("no temporary file: ") + std::strerror(errno);
  if (tmp_ && fchown(tmp_.get(), a.uid == 0 ? 65534 : a.uid, a.uid == 0 ? 65534 : a.gid) != 0) {
    why_ = std::string("fchown of the temporary file failed: ") + std::strerror(errno);
    tmp_.reset();
  }
  if (tmp_) {
    CoreReducer::Limits limits;
    limits.max_memory = o.backtrace_memory_max;
    if (Status s = child_.Start(tmp_.get(), c.maps, a, c.global_tids, limits); !s.ok()) {
      why_ = "no unwinder process: " + s.ToString();
      tmp_.reset();
    }
  }
}

void SandboxedBacktrace::Finish(Crash* c) {
  std::string why;
  if (c->core_size > 0) {
    if (!tmp_) {
      why = "no backtrace: " + why_;
    } else {
      c->backtrace = child_.Run(&why);
      // A walk the child skipped (notes libunwind would misread) is said
      // in the crash's notes too; the child's text, so checked and bounded.
      if (c->backtrace.is_object()) {
        std::string note = json::Str(c->backtrace, "note", "");
        if (!note.empty()) c->notes.push_back(ToValidUtf8(note.substr(0, 1024)));
      }
    }
  }
  if (!why.empty()) c->notes.push_back(why);
  tmp_.reset();
}

Status UnwinderSeccomp() {
  // Allowed: what reading the core and the mapped files, allocating, and
  // writing the answer take (glibc, libunwind, libdw, the symbolizer).
  // Everything else kills the process: no socket, no exec, no fork, no
  // signal to another process, no ptrace, no change of files' names, modes
  // or owners.
  scmp_filter_ctx ctx = seccomp_init(SCMP_ACT_KILL_PROCESS);
  if (ctx == nullptr) return Status(StatusCode::kInternal, "seccomp_init failed");
  static const int kAllowed[] = {
      SCMP_SYS(read),
      SCMP_SYS(readv),
      SCMP_SYS(pread64),
      SCMP_SYS(write),
      SCMP_SYS(writev),
      SCMP_SYS(pwrite64),
      SCMP_SYS(lseek),
      SCMP_SYS(close),
      SCMP_SYS(fstat),
      SCMP_SYS(newfstatat),
      SCMP_SYS(statx),
      SCMP_SYS(stat),
      SCMP_SYS(lstat),
      SCMP_SYS(openat),
      SCMP_SYS(open),
      SCMP_SYS(access),
      SCMP_SYS(faccessat),
      SCMP_SYS(faccessat2),
      SCMP_SYS(readlink),
      SCMP_SYS(readlinkat),
      SCMP_SYS(getdents64),
      SCMP_SYS(fcntl),
      SCMP_SYS(dup),
      SCMP_SYS(mmap),
      SCMP_SYS(munmap),
      SCMP_SYS(mprotect),
      SCMP_SYS(mremap),
      SCMP_SYS(madvise),
      SCMP_SYS(brk),
      SCMP_SYS(rt_sigaction),
      SCMP_SYS(rt_sigprocmask),
      SCMP_SYS(rt_sigreturn),
      SCMP_SYS(sigaltstack),
      SCMP_SYS(futex),
      SCMP_SYS(set_robust_list),
      SCMP_SYS(rseq),
      SCMP_SYS(exit),
      SCMP_SYS(exit_group),
      SCMP_SYS(getpid),
      SCMP_SYS(gettid),
      SCMP_SYS(getuid),
      SCMP_SYS(geteuid),
      SCMP_SYS(getgid),
      SCMP_SYS(getegid),
      SCMP_SYS(clock_gettime),
      SCMP_SYS(gettimeofday),
      SCMP_SYS(time),
      SCMP_SYS(getrandom),
      SCMP_SYS(sched_yield),
      SCMP_SYS(sched_getaffinity),
      SCMP_SYS(uname),
      SCMP_SYS(prlimit64),
      SCMP_SYS(getrlimit),
      SCMP_SYS(sysinfo),
      SCMP_SYS(ftruncate),
      SCMP_SYS(fadvise64),
  };
  for (int sc : kAllowed) {
    if (seccomp_rule_add(ctx, SCMP_ACT_ALLOW, sc, 0) != 0) {
      seccomp_release(ctx);
      return Status(StatusCode::kInternal, fmt::format("seccomp_rule_add({})", sc));
    }
  }
  // libunwind checks that an address is readable by writing from it into a
  // pipe (or a socket pair) of its own: those, but no socket of any
  // other family.
  for (int sc : {SCMP_SYS(pipe), SCMP_SYS(pipe2), SCMP_SYS(mincore), SCMP_SYS(msync)}) {
    seccomp_rule_add(ctx, SCMP_ACT_ALLOW, sc, 0);
  }
  // The comparisons spelled out rather than SCMP_A0()/SCMP_A1() (the same
  // values): the macros leave datum_b to zero-fill, which clang's
  // -Wmissing-field-initializers rejects under -Werror (the fuzz build).
  const scmp_arg_cmp unix_only = {0, SCMP_CMP_EQ, AF_UNIX, 0};
  seccomp_rule_add(ctx, SCMP_ACT_ALLOW, SCMP_SYS(socketpair), 1, unix_only);
  // isatty() (stdio's buffering choice) asks TCGETS; no other ioctl.
  const scmp_arg_cmp tcgets_only = {1, SCMP_CMP_EQ, TCGETS, 0};
  seccomp_rule_add(ctx, SCMP_ACT_ALLOW, SCMP_SYS(ioctl), 1, tcgets_only);
  int rc = seccomp_load(ctx);
  seccomp_release(ctx);
  if (rc != 0) return ErrnoStatus(-rc, "seccomp_load");
  return OkStatus();
}

Status DropPrivileges() {
  // Root's exec rule off for good (an execve would not give uid 0 its
  // capabilities back); the uid-change fixups and keep-caps locked at their
  // defaults; no ambient capabilities ever.
  if (prctl(PR_SET_SECUREBITS, SECBIT_NOROOT | SECBIT_NOROOT_LOCKED |
                                   SECBIT_NO_SETUID_FIXUP_LOCKED | SECBIT_KEEP_CAPS_LOCKED |
                                   SECBIT_NO_CAP_AMBIENT_RAISE |
                                   SECBIT_NO_CAP_AMBIENT_RAISE_LOCKED) != 0) {
    return ErrnoStatus("PR_SET_SECUREBITS");
  }
  int last = 40;  // CAP_CHECKPOINT_RESTORE; the running kernel says which is last
  if (std::string l = ReadText("/proc/sys/kernel/cap_last_cap", 64); !l.empty()) {
    last = std::atoi(l.c_str());
  }
  for (int c = 0; c <= last; ++c) {
    if (prctl(PR_CAPBSET_DROP, c, 0, 0, 0) != 0 && errno != EINVAL) {
      return ErrnoStatus(fmt::format("PR_CAPBSET_DROP {}", c));
    }
  }
  if (prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0) != 0 && errno != EINVAL) {
    return ErrnoStatus("PR_CAP_AMBIENT_CLEAR_ALL");
  }
  __user_cap_header_struct hdr{_LINUX_CAPABILITY_VERSION_3, 0};
  __user_cap_data_struct data[_LINUX_CAPABILITY_U32S_3] = {};
  data[CAP_TO_INDEX(CAP_KILL)].effective = CAP_TO_MASK(CAP_KILL);
  data[CAP_TO_INDEX(CAP_KILL)].permitted = CAP_TO_MASK(CAP_KILL);
  if (syscall(SYS_capset, &hdr, data) != 0) return ErrnoStatus("capset");
  if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0) return ErrnoStatus("PR_SET_NO_NEW_PRIVS");
  return OkStatus();
}

}  // namespace flightrec::coredump
