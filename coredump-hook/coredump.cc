#include "coredump-hook/coredump.h"

#include <dirent.h>
#include <elfutils/libdwfl.h>
#include <fcntl.h>
#include <grp.h>
#include <libunwind-coredump.h>
#include <linux/capability.h>
#include <linux/securebits.h>
#include <poll.h>
#include <seccomp.h>
#include <signal.h>
#include <sys/acl.h>
#include <sys/file.h>
#include <sys/ioctl.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <chrono>
#include <climits>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>

#include <fmt/format.h>

#include "common/checked_json.h"
#include "common/scoped_fd.h"
#include "common/terminal_escape.h"
#include "common/units.h"
#include "coredump-hook/core_reducer.h"
#include "recorder/attribution/attribution.h"
#include "recorder/symbolize/symbolizer.h"
#include "recorder/ipc/ipc.h"
#include "store/store.h"

namespace flightrec::coredump {
namespace {

namespace attribution = recorder::attribution;

// The hook has no terminal: its messages go to the kernel log (where
// `dmesg`/journald show them) and to stderr for tests.
// Messages carry the crashing program's name: control bytes are escaped.
void Log(const std::string& raw) {
  std::string msg;
  for (unsigned char c : raw) {
    if (c < 0x20 || c == 0x7f) {
      msg += fmt::format("\\x{:02x}", c);
    } else {
      msg += static_cast<char>(c);
    }
  }
  std::string line = fmt::format("<5>recorder-coredump[{}]: {}\n", getpid(), msg);
  int fd = open("/dev/kmsg", O_WRONLY | O_CLOEXEC);
  if (fd >= 0) {
    (void)!write(fd, line.data(), line.size());
    close(fd);
  }
  std::fprintf(stderr, "recorder-coredump: %s\n", msg.c_str());
}

std::string ReadText(const std::string& path, size_t max = 4 << 20) {
  std::ifstream in(path, std::ios::binary);
  std::string s;
  char buf[65536];
  while (in && s.size() < max) {
    in.read(buf, sizeof(buf));
    s.append(buf, static_cast<size_t>(in.gcount()));
  }
  if (s.size() > max) s.resize(max);
  return s;
}

std::string ReadLink(const std::string& path) {
  char buf[4096];
  ssize_t n = readlink(path.c_str(), buf, sizeof(buf) - 1);
  return n > 0 ? std::string(buf, static_cast<size_t>(n)) : "";
}

// Reads `rel` under a /proc/PID directory fd: the fd stays bound to the
// process it was opened for, so a pid reused meanwhile is never read.
std::string ReadAt(int dirfd, const std::string& rel, size_t max = 4 << 20) {
  ScopedFd fd(openat(dirfd, rel.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW));
  std::string s;
  if (!fd) return s;
  char buf[65536];
  while (s.size() < max) {
    ssize_t n = read(fd.get(), buf, sizeof(buf));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    s.append(buf, static_cast<size_t>(n));
  }
  if (s.size() > max) s.resize(max);
  return s;
}

// *err gets readlink's errno (0 on success).
std::string ReadLinkAt(int dirfd, const char* rel, int* err = nullptr) {
  char buf[4096];
  ssize_t n = readlinkat(dirfd, rel, buf, sizeof(buf) - 1);
  if (err) *err = n > 0 ? 0 : n == 0 ? ENOENT : errno;
  return n > 0 ? std::string(buf, static_cast<size_t>(n)) : "";
}

// Field 22 of /proc/PID/stat: the start time in clock ticks after boot, which
// with the pid identifies a process (pids are reused, start times are not).
uint64_t StartTimeTicks(const std::string& stat) {
  size_t paren = stat.rfind(')');
  if (paren == std::string::npos || paren + 2 > stat.size()) return 0;
  std::istringstream in(stat.substr(paren + 2));
  std::string field;
  for (int i = 3; i <= 22 && in >> field; ++i) {
    if (i == 22) return std::strtoull(field.c_str(), nullptr, 10);
  }
  return 0;
}

// Boot time in seconds since the epoch (`btime` of /proc/stat).
int64_t BootTimeS() {
  std::istringstream in(ReadText("/proc/stat", 1 << 20));
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("btime ", 0) == 0) return std::strtoll(line.c_str() + 6, nullptr, 10);
  }
  return 0;
}

// The pid a pidfd refers to ("Pid:" in its fdinfo; -1 once reaped), or 0 if
// `fd` is not a pidfd.
pid_t PidfdPid(int fd) {
  std::istringstream in(ReadText(fmt::format("/proc/self/fdinfo/{}", fd), 64 << 10));
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("Pid:", 0) == 0) return static_cast<pid_t>(std::atoi(line.c_str() + 4));
  }
  return 0;
}

bool PidfdAlive(int pidfd) { return syscall(SYS_pidfd_send_signal, pidfd, 0, nullptr, 0) == 0; }

