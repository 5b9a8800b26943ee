#include "coredump-hook/rate_limit.h"

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <ctime>
#include <sstream>

#include <fmt/format.h>

#include "common/scoped_fd.h"

namespace flightrec::coredump {

std::string ReserveCoreSlot(const HookOptions& o, uid_t uid, const std::string& raw_exe) {
  // The path is the crashed user's to choose: with its control bytes
  // escaped, a newline in it cannot add lines (counts against others).
  // Executables without a path (deeper than PATH_MAX) share one budget per
  // uid: keyed by the comm, a rename would mint a new one. No path is
  // called this (paths start with '/').
  std::string exe;
  for (unsigned char c : raw_exe.empty() ? std::string("(no path)") : raw_exe) {
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

}  // namespace flightrec::coredump
