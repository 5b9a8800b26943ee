// The crash record's sections as the query commands read them (the coredump
// hook writes them: coredump-hook/). Each is optional; a JSON section that is
// not valid JSON, or not an object, reads as empty rather than failing, so a
// damaged record still shows what it has.
#pragma once

#include <cstdint>
#include <string>

#include <nlohmann/json.hpp>

#include "common/status.h"
#include "recorder/record/sections.h"
#include "store/record_file.h"

namespace flightrec::recorder {

// A crash record's section names: the core, the hook's /proc read, the
// process's maps and the unwound threads.
struct CrashSectionNames {
  const char* core = "core";
  const char* metadata = "metadata";
  const char* maps = "maps";
  const char* backtrace = "backtrace";
};
inline constexpr CrashSectionNames kCrashSection{};

// A crash section above this is refused before it is read (record files are
// hostile): the metadata of 10^5 threads is far smaller.
inline constexpr uint64_t kMaxCrashSectionBytes = 64ull << 20;

struct CrashSections {
  nlohmann::json metadata = nlohmann::json::object();   // section `metadata`
  nlohmann::json backtrace = nlohmann::json::object();  // section `backtrace`
  std::string maps;                                     // section `maps` (text)
};

StatusOr<CrashSections> ReadCrashSections(const store::RecordReader& reader);

}  // namespace flightrec::recorder