// What /proc says about the crashing process, read while it still exists, or
// {verified: false} with the reason in *notes when /proc/PID is (or may be)
// another process: a crashed user may read this record, so metadata of a
// process that merely reused the pid must never land in it.
nlohmann::json ReadMetadata(const HookArgs& a, std::string* maps, std::vector<std::string>* notes) {
  nlohmann::json unverified = {{"verified", false}};
  auto refuse = [&](std::string why) {
    notes->push_back(std::move(why));
    maps->clear();
    return unverified;
  };
  // Which process crashed: the kernel's own pidfd (%F, Linux >= 6.16) names
  // it for certain; otherwise a pidfd opened on the pid now.
  ScopedFd pidfd;
  std::string pidfd_from = "none";
  if (a.pidfd >= 0) {
    pid_t p = PidfdPid(a.pidfd);
    if (p == 0) {
      return refuse(fmt::format("fd {} (%F) is not a pidfd: no metadata", a.pidfd));
    }
    if (p != a.pid) {
      return refuse(fmt::format("the kernel's pidfd (fd {}) names pid {}, not {}: no metadata",
                                a.pidfd, p, a.pid));
    }
    pidfd.reset(a.pidfd);
    pidfd_from = "kernel";
  } else {
    // glibc 2.36 declares pidfd_open without C linkage for C++: use the syscall.
    pidfd.reset(static_cast<int>(syscall(SYS_pidfd_open, a.pid, 0)));
    if (pidfd) pidfd_from = "pidfd_open";
  }
  ScopedFd dir(open(fmt::format("/proc/{}", a.pid).c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  if (!dir || (pidfd && !PidfdAlive(pidfd.get()))) {
    return refuse(fmt::format("process {} is gone: no metadata", a.pid));
  }
  // The pidfd was taken before the directory was opened and its process is
  // still there, so the directory is that process. Without %F the pidfd
  // itself may name a newer process with the same pid: one that started
  // after the crash, or lacks the crashing thread, or has another owner.
  std::string stat = ReadAt(dir.get(), "stat", 64 << 10);
  uint64_t start_before = StartTimeTicks(stat);
  int64_t start_wall_s = BootTimeS() + static_cast<int64_t>(start_before) / sysconf(_SC_CLK_TCK);
  if (start_before == 0) return refuse(fmt::format("process {} is gone: no metadata", a.pid));
  if (a.time_s > 0 && start_wall_s > a.time_s + 2) {  // btime and %t are whole seconds
    return refuse(
        fmt::format("process {} started after the crash ({} s > {} s): the pid was reused; no "
                    "metadata",
                    a.pid, start_wall_s, a.time_s));
  }
  if (a.global_tid > 0) {
    struct stat tst;
    if (fstatat(dir.get(), fmt::format("task/{}", a.global_tid).c_str(), &tst, 0) != 0) {
      return refuse(fmt::format(
          "process {} has no thread {} (the crashing one): the pid was reused; no metadata", a.pid,
          a.global_tid));
    }
  }
  std::string status = ReadAt(dir.get(), "status", 64 << 10);
  nlohmann::json st = nlohmann::json::object();
  {
    std::istringstream in(status);
    std::string line;
    while (std::getline(in, line)) {
      if (line.rfind("Uid:", 0) == 0 || line.rfind("Gid:", 0) == 0 ||
          line.rfind("NSpid:", 0) == 0 || line.rfind("PPid:", 0) == 0) {
        std::string v = line.substr(line.find(':') + 1);
        v.erase(0, v.find_first_not_of(" \t"));
        json::SetText(st, line.substr(0, line.find(':')), v);
      }
    }
  }
  // %u is the crashing thread's real uid; a process of another user behind
  // the same pid is not this crash.
  if (st.contains("Uid") && static_cast<uid_t>(std::strtoul(st["Uid"].get<std::string>().c_str(),
                                                            nullptr, 10)) != a.uid) {
    return refuse(
        fmt::format("process {} belongs to uid {}, the crash to uid {}: no metadata", a.pid,
                    std::strtoul(st["Uid"].get<std::string>().c_str(), nullptr, 10), a.uid));
  }
  nlohmann::json m;
  m["status"] = st;
  // The name as the process has it (%e is the same comm with '/' made '!').
  std::string comm = ReadAt(dir.get(), "comm", 64);
  if (!comm.empty() && comm.back() == '\n') comm.pop_back();
  // Text the process chooses is bytes, not UTF-8: SetText keeps it
  // losslessly (`key` in UTF-8, `key_hex` when that lost bytes).
  json::SetText(m, "comm", comm);
  int exe_err = 0;
  const std::string exe_path = ReadLinkAt(dir.get(), "exe", &exe_err);
  json::SetText(m, "exe", exe_path);
  // A file deeper than PATH_MAX has no path /proc can give (ENAMETOOLONG);
  // its process is as alive as any other.
  if (exe_err == ENAMETOOLONG) {
    notes->push_back(fmt::format(
        "the executable's path is longer than PATH_MAX ({} bytes): not recorded", PATH_MAX));
  } else if (exe_path.empty()) {
    // A process in a core dump still has its memory; a zombie has none left.
    return refuse(fmt::format("process {} has exited (no executable): no metadata", a.pid));
  }
  // Through the directory fd: /proc/PID/exe opens the process's own image,
  // even one deleted or replaced on disk since.
  {
    ScopedFd exe(openat(dir.get(), "exe", O_RDONLY | O_CLOEXEC));
    m["build_id"] = exe ? attribution::HexBuildId(
                              attribution::ReadBuildId(fmt::format("/proc/self/fd/{}", exe.get())))
                        : "";
  }
  std::string cmdline = ReadAt(dir.get(), "cmdline", 64 << 10);
  for (char& c : cmdline) {
    if (c == '\0') c = ' ';
  }
  while (!cmdline.empty() && cmdline.back() == ' ') cmdline.pop_back();
  json::SetText(m, "cmdline", cmdline);
  json::SetText(m, "cwd", ReadLinkAt(dir.get(), "cwd"));
  // Delegated cgroups are named by their users.
  json::SetText(m, "cgroup", ReadAt(dir.get(), "cgroup", 64 << 10));
  json::SetText(m, "limits", ReadAt(dir.get(), "limits", 64 << 10));
  *maps = ReadAt(dir.get(), "maps");
  // Environment variables are deliberately not read: they hold secrets.
  nlohmann::json threads = nlohmann::json::array();
  if (int tfd = openat(dir.get(), "task", O_RDONLY | O_DIRECTORY | O_CLOEXEC); tfd >= 0) {
    if (DIR* d = fdopendir(tfd)) {
      while (dirent* e = readdir(d)) {
        if (e->d_name[0] < '0' || e->d_name[0] > '9') continue;
        std::string comm = ReadAt(tfd, std::string(e->d_name) + "/comm", 64);
        if (!comm.empty() && comm.back() == '\n') comm.pop_back();
        // NSpid: the thread's id in each pid namespace, initial first, its
        // own last. The core names threads by the last (what the process
        // sees), samples by the first.
        int tid = std::atoi(e->d_name), ns_tid = tid;
        std::istringstream ts(ReadAt(tfd, std::string(e->d_name) + "/status", 64 << 10));
        std::string line;
        while (std::getline(ts, line)) {
          if (line.rfind("NSpid:", 0) != 0) continue;
          std::istringstream ids(line.substr(6));
          for (int id; ids >> id;) ns_tid = id;
        }
        nlohmann::json t = {{"tid", tid}, {"ns_tid", ns_tid}};
        json::SetText(t, "comm", comm);
        threads.push_back(std::move(t));
      }
      closedir(d);
    } else {
      close(tfd);
    }
  }
  m["threads"] = threads;
  // Still the same process? The directory fd cannot switch processes, but a
  // process that exited meanwhile leaves partial reads behind.
  uint64_t start_after = StartTimeTicks(ReadAt(dir.get(), "stat", 64 << 10));
  bool same = start_before == start_after && (!pidfd || PidfdAlive(pidfd.get()));
  m["verified"] = same;
  m["pidfd"] = pidfd_from;
  m["start_time_ticks"] = start_before;
  m["start_time_s"] = start_wall_s;
  if (!same) {
    notes->push_back(fmt::format(
        "process {} exited while its metadata was read: metadata may be incomplete", a.pid));
  }
  return m;
}

// Asks recorderd for the process's last seconds; returns the record id or
// sets *why.
std::string AskHistory(const HookArgs& a, const HookOptions& o, std::string* why,
                       std::string* file) {
  // One deadline for connecting and dumping: the crashed process (and the
  // core in the pipe) waits for us meanwhile.
  auto timeout = std::chrono::milliseconds(o.history_timeout_ms);
  auto deadline = std::chrono::steady_clock::now() + timeout;
  auto client = recorder::ipc::Client::Connect(o.socket_path, timeout);
  if (!client.ok()) {
    *why = "recorderd is not reachable: " + client.status().message();
    return "";
  }
  nlohmann::json params = {
      {"last_ns", o.history_ns},
      {"pids", {a.pid}},
      {"crash_pid", a.pid},
      // recorderd budgets histories per crashed user, and leaves kernel addresses
      // out of a record that is granted to a user.
      {"for_uid", a.uid},
      // comm is bytes; the request is JSON (UTF-8). The crash record keeps
      // the exact name.
      {"reason", ToValidUtf8(fmt::format("history of {} ({}) killed by SIG{}", a.comm, a.pid,
                                         sigabbrev_np(a.signal) ? sigabbrev_np(a.signal) : "?"))}};
  auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
      deadline - std::chrono::steady_clock::now());
  auto r = (*client)->Call("dump", params, std::max(left, std::chrono::milliseconds(1)));
  if (!r.ok()) {
    *why = fmt::format("recorderd did not give history within {} ms: {}", o.history_timeout_ms,
                       r.status().message());
    return "";
  }
  // Checked reads: an answer of the wrong shape is no history, not an
  // exception that takes the crash with it.
  *file = json::Str(*r, "file");
  std::string id = json::Str(*r, "id");
  if (id.empty()) *why = "recorderd's answer names no history record";
  return id;
}

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
  // without unwinding; it is reaped.
  ~UnwinderChild() {
    core_.reset();
    out_.reset();
    if (pid_ > 0) {
      if (fed_failed_) kill(pid_, SIGKILL);
      waitpid(pid_, nullptr, 0);
    }
  }

  // Forks the child, which reduces the core it is fed into tmp_fd and
  // unwinds it once Run() is called.
  Status Start(int tmp_fd, const std::string& maps, const HookArgs& a,
               const std::map<pid_t, pid_t>& global_tids, CoreReducer::Limits limits) {
    int core[2], out[2];
    if (pipe2(core, O_CLOEXEC) != 0) return ErrnoStatus("pipe");
    if (pipe2(out, O_CLOEXEC) != 0) {
      close(core[0]);
      close(core[1]);
      return ErrnoStatus("pipe");
    }
    const uid_t uid = a.uid == 0 ? 65534 : a.uid;
    const gid_t gid = a.uid == 0 ? 65534 : a.gid;
    const pid_t parent = getpid();
    pid_t child = fork();
    if (child < 0) {
      for (int fd : {core[0], core[1], out[0], out[1]}) close(fd);
      return ErrnoStatus("fork");
    }
    if (child == 0) {
      close(core[1]);
      close(out[0]);
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
        ssize_t n = read(core[0], buf.data(), buf.size());
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
        ssize_t w = write(out[1], text.data() + off, text.size() - off);
        if (w <= 0) break;
        off += static_cast<size_t>(w);
      }
      _exit(0);
    }
    close(core[0]);
    close(out[1]);
    core_.reset(core[1]);
    out_.reset(out[0]);
    pid_ = child;
    return OkStatus();
  }

  pid_t pid() const { return pid_; }

  // The next n bytes of the core. A child that stops reading for 15 s (or
  // is gone) gets no more: the hook stores the core whatever it does.
  void Feed(const char* data, size_t n) {
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

  // Ends the core, lets the child unwind and returns its JSON, or null with
  // *why.
  nlohmann::json Run(std::string* why) {
    if (pid_ <= 0) {
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
        kill(pid_, SIGKILL);
        killed = true;
        break;
      }
      char buf[65536];
      ssize_t n = read(out_.get(), buf, sizeof(buf));
      if (n <= 0) break;
      text.append(buf, static_cast<size_t>(n));
      if (text.size() > (5u << 20)) {
        kill(pid_, SIGKILL);
        killed = true;
        break;
      }
    }
    out_.reset();
    int status = 0;
    waitpid(pid_, &status, 0);
    pid_ = -1;
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

 private:
  pid_t pid_ = -1;
  ScopedFd core_, out_;
  bool fed_failed_ = false;
  std::string feed_why_;
};

