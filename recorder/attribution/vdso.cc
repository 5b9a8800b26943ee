#include "recorder/attribution/vdso.h"

#include <sys/auxv.h>

#include <cstdio>
#include <fstream>

#include "recorder/elf/build_id.h"
#include "recorder/elf/elf_handle.h"

namespace flightrec::recorder::attribution {

StatusOr<std::string> ReadOwnVdso() {
  // The mapping's extent from /proc/self/maps: AT_SYSINFO_EHDR gives only its
  // start.
  const uint64_t base = getauxval(AT_SYSINFO_EHDR);
  if (base == 0) return NotFound("this kernel maps no vDSO");
  std::ifstream maps("/proc/self/maps");
  std::string line;
  while (std::getline(maps, line)) {
    unsigned long long start = 0, end = 0;
    if (line.find("[vdso]") == std::string::npos ||
        std::sscanf(line.c_str(), "%llx-%llx", &start, &end) != 2 || start != base ||
        end <= start || end - start > kMaxVdsoBytes) {
      continue;
    }
    // Our own mapping, readable (r-xp) and never unmapped while we run.
    return std::string(reinterpret_cast<const char*>(start), end - start);
  }
  return NotFound("no [vdso] mapping in /proc/self/maps");
}

std::string VdsoBuildId(const std::string& image) {
  std::string copy = image;  // elf_memory wants a writable buffer
  elf::ElfPtr e = elf::ElfFromMemory(&copy);
  return e ? elf::HexBuildId(elf::BuildIdOf(e.get())) : "";
}

}  // namespace flightrec::recorder::attribution
