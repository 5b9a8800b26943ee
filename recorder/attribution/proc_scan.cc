#include "recorder/attribution/proc_scan.h"

#include <dirent.h>
#include <sys/mman.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>

#include <fmt/format.h>

#include "common/read_file.h"
#include "recorder/attribution/cookie_table.h"

namespace flightrec::recorder::attribution {

std::vector<MmapEvent> MapsEvents(uint32_t pid, const std::string& maps, uint64_t time_ns) {
  std::vector<MmapEvent> out;
  std::istringstream in(maps);
  std::string line;
  while (std::getline(in, line)) {
    // 55d4c0a00000-55d4c0a02000 r-xp 00002000 08:01 1234 /usr/bin/x
    unsigned long long start, endaddr, pgoff, ino;
    unsigned maj, min;
    char perms[8] = {};
    int consumed = 0;
    if (std::sscanf(line.c_str(), "%llx-%llx %7s %llx %x:%x %llu %n", &start, &endaddr, perms,
                    &pgoff, &maj, &min, &ino, &consumed) < 7) {
      continue;
    }
    if (perms[2] != 'x') continue;  // attribution needs executable mappings only
    MmapEvent m;
    m.time_ns = time_ns;
    m.pid = m.tid = pid;
    m.start = start;
    m.len = endaddr - start;
    m.pgoff = pgoff;
    m.maj = maj;
    m.min = min;
    m.ino = ino;
    m.prot = PROT_READ | PROT_EXEC;
    m.filename = consumed > 0 && static_cast<size_t>(consumed) <= line.size()
                     ? line.substr(static_cast<size_t>(consumed))
                     : "";
    if (m.filename.empty()) m.filename = "//anon";
    if (m.filename[0] == '/') m.build_id = ReadBuildId(m.filename);
    out.push_back(std::move(m));
  }
  return out;
}

std::vector<Event> ScanProc(uint64_t time_ns) {
  std::vector<Event> out;
  DIR* d = opendir("/proc");
  if (d == nullptr) return out;
  while (struct dirent* e = readdir(d)) {
    char* end = nullptr;
    long pid = std::strtol(e->d_name, &end, 10);
    if (end == e->d_name || *end != '\0') continue;
    std::ifstream comm_in(fmt::format("/proc/{}/comm", pid));
    std::string comm;
    if (!std::getline(comm_in, comm)) continue;  // gone
    CommEvent c;
    c.time_ns = time_ns;
    c.pid = c.tid = static_cast<uint32_t>(pid);
    c.comm = comm;
    c.exec = true;
    out.push_back(c);
    // Threads named apart from the process (pthread_setname_np) before the
    // daemon started.
    if (DIR* td = opendir(fmt::format("/proc/{}/task", pid).c_str())) {
      while (struct dirent* te = readdir(td)) {
        long tid = std::strtol(te->d_name, &end, 10);
        if (end == te->d_name || *end != '\0' || tid == pid) continue;
        std::ifstream tin(fmt::format("/proc/{}/task/{}/comm", pid, tid));
        CommEvent tc;
        if (!std::getline(tin, tc.comm)) continue;  // gone
        tc.time_ns = time_ns;
        tc.pid = static_cast<uint32_t>(pid);
        tc.tid = static_cast<uint32_t>(tid);
        out.push_back(std::move(tc));
      }
      closedir(td);
    }
    // A process that exits now fails the read (ESRCH): skipped, like one
    // gone before the open. 64 MiB bounds a process with millions of maps.
    auto text = ReadFileToString(fmt::format("/proc/{}/maps", pid), 64 << 20);
    if (!text.ok()) continue;
    for (auto& m : MapsEvents(static_cast<uint32_t>(pid), *text, time_ns)) out.push_back(m);
  }
  closedir(d);
  return out;
}

}  // namespace flightrec::recorder::attribution
