#include "recorder/record/crash_record.h"

#include "common/checked_json.h"

namespace flightrec::recorder {

StatusOr<CrashSections> ReadCrashSections(const store::RecordReader& reader) {
  auto section_json = [&](const char* name) -> StatusOr<nlohmann::json> {
    if (!reader.FindSection(name)) return nlohmann::json::object();
    ASSIGN_OR_RETURN(std::string t, reader.ReadSection(name, kMaxCrashSectionBytes));
    auto j = json::ParseBounded(t);
    return j.is_object() ? j : nlohmann::json::object();
  };
  CrashSections c;
  ASSIGN_OR_RETURN(c.metadata, section_json(kCrashSection.metadata));
  ASSIGN_OR_RETURN(c.backtrace, section_json(kCrashSection.backtrace));
  if (reader.FindSection(kCrashSection.maps)) {
    ASSIGN_OR_RETURN(c.maps, reader.ReadSection(kCrashSection.maps, kMaxCrashSectionBytes));
  }
  return c;
}

}  // namespace flightrec::recorder