// Counts the cores stored over the last hour and takes a slot if the crash
// is within every budget; returns why not otherwise. The budgets are keyed
// on what a user cannot mint for free: the crashed uid (a copied or renamed
// binary is still its owner's), plus a ceiling for everyone; the budget per
// executable is kept inside the uid's (a crash loop of one program leaves
// room for that user's other programs). Hooks run concurrently during a
// crash storm, so counting and reserving happen under one lock. The counts
// live in one file in the store, opened without following a symlink and
// rewritten in place (a torn line after a power cut only loses a count).
std::string ReserveCoreSlot(const HookOptions& o, uid_t uid, const std::string& raw_exe) {
  // The path is the crashed user's to choose: with its control bytes
  // escaped, a newline in it cannot add lines (counts against others).
  std::string exe;
  for (unsigned char c : raw_exe) {
    if (c < 0x20 || c == 0x7f || c == '\\') {
      exe += fmt::format("\\x{:02x}", c);
    } else {
      exe += static_cast<char>(c);
    }
  }
  ScopedFd fd(open((o.store_dir + "/.coredump-rate").c_str(),
                   O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600));
  if (!fd || flock(fd.get(), LOCK_EX) != 0) return "";  // no limit rather than no core
  std::string text;
  char buf[65536];
  ssize_t n;
  while ((n = pread(fd.get(), buf, sizeof(buf), static_cast<off_t>(text.size()))) > 0) {
    text.append(buf, static_cast<size_t>(n));
    if (text.size() > (16u << 20)) break;  // a damaged file: start afresh
  }
  const int64_t now = time(nullptr);
  std::string kept;
  int all = 0, of_uid = 0, of_exe = 0;
  std::istringstream in(text.size() > (16u << 20) ? std::string() : text);
  std::string line;
  // Lines: "<time>\t<uid>\t<exe>" (the exe escaped: no tab, no newline).
  while (std::getline(in, line)) {
    size_t tab1 = line.find('\t');
    size_t tab2 = tab1 == std::string::npos ? tab1 : line.find('\t', tab1 + 1);
    if (tab2 == std::string::npos) continue;  // the old format, or damage
    int64_t t = std::strtoll(line.c_str(), nullptr, 10);
    if (now - t >= 3600 || t > now + 60) continue;
    kept += line + "\n";
    ++all;
    if (static_cast<uid_t>(std::strtoul(line.c_str() + tab1 + 1, nullptr, 10)) != uid) continue;
    ++of_uid;
    if (line.compare(tab2 + 1, std::string::npos, exe) == 0) ++of_exe;
  }
  std::string why;
  if (all >= o.max_per_hour) {
    why = fmt::format("rate limited: {} cores in the last hour (all users); core dropped", all);
  } else if (of_uid >= o.max_per_uid_per_hour) {
    why =
        fmt::format("rate limited: {} cores of uid {} in the last hour; core dropped", of_uid, uid);
  } else if (of_exe >= o.max_per_exe_per_hour) {
    why = fmt::format("rate limited: {} cores of {} (uid {}) in the last hour; core dropped",
                      of_exe, exe, uid);
  } else {
    kept += fmt::format("{}\t{}\t{}\n", now, uid, exe);
  }
  if (ftruncate(fd.get(), 0) == 0) (void)!pwrite(fd.get(), kept.data(), kept.size(), 0);
  return why;
}

