#include "coredump-hook/context.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <climits>
#include <cstring>
#include <fstream>
#include <sstream>

#include <fmt/format.h>

#include "common/checked_json.h"
#include "common/scoped_fd.h"
#include "recorder/elf/build_id.h"

namespace flightrec::coredump {

void Log(const std::string& raw, int level) {
  std::string msg;
  for (unsigned char c : raw) {
    if (c < 0x20 || c == 0x7f) {
      msg += fmt::format("\\x{:02x}", c);
    } else {
      msg += static_cast<char>(c);
    }
  }
  std::string line = fmt::format("<{}>recorder-coredump[{}]: {}\n", level, getpid(), msg);
  int fd = open("/dev/kmsg", O_WRONLY | O_CLOEXEC);
  if (fd >= 0) {
    (void)!write(fd, line.data(), line.size());
    close(fd);
  }
  std::fprintf(stderr, "recorder-coredump: %s\n", msg.c_str());
}

std::string ReadText(const std::string& path, size_t max) {
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

namespace {

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

}  // namespace

// What /proc says about the crashing process, read while it still exists, or
// {verified: false} with the reason in *notes when /proc/PID is (or may be)
// another process: a crashed user may read this record, so metadata of a
// process that merely reused the pid must never land in it.
nlohmann::json ReadMetadata(const HookArgs& a, std::string* maps, std::vector<std::string>* notes,
                            std::optional<FileId>* exe_id) {
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
    struct stat est {};
    if (exe && fstat(exe.get(), &est) == 0) *exe_id = FileId{est.st_dev, est.st_ino};
    m["build_id"] = exe ? recorder::elf::HexBuildId(recorder::elf::ReadBuildId(
                              fmt::format("/proc/self/fd/{}", exe.get())))
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

Crash CollectCrash(const HookArgs& kernel_args) {
  Crash c;
  c.a = kernel_args;
  const char* sig = sigabbrev_np(c.a.signal);
  c.signame = sig ? fmt::format("SIG{}", sig) : std::to_string(c.a.signal);
  c.md = ReadMetadata(c.a, &c.maps, &c.notes, &c.exe_id);
  // What is stored and shown is /proc's comm of the verified process; the
  // kernel's %e only when /proc could not be trusted.
  // (Both as the process's bytes, not their UTF-8 rendering.)
  if (c.md.value("verified", false) && c.md.contains("comm")) {
    c.a.comm = json::RawText(c.md, "comm");
  }
  c.exe = json::RawText(c.md, "exe");
  return c;
}

// A crash of the hook must not start the hook again: recognised by its
// executable file, never by a name (any program may be called
// `recorder...`) nor by a path (a program bind-mounted over the hook's path
// in another mount namespace has that path).
// (The kernel itself refuses to pipe the core of a process whose
// RLIMIT_CORE is 1, as it sets for its core helpers; the unwinder child sets
// it too.)
bool IsHookItself(const std::optional<FileId>& exe) {
  struct stat self {};
  return exe && stat("/proc/self/exe", &self) == 0 && *exe == FileId{self.st_dev, self.st_ino};
}

}  // namespace flightrec::coredump
