#include "recorder/daemon/tracepoint_format.h"

#include <fcntl.h>
#include <linux/perf_event.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/mount.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>

#include <fmt/format.h>

#include "recorder/perf/perf_event.h"

namespace flightrec::recorder {

std::string ReadFilePrefix(const std::string& path, size_t max) {
  ScopedFd fd(open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK));
  if (!fd) return "";
  std::string out(max, '\0');
  size_t got = 0;
  while (got < max) {
    ssize_t n = read(fd.get(), out.data() + got, max - got);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    got += static_cast<size_t>(n);
  }
  out.resize(got);
  return out;
}

StatusOr<std::string> TracepointDir(const std::string& system, const std::string& name) {
  const std::string rel = "/events/" + system + "/" + name;
  for (const char* root : {"/sys/kernel/tracing", "/sys/kernel/debug/tracing"}) {
    std::string d = root + rel;
    if (access((d + "/id").c_str(), R_OK) == 0) return d;
  }
  // tracefs is mounted at boot by systemd; a minimal system may lack it.
  if (mount("tracefs", "/sys/kernel/tracing", "tracefs", 0, nullptr) == 0 &&
      access(("/sys/kernel/tracing" + rel + "/id").c_str(), R_OK) == 0) {
    return "/sys/kernel/tracing" + rel;
  }
  return NotFound(
      fmt::format("{}:{} not found (tracefs not mounted, or no such tracepoint)", system, name));
}

std::optional<TracepointField> FindTracepointField(const std::string& format,
                                                   const std::string& name) {
  size_t pos = 0;
  while ((pos = format.find("field:", pos)) != std::string::npos) {
    size_t semi = format.find(';', pos);
    if (semi == std::string::npos) break;
    // "char comm[16]" and "__data_loc char[] comm": the last word, less
    // any array suffix.
    std::string decl = format.substr(pos, semi - pos);
    size_t sp = decl.find_last_of(" \t");
    size_t br = decl.find('[', sp == std::string::npos ? 0 : sp);
    if (br != std::string::npos) decl.resize(br);
    size_t eol = format.find('\n', semi);
    if (eol == std::string::npos) eol = format.size();
    const std::string rest = format.substr(semi, eol - semi);
    size_t off = rest.find("offset:"), size = rest.find("size:");
    pos = semi;
    if (sp == std::string::npos || off == std::string::npos || size == std::string::npos) continue;
    if (decl.substr(sp + 1) != name) continue;
    char* end = nullptr;
    errno = 0;
    unsigned long long o = std::strtoull(rest.c_str() + off + 7, &end, 10);
    if (errno != 0 || end == rest.c_str() + off + 7) return std::nullopt;
    unsigned long long s = std::strtoull(rest.c_str() + size + 5, &end, 10);
    if (errno != 0 || end == rest.c_str() + size + 5) return std::nullopt;
    return TracepointField{static_cast<size_t>(o), static_cast<size_t>(s)};
  }
  return std::nullopt;
}

StatusOr<std::vector<TracepointRing>> OpenTracepointOnCpus(const std::string& dir,
                                                           const char* filter, size_t pages) {
  const uint64_t id = std::strtoull(ReadFilePrefix(dir + "/id", 64).c_str(), nullptr, 10);
  const long page = sysconf(_SC_PAGESIZE);
  std::vector<TracepointRing> rings;
  for (int cpu : perf::OnlineCpus()) {
    perf_event_attr attr{};
    attr.size = sizeof(attr);
    attr.type = PERF_TYPE_TRACEPOINT;
    attr.config = id;
    attr.sample_period = 1;
    attr.sample_type = PERF_SAMPLE_TID | PERF_SAMPLE_TIME | PERF_SAMPLE_RAW;
    attr.use_clockid = 1;
    attr.clockid = CLOCK_MONOTONIC;
    attr.wakeup_events = 1;
    ASSIGN_OR_RETURN(auto fd,
                     perf::OpenPerfEvent(attr, -1, cpu, -1, fmt::format("{} on cpu {}", dir, cpu)));
    if (filter != nullptr) (void)ioctl(fd.get(), PERF_EVENT_IOC_SET_FILTER, filter);
    size_t len = static_cast<size_t>(page) * (1 + pages);
    void* p = mmap(nullptr, len, PROT_READ | PROT_WRITE, MAP_SHARED, fd.get(), 0);
    if (p == MAP_FAILED) return ErrnoStatus(fmt::format("{}: mmap", dir));
    rings.push_back({std::move(fd), ScopedMmap(p, len)});
  }
  return rings;
}

}  // namespace flightrec::recorder