// The store and every directory above it must be the hook's own (or
// root's) and writable by nobody else: the hook is root, and in a directory
// another user controls, that user could swap in symlinks or plant records
// for it to index, open and delete (a store configured under /tmp or a
// user's home). Missing directories are created first, so that a user
// cannot create one before the hook does.
Status CheckStoreDir(const std::string& dir) {
  if (dir.empty() || dir[0] != '/') {
    return InvalidArgument(fmt::format("store {} is not an absolute path", dir));
  }
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);  // 0700 under the hook's umask
  std::filesystem::path p(dir);
  for (std::filesystem::path d = p;; d = d.parent_path()) {
    struct stat sb;
    if (lstat(d.c_str(), &sb) != 0) return ErrnoStatus(fmt::format("store {}", dir));
    if (!S_ISDIR(sb.st_mode)) {
      return InvalidArgument(
          fmt::format("store {}: {} is not a directory (symlinks are refused)", dir, d.string()));
    }
    if (sb.st_uid != 0 && sb.st_uid != geteuid()) {
      return Status(
          StatusCode::kPermissionDenied,
          fmt::format("store {}: {} belongs to uid {}, not root", dir, d.string(), sb.st_uid));
    }
    // A sticky directory (/tmp) lets nobody rename or remove root's entries.
    if ((sb.st_mode & 022) != 0 && (d == p || (sb.st_mode & S_ISVTX) == 0)) {
      return Status(StatusCode::kPermissionDenied,
                    fmt::format("store {}: {} is writable by other users", dir, d.string()));
    }
    if (d == d.parent_path()) break;
  }
  return OkStatus();
}

// A crash of the hook must not start the hook again: recognised by its
// executable, never by a name (any program may be called `recorder...`).
// (The kernel itself refuses to pipe the core of a process whose
// RLIMIT_CORE is 1, as it sets for its core helpers; the unwinder child sets
// it too.)
bool IsHookItself(const std::string& exe) {
  return !exe.empty() && exe == ReadLink("/proc/self/exe");
}

}  // namespace

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

HookArgv SplitHookArgv(int argc, const char* const* argv) {
  HookArgv out;
  int dashes = -1;
  for (int i = 1; i < argc; ++i) {
    if (std::string_view(argv[i]) == "--") {
      dashes = i;
      break;
    }
  }
  auto is_number = [](std::string_view v) {
    return !v.empty() && v.find_first_not_of("0123456789") == std::string_view::npos;
  };
  if (dashes > 0) {
    out.options.assign(argv + 1, argv + dashes);
    out.values.assign(argv + dashes + 1, argv + argc);
  } else if (argc > 1 && is_number(argv[1])) {
    out.values.assign(argv + 1, argv + argc);
  } else {
    out.options.assign(argv + 1, argv + argc);
  }
  return out;
}

StatusOr<HookArgs> ParseHookArgs(const std::vector<std::string>& p) {
  if (p.size() != 10 && p.size() != 11) {
    return InvalidArgument(fmt::format(
        "expected the core_pattern values %P %i %I %s %t %c %u %g %d %e [%F], got {} values",
        p.size()));
  }
  HookArgs a;
  try {
    size_t used = 0;
    auto num = [&](const std::string& s) {
      long long v = std::stoll(s, &used);
      if (used != s.size()) throw std::invalid_argument(s);
      return v;
    };
    a.pid = static_cast<pid_t>(num(p[0]));
    a.tid = static_cast<pid_t>(num(p[1]));
    a.global_tid = static_cast<pid_t>(num(p[2]));
    a.signal = static_cast<int>(num(p[3]));
    a.time_s = num(p[4]);
    a.rlimit_core = static_cast<uint64_t>(std::stoull(p[5]));
    a.uid = static_cast<uid_t>(num(p[6]));
    a.gid = static_cast<gid_t>(num(p[7]));
    a.dumpable = num(p[8]) == 1;
  } catch (const std::exception& e) {
    return InvalidArgument(fmt::format("malformed core_pattern value: {}", e.what()));
  }
  if (a.pid <= 0 || a.signal < 0 || a.signal > 64) {
    return InvalidArgument("core_pattern values out of range");
  }
  a.comm = p[9];
  if (p.size() == 11 && !p[10].empty()) {
    char* end = nullptr;
    long fd = std::strtol(p[10].c_str(), &end, 10);
    if (*end != '\0' || fd < 0 || fd > 1024) {
      return InvalidArgument(fmt::format("malformed %F value '{}'", p[10]));
    }
    a.pidfd = static_cast<int>(fd);
  }
  return a;
}

StatusOr<std::string> CorePattern(const std::string& hook_path) {
  std::string p = fmt::format("|{} -- %P %i %I %s %t %c %u %g %d %e %F", hook_path);
  if (p.size() > 127) {  // CORENAME_MAX_SIZE - 1 (fs/coredump.c)
    return InvalidArgument(fmt::format(
        "core_pattern would be {} bytes; the kernel keeps 127: install the hook at a shorter "
        "path",
        p.size()));
  }
  return p;
}

