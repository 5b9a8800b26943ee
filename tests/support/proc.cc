#include "tests/support/proc.h"

#include <sstream>

#include "tests/support/files.h"

namespace flightrec::testing {

std::string StatusField(pid_t pid, const std::string& name) {
  std::istringstream in(ReadFile("/proc/" + std::to_string(pid) + "/status"));
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind(name + ":", 0) == 0) {
      std::string v = line.substr(name.size() + 1);
      v.erase(0, v.find_first_not_of(" \t"));
      return v;
    }
  }
  return "";
}

uint64_t CpuTicks(pid_t pid) {
  const std::string s = ReadFile("/proc/" + std::to_string(pid) + "/stat");
  const size_t paren = s.rfind(')');
  if (paren == std::string::npos || paren + 2 > s.size()) return 0;
  // Fields after the command name (which may hold spaces and parentheses)
  // start at field 3, the state.
  std::istringstream rest(s.substr(paren + 2));
  std::string field;
  uint64_t utime = 0, stime = 0;
  for (int i = 3; i <= 15 && rest >> field; ++i) {
    if (i == 14) utime = std::stoull(field);
    if (i == 15) stime = std::stoull(field);
  }
  return utime + stime;
}

}  // namespace flightrec::testing
