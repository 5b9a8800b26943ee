#include "recorder/perf/perf_event.h"

#include <sys/syscall.h>
#include <unistd.h>

#include <fstream>
#include <sstream>
#include <vector>

#include <fmt/format.h>

namespace flightrec::recorder::perf {

int PerfEventParanoid() {
  std::ifstream in("/proc/sys/kernel/perf_event_paranoid");
  int v = 2;
  if (!(in >> v)) return 2;
  return v;
}

std::vector<int> OnlineCpus() {
  std::ifstream in("/sys/devices/system/cpu/online");
  std::string text;
  std::getline(in, text);
  std::vector<int> cpus;
  std::stringstream ss(text);
  std::string part;
  while (std::getline(ss, part, ',')) {
    size_t dash = part.find('-');
    try {
      int a = std::stoi(part.substr(0, dash));
      int b = dash == std::string::npos ? a : std::stoi(part.substr(dash + 1));
      for (int c = a; c <= b; ++c) cpus.push_back(c);
    } catch (...) {
    }
  }
  if (cpus.empty()) {
    long n = sysconf(_SC_NPROCESSORS_ONLN);
    for (long c = 0; c < n; ++c) cpus.push_back(static_cast<int>(c));
  }
  return cpus;
}

StatusOr<ScopedFd> OpenPerfEvent(perf_event_attr& attr, int pid, int cpu, int group_fd,
                                 const std::string& what) {
  attr.size = sizeof(attr);
  int fd = static_cast<int>(
      syscall(SYS_perf_event_open, &attr, pid, cpu, group_fd, PERF_FLAG_FD_CLOEXEC));
  if (fd >= 0) return ScopedFd(fd);
  int err = errno;
  std::string msg;
  switch (err) {
    case EACCES:
    case EPERM:
      msg = fmt::format(
          "{}: permission denied (kernel.perf_event_paranoid = {}). Run as root, grant "
          "CAP_PERFMON, or set `sysctl kernel.perf_event_paranoid=1` (system-wide needs <= 0 "
          "without CAP_PERFMON; `recorder record -- CMD` works at 2)",
          what, PerfEventParanoid());
      break;
    case ENOENT:
    case EOPNOTSUPP:
    case ENODEV:
      msg = fmt::format(
          "{}: this event is not supported on this machine (no PMU for it, or a "
          "virtual machine without one)",
          what);
      break;
    case EMFILE:
    case ENFILE:
      msg = fmt::format("{}: too many open files; raise RLIMIT_NOFILE (ulimit -n, LimitNOFILE=)",
                        what);
      break;
    case ENOMEM:
      msg = fmt::format(
          "{}: out of memory for perf events; raise kernel.perf_event_mlock_kb or "
          "lower the ring size",
          what);
      break;
    case EINVAL:
      msg = fmt::format(
          "{}: the kernel rejected the event attributes (too old a kernel for an "
          "option, or an invalid sample rate above kernel.perf_event_max_sample_rate)",
          what);
      break;
    case EBUSY:
      msg = fmt::format("{}: the PMU is busy (another tool holds it exclusively)", what);
      break;
    default:
      msg = fmt::format("{}: perf_event_open failed", what);
  }
  return ErrnoStatus(err, msg);
}

}  // namespace flightrec::recorder::perf