Status WriteHookConfig(const HookOptions& o) {
  std::error_code ec;
  std::filesystem::create_directories(std::filesystem::path(kHookConfig).parent_path(), ec);
  std::string tmp = std::string(kHookConfig) + ".tmp";
  {
    std::ofstream out(tmp, std::ios::trunc);
    out << nlohmann::json{{"store", o.store_dir},
                          {"socket", o.socket_path},
                          {"max_core_bytes", o.max_core_bytes},
                          {"history_ns", o.history_ns},
                          {"max_per_exe_per_hour", o.max_per_exe_per_hour},
                          {"max_per_uid_per_hour", o.max_per_uid_per_hour},
                          {"max_per_hour", o.max_per_hour},
                          {"history_timeout_ms", o.history_timeout_ms}}
               .dump(2)
        << "\n";
    if (!out.flush()) return ErrnoStatus(fmt::format("writing {}", tmp));
  }
  if (rename(tmp.c_str(), kHookConfig) != 0)
    return ErrnoStatus(fmt::format("writing {}", kHookConfig));
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

int RunHook(const HookArgs& kernel_args, const HookOptions& o, int core_fd) {
  HookArgs a = kernel_args;
  const char* sig = sigabbrev_np(a.signal);
  const std::string signame = sig ? fmt::format("SIG{}", sig) : std::to_string(a.signal);
  // ---- privileged part: /proc of the crashed process (another user's),
  // the unwinder's temporary file handed to that user, the unwinder started
  // as that user.
  std::vector<std::string> notes;
  std::string maps;
  nlohmann::json md = ReadMetadata(a, &maps, &notes);
  // What is stored and shown is /proc's comm of the verified process; the
  // kernel's %e only when /proc could not be trusted.
  // (Both as the process's bytes, not their UTF-8 rendering.)
  if (md.value("verified", false) && md.contains("comm")) a.comm = json::RawText(md, "comm");
  std::string exe = json::RawText(md, "exe");
  if (IsHookItself(exe)) {
    Log("not handling a crash of recorder-coredump itself (no loop)");
    return 0;
  }
  if (exe.empty()) exe = a.comm;
  std::map<pid_t, pid_t> global_tids;  // core (namespace) tid -> initial namespace tid
  for (const auto& t : md.value("threads", nlohmann::json::array())) {
    global_tids[t.value("ns_tid", 0)] = t.value("tid", 0);
  }
  global_tids[a.tid] = a.global_tid;
  // The unwinder's copy of the core: unnamed, in /var/tmp (cores are large
  // for /tmp's tmpfs), owned by the user the unwinder runs as so that it can
  // open it through /proc/self/fd.
  ScopedFd tmp(open("/var/tmp", O_TMPFILE | O_RDWR | O_CLOEXEC, 0600));
  std::string tmp_why = tmp ? "" : std::string("no temporary file: ") + std::strerror(errno);
  if (tmp && fchown(tmp.get(), a.uid == 0 ? 65534 : a.uid, a.uid == 0 ? 65534 : a.gid) != 0) {
    tmp_why = std::string("fchown of the temporary file failed: ") + std::strerror(errno);
    tmp.reset();
  }
  UnwinderChild unwinder;
  if (tmp) {
    CoreReducer::Limits limits;
    limits.max_memory = o.backtrace_memory_max;
    if (Status s = unwinder.Start(tmp.get(), maps, a, global_tids, limits); !s.ok()) {
      tmp_why = "no unwinder process: " + s.ToString();
      tmp.reset();
    }
  }
  // ---- everything else needs no privilege but signalling the unwinder:
  // the store and its index are root's files (0600), written as their owner.
  if (geteuid() == 0) {
    if (Status s = DropPrivileges(); !s.ok()) {
      notes.push_back("could not drop privileges: " + s.ToString());
    }
  }

  if (Status safe = CheckStoreDir(o.store_dir); !safe.ok()) {
    Log(fmt::format("pid {} ({}) {}: crash not stored: {}", a.pid, a.comm, signame,
                    safe.message()));
    return 1;
  }
  store::StoreOptions so;
  so.group_readable = false;
  auto st = store::Store::Open(o.store_dir, so);
  if (!st.ok()) {
    Log(fmt::format("pid {} ({}) {}: core not stored: {}", a.pid, a.comm, signame,
                    st.status().message()));
    return 1;
  }
  // Rate limits per uid, per executable of that uid and for everyone: a
  // crash storm keeps metadata, not cores.
  std::string limited_why = ReserveCoreSlot(o, a.uid, exe);
  const bool limited = !limited_why.empty();
  if (limited) notes.push_back(limited_why);
  std::string history_id, history_why, history_file;
  if (!limited) history_id = AskHistory(a, o, &history_why, &history_file);
  if (!history_why.empty()) notes.push_back(history_why);

  auto begun = (*st)->BeginRecord("crash");
  if (!begun.ok()) {
    Log(fmt::format("pid {} ({}) {}: crash not stored: {}", a.pid, a.comm, signame,
                    begun.status().message()));
    return 1;
  }
  std::unique_ptr<store::PendingRecord> rec = std::move(*begun);
  uint64_t core_size = 0;
  bool truncated = false;
  nlohmann::json backtrace;
  std::string backtrace_why;
  // The core's own write: when it fails (a full disk, a quota), the rest of
  // the crash is still stored, without the core.
  Status core_io;
  if (!limited) {
    // The core goes into the record, and to the sandboxed unwinder, which
    // keeps what unwinding needs of it in the temporary file.
    auto& w = rec->writer();
    core_io = w.BeginSection("core");
    std::vector<char> buf(1 << 20);
    for (;;) {
      if (core_size >= o.max_core_bytes) {
        char probe;
        truncated = read(core_fd, &probe, 1) > 0;
        break;
      }
      size_t want =
          static_cast<size_t>(std::min<uint64_t>(buf.size(), o.max_core_bytes - core_size));
      ssize_t n = read(core_fd, buf.data(), want);
      if (n < 0 && errno == EINTR) continue;
      if (n < 0) {
        notes.push_back(std::string("reading the core failed: ") + std::strerror(errno));
        break;
      }
      if (n == 0) break;
      // Past a failed write the core is still read to its end: the
      // unwinder needs it, and a backtrace is worth more than a core.
      if (core_io.ok()) core_io = w.Write(std::string_view(buf.data(), static_cast<size_t>(n)));
      if (tmp) unwinder.Feed(buf.data(), static_cast<size_t>(n));
      core_size += static_cast<uint64_t>(n);
    }
    if (core_io.ok()) core_io = w.EndSection();
    if (truncated) notes.push_back(fmt::format("core truncated at {} bytes (limit)", core_size));
    if (core_size == 0) notes.push_back("the kernel sent an empty core");
    if (core_size > 0) {
      if (!tmp) {
        backtrace_why = "no backtrace: " + tmp_why;
      } else {
        backtrace = unwinder.Run(&backtrace_why);
      }
    }
    if (!backtrace_why.empty()) notes.push_back(backtrace_why);
  }
  tmp.reset();
  // Why a core that could not be written is missing, like systemd-coredump's
  // entries without one.
  auto core_missing = [&](const Status& why) {
    return why.code() == StatusCode::kNoSpace
               ? fmt::format("core not stored: no space left in the store for its {} ({})",
                             FormatBytes(core_size), why.ToString())
               : fmt::format("core not stored: {}", why.ToString());
  };
  // Finishes `r` (holding the core or not) with the metadata, the maps and
  // the backtrace, and commits it.
  auto finish = [&](std::unique_ptr<store::PendingRecord> r,
                    bool with_core) -> StatusOr<store::RecordRow> {
    auto& w = r->writer();
    // comm and exe are the process's bytes: SetText below.
    nlohmann::json crash = {{"pid", a.pid},
                            {"tid", a.tid},
                            {"global_tid", a.global_tid},
                            {"signal", a.signal},
                            {"signal_name", signame},
                            {"time_ns", a.time_s * 1'000'000'000LL},
                            {"uid", a.uid},
                            {"gid", a.gid},
                            {"dumpable", a.dumpable},
                            {"core_size", core_size},
                            {"truncated", truncated},
                            {"core_stored", with_core},
                            {"rate_limited", limited},
                            {"history", history_id},
                            {"notes", nlohmann::json::array()}};
    json::SetText(crash, "comm", a.comm);
    json::SetText(crash, "exe", exe);
    // Notes quote names and paths: readable UTF-8 (the exact bytes are in
    // the fields above).
    for (const auto& n : notes) crash["notes"].push_back(ToValidUtf8(n));
    RETURN_IF_ERROR(w.AddSection("metadata", json::Dump(md)));
    // The address space at the crash, as /proc showed it (text).
    if (!maps.empty()) RETURN_IF_ERROR(w.AddSection("maps", maps));
    if (!backtrace.is_null()) RETURN_IF_ERROR(w.AddSection("backtrace", json::Dump(backtrace)));
    nlohmann::json process = {{"pid", a.pid}, {"uid", a.uid}};
    json::SetText(process, "comm", a.comm);
    json::SetText(process, "exe", exe);
    nlohmann::json meta = {
        {"reason", ToValidUtf8(fmt::format("{} ({}) killed by {}", a.comm, a.pid, signame))},
        {"crash", crash},
        {"pids", {a.pid}},
        {"processes", {process}},
        {"start_ns", a.time_s * 1'000'000'000LL},
        {"end_ns", a.time_s * 1'000'000'000LL}};
    return (*st)->Commit(std::move(r), meta);
  };
  // Without the core, in a fresh record: the failed one's temporary file
  // (and the space its part of the core took) goes first.
  bool core_stored = !limited && core_size > 0;
  auto finish_without_core = [&](const Status& why) -> StatusOr<store::RecordRow> {
    notes.push_back(core_missing(why));
    core_stored = false;
    rec.reset();
    ASSIGN_OR_RETURN(auto fresh, (*st)->BeginRecord("crash"));
    return finish(std::move(fresh), false);
  };
  StatusOr<store::RecordRow> row =
      core_io.ok() ? finish(std::move(rec), core_stored) : finish_without_core(core_io);
  // A commit that failed with the core (its end, the index) is tried once
  // more without it.
  if (!row.ok() && core_stored) row = finish_without_core(row.status());
  if (!row.ok()) {
    Log(fmt::format("pid {} ({}) {}: crash not stored: {}", a.pid, a.comm, signame,
                    row.status().message()));
    return 1;
  }
  // The crashed user may read this record (and only this one): an ACL on the
  // root-owned file, as systemd-coredump does, and a link in by-uid/<uid>/ so
  // the user finds it in a store they may not list. Cores of processes that
  // were not dumpable (setuid and the like) stay root's.
  if (a.uid != 0 && a.dumpable) {
    for (const std::string& f : {row->file, history_file}) {
      if (f.empty() || f.find('/') != std::string::npos) continue;
      Status acl = (*st)->GrantReader(f, a.uid);
      if (!acl.ok()) Log(fmt::format("{}: {}", row->id, acl.message()));
    }
  }
  std::string summary =
      fmt::format("pid {} ({}) {}: stored as {} ({}{}{})", a.pid, a.comm, signame, row->id,
                  core_stored ? FormatBytes(core_size) : std::string("no core"),
                  history_id.empty() ? ", no history" : ", history " + history_id,
                  truncated ? ", truncated" : "");
  for (const auto& n : notes) summary += "; " + n;
  Log(summary);
  return 0;
}

int CoredumpMain(int argc, char** argv) {
  CLI::App app{
      "recorder-coredump: the kernel.core_pattern handler of flightrec.\n"
      "Stores the core from stdin with the process's metadata, a backtrace of every thread\n"
      "and its last seconds of history from recorderd. Installed by `recorder coredump "
      "install`."};
  HookOptions o;
  o.store_dir = store::DefaultStoreDir();
  std::string config = kHookConfig;
  // The kernel's values (%e among them, which the crashing program chooses)
  // are never looked at as options: only what precedes "--" is.
  HookArgv split = SplitHookArgv(argc, argv);
  for (size_t i = 0; i < split.options.size(); ++i) {
    const std::string& opt = split.options[i];
    if (opt == "--config" && i + 1 < split.options.size()) config = split.options[i + 1];
    if (opt.rfind("--config=", 0) == 0) config = opt.substr(9);
  }
  // Settings from `recorder coredump install`; flags override them.
  if (std::ifstream in(config); in) {
    std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    auto j = json::ParseBounded(text);
    if (j.is_object()) {
      // A setting of the wrong type (a hand-edited "1G" for a number) is
      // ignored with a log line: nlohmann's value() would throw, and the
      // hook would die on every crash.
      auto set = [&](const char* key, auto* field) {
        if (!j.contains(key)) return;
        using T = std::remove_pointer_t<decltype(field)>;
        // Read with two different defaults: the same answer both times is
        // the file's value; different ones, a value of the wrong type.
        const T a = json::Get<T>(j, key, T{}), b = json::Get<T>(j, key, T{1});
        if (a != b) {
          Log(fmt::format("{}: ignoring \"{}\": not a {}", config, key,
                          std::is_same_v<T, std::string> ? "string" : "number in range"));
          return;
        }
        *field = a;
      };
      set("store", &o.store_dir);
      set("socket", &o.socket_path);
      set("max_core_bytes", &o.max_core_bytes);
      set("history_ns", &o.history_ns);
      set("max_per_exe_per_hour", &o.max_per_exe_per_hour);
      set("max_per_uid_per_hour", &o.max_per_uid_per_hour);
      set("max_per_hour", &o.max_per_hour);
      set("history_timeout_ms", &o.history_timeout_ms);
      set("backtrace_memory_max", &o.backtrace_memory_max);
    } else {
      Log("ignoring " + config + ": not JSON");
    }
  }
  std::string max_size = std::to_string(o.max_core_bytes),
              history = std::to_string(o.history_ns) + "ns",
              history_timeout = std::to_string(o.history_timeout_ms) + "ms";
  app.add_option("--config", config, "Settings file")->capture_default_str();
  app.add_option("--store", o.store_dir, "Store directory")->capture_default_str();
  app.add_option("--socket", o.socket_path, "recorderd control socket")->capture_default_str();
  app.add_option("--max-core-size", max_size, "Cores are truncated past this")
      ->capture_default_str();
  app.add_option("--history", history, "History to ask recorderd for")->capture_default_str();
  app.add_option("--history-timeout", history_timeout,
                 "How long recorderd may take to give the history; then the core is stored "
                 "without it")
      ->capture_default_str();
  std::string bt_max = std::to_string(o.backtrace_memory_max);
  app.add_option("--backtrace-memory-max", bt_max,
                 "Memory of the core the unwinder's reduced copy may keep (stacks first)")
      ->capture_default_str();
  app.add_option("--max-per-exe-per-hour", o.max_per_exe_per_hour,
                 "Cores stored per executable per hour; later crashes keep metadata only")
      ->capture_default_str();
  app.add_option("--max-per-uid-per-hour", o.max_per_uid_per_hour,
                 "Cores stored per crashed uid per hour; later crashes keep metadata only")
      ->capture_default_str();
  app.add_option("--max-per-hour", o.max_per_hour, "Cores stored per hour for all users together")
      ->capture_default_str();
  app.footer(
      "After the options: -- %P %i %I %s %t %c %u %g %d %e [%F] (from the kernel). Without "
      "options, the values may come first (a pattern written before `--` was added).");
  // Anything not an option is left over, and refused below.
  app.allow_extras();
  try {
    std::vector<const char*> opts = {argv[0]};
    for (const auto& opt : split.options) opts.push_back(opt.c_str());
    app.parse(static_cast<int>(opts.size()), opts.data());
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  }
  if (!app.remaining().empty()) {
    Log("refusing to run: the kernel's values must follow `--` (got '" + app.remaining()[0] +
        "' among the options)");
    return 2;
  }
  auto size = ParseSize(max_size);
  auto btmax = ParseSize(bt_max);
  auto hist = ParseDurationNs(history);
  auto htimeout = ParseDurationNs(history_timeout);
  auto args = ParseHookArgs(split.values);
  if (!size.ok() || !btmax.ok() || !hist.ok() || !htimeout.ok() || !args.ok()) {
    std::string msg = !args.ok()    ? args.status().message()
                      : !size.ok()  ? size.status().message()
                      : !btmax.ok() ? btmax.status().message()
                      : !hist.ok()  ? hist.status().message()
                                    : htimeout.status().message();
    Log("refusing to run: " + msg);
    return 2;
  }
  o.max_core_bytes = *size;
  o.backtrace_memory_max = *btmax;
  o.history_ns = *hist;
  o.history_timeout_ms = static_cast<int>(std::clamp<int64_t>(*htimeout / 1'000'000, 1, 600'000));
  // The kernel's pidfd (%F) must not leak into the unwinder or gdb-like
  // children; ReadMetadata takes it over.
  if (args->pidfd >= 0) fcntl(args->pidfd, F_SETFD, FD_CLOEXEC);
  umask(077);
  // An unwinder that died before being told to start must not take the
  // hook down with it through its go pipe.
  signal(SIGPIPE, SIG_IGN);
  return RunHook(*args, o, STDIN_FILENO);
}

// ------------------------------------------------------------ backtrace

namespace {

// elfutils' view of the same core (what systemd-coredump uses): modules from
// the core's NT_FILE note, unwind tables from the files on disk, CFI where
// libunwind's coredump accessors have no backing for a segment mapped at a
// non-zero file offset (every shared library's text). Thread order is the
// core's: the thread that took the signal first.
std::vector<std::pair<pid_t, std::vector<uint64_t>>> DwflWalk(const std::string& core_path,
                                                              size_t max_frames) {
  std::vector<std::pair<pid_t, std::vector<uint64_t>>> out;
  static const Dwfl_Callbacks kCallbacks = {
      .find_elf = dwfl_build_id_find_elf,
      .find_debuginfo = dwfl_standard_find_debuginfo,
      .section_address = dwfl_offline_section_address,
      .debuginfo_path = nullptr,
  };
  ScopedFd fd(open(core_path.c_str(), O_RDONLY | O_CLOEXEC));
  if (!fd) return out;
  elf_version(EV_CURRENT);
  Elf* core = elf_begin(fd.get(), ELF_C_READ_MMAP, nullptr);
  if (core == nullptr) return out;
  Dwfl* dwfl = dwfl_begin(&kCallbacks);
  if (dwfl != nullptr && dwfl_core_file_report(dwfl, core, nullptr) >= 0 &&
      dwfl_report_end(dwfl, nullptr, nullptr) == 0 && dwfl_core_file_attach(dwfl, core) >= 0) {
    struct Ctx {
      std::vector<std::pair<pid_t, std::vector<uint64_t>>>* out;
      size_t max;
    } ctx{&out, max_frames};
    dwfl_getthreads(
        dwfl,
        [](Dwfl_Thread* thread, void* arg) -> int {
          auto* c = static_cast<Ctx*>(arg);
          c->out->emplace_back(dwfl_thread_tid(thread), std::vector<uint64_t>());
          dwfl_thread_getframes(
              thread,
              [](Dwfl_Frame* frame, void* a) -> int {
                auto* cc = static_cast<Ctx*>(a);
                Dwarf_Addr pc = 0;
                bool activation = false;
                if (!dwfl_frame_pc(frame, &pc, &activation)) return DWARF_CB_ABORT;
                auto& ips = cc->out->back().second;
                // Callers' pcs are return addresses, like the other walks.
                ips.push_back(pc);
                return ips.size() >= cc->max ? DWARF_CB_ABORT : DWARF_CB_OK;
              },
              c);
          return DWARF_CB_OK;
        },
        &ctx);
  }
  if (dwfl) dwfl_end(dwfl);
  elf_end(core);
  return out;
}

}  // namespace

nlohmann::json Backtrace(const std::string& core_path, const std::string& maps, pid_t pid,
                         pid_t crashing_tid, const std::map<pid_t, pid_t>& global_tids,
                         size_t max_frames) {
  nlohmann::json out = {{"threads", nlohmann::json::array()}};
  UCD_info* ui = _UCD_create(core_path.c_str());
  if (ui == nullptr) {
    out["error"] = "not a core file libunwind can read";
    return out;
  }
  // Read-only file mappings are not in the core: libunwind reads code and
  // unwind tables from the files themselves.
  std::vector<recorder::MmapEvent> mmaps =
      attribution::MapsEvents(static_cast<uint32_t>(pid), maps, 0);
  for (const auto& m : mmaps) {
    if (!m.filename.empty() && m.filename[0] == '/' && m.pgoff == 0) {
      _UCD_add_backing_file_at_vaddr(ui, m.start, m.filename.c_str());
    }
  }
  attribution::CookieTable cookies;
  attribution::ProcessTable table(&cookies);
  for (const auto& m : mmaps) table.Apply(recorder::Event(m));
  attribution::KernelSymbols none;
  attribution::Symbolizer symbolizer(&cookies, &none);
  unw_addr_space_t as = unw_create_addr_space(&_UCD_accessors, 0);
  auto dwfl_threads = DwflWalk(core_path, max_frames);
  int n = _UCD_get_num_threads(ui);
  std::vector<nlohmann::json> threads;
  for (int i = 0; i < n; ++i) {
    _UCD_select_thread(ui, i);
    nlohmann::json t;
    t["index"] = i;
    unw_cursor_t c;
    std::vector<uint64_t> ips, fp_ips;
    if (unw_init_remote(&c, as, ui) == 0) {
      // Frame-pointer walk from the same registers, over the core's stack
      // memory: where libunwind lacks unwind tables (code segments are not
      // in the core and only offset-0 mappings can back them), frame
      // pointers may still give the callers.
      unw_word_t ip0 = 0, bp = 0;
      unw_get_reg(&c, UNW_REG_IP, &ip0);
      unw_get_reg(&c, UNW_X86_64_RBP, &bp);
      if (ip0) fp_ips.push_back(ip0);
      for (size_t k = 0; k < max_frames && bp != 0 && bp % 8 == 0; ++k) {
        unw_word_t next = 0, ret = 0;
        if (_UCD_access_mem(as, bp, &next, 0, ui) != 0 ||
            _UCD_access_mem(as, bp + 8, &ret, 0, ui) != 0 || ret == 0) {
          break;
        }
        fp_ips.push_back(ret);
        if (next <= bp) break;  // the stack grows down: callers' frames are above
        bp = next;
      }
      do {
        unw_word_t ip = 0;
        if (unw_get_reg(&c, UNW_REG_IP, &ip) != 0 || ip == 0) break;
        ips.push_back(ip);
      } while (ips.size() < max_frames && unw_step(&c) > 0);
    }
    // Keep the walk whose frames all land in mapped files: a DWARF step
    // without tables can wander into the stack, a frame-pointer walk stops
    // at code built without them.
    auto mapped = [&](const std::vector<uint64_t>& v) {
      size_t n = 0;
      for (size_t k = 0; k < v.size(); ++k) {
        if (table.Lookup(static_cast<uint32_t>(pid), k ? v[k] - 1 : v[k]) == nullptr) break;
        ++n;
      }
      return n;
    };
    std::string method = "libunwind";
    if (mapped(fp_ips) > mapped(ips)) {
      ips = fp_ips;
      method = "frame-pointer";
    }
    // The core's tid is the thread's id in the process's pid namespace.
    pid_t ns_tid = _UCD_get_pid(ui);
    auto g = global_tids.find(ns_tid);
    t["ns_tid"] = ns_tid;
    t["tid"] = g != global_tids.end() ? g->second : ns_tid;
    for (const auto& [dtid, dips] : dwfl_threads) {
      if (dtid != ns_tid) continue;
      if (mapped(dips) > mapped(ips)) {
        ips = dips;
        method = "libdwfl";
      }
      break;
    }
    t["unwind"] = method;
    // Symbolize like samples: entry 0 is the faulting ip, the rest are
    // return addresses.
    recorder::Sample s;
    s.pid = static_cast<uint32_t>(pid);
    s.mode = recorder::CpuMode::kUser;
    s.user_chain = ips;
    if (!ips.empty()) s.ip = ips[0];
    attribution::AttributedSample attr =
        attribution::Attribute(s, table, cookies, nullptr, nullptr);
    nlohmann::json frames = nlohmann::json::array();
    for (size_t k = 0; k < attr.frames.size(); ++k) {
      for (const auto& sym : symbolizer.ResolveInline(attr.frames[k])) {
        nlohmann::json f = {{"ip", k < ips.size() ? ips[k] : 0},
                            {"function", sym.function},
                            {"dso", sym.dso},
                            {"offset", sym.offset},
                            {"status", sym.status}};
        if (!sym.file.empty()) {
          f["file"] = sym.file;
          f["line"] = sym.line;
        }
        if (sym.inlined) f["inlined"] = true;
        frames.push_back(std::move(f));
      }
    }
    t["frames"] = frames;
    threads.push_back(std::move(t));
  }
  // The core's first thread is the one that took the signal (the kernel
  // writes it first); keep it first, then the others in the core's order,
  // and make sure of it by %I when the core names that thread.
  std::stable_partition(threads.begin(), threads.end(),
                        [&](const nlohmann::json& t) { return t.value("tid", 0) == crashing_tid; });
  for (auto& t : threads) out["threads"].push_back(std::move(t));
  out["crashing_tid"] = crashing_tid;  // global (%I), like each thread's "tid"
  out["signal"] = _UCD_get_cursig(ui);
  unw_destroy_addr_space(as);
  _UCD_destroy(ui);
  return out;
}

}  // namespace flightrec::coredump
