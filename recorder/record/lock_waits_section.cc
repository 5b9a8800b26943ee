#include "recorder/record/lock_waits_section.h"

#include <fmt/format.h>

#include "common/checked_json.h"

namespace flightrec::recorder {

nlohmann::json LockWaitsOf(const nlohmann::json& waits, const std::set<uint32_t>& pids) {
  nlohmann::json out = nlohmann::json::array();
  if (!waits.is_array()) return out;
  for (const auto& w : waits) {
    if (pids.count(json::Get<uint32_t>(w, "pid", 0))) out.push_back(w);
  }
  return out;
}

StatusOr<std::vector<RecordedLockWait>> DecodeLockWaits(std::string_view bytes,
                                                        const std::string& what) {
  std::vector<RecordedLockWait> out;
  if (bytes.empty()) return out;
  ASSIGN_OR_RETURN(nlohmann::json j, json::ParseUntrusted(bytes, what + ": section lock_waits"));
  if (!j.is_array()) return Corrupt(what + ": section lock_waits is not an array");
  if (j.size() > kMaxRecordedLockWaits) {
    return Corrupt(fmt::format("{}: section lock_waits holds {} entries (at most {})", what,
                               j.size(), kMaxRecordedLockWaits));
  }
  for (size_t i = 0; i < j.size(); ++i) {
    const auto& e = j[i];
    RecordedLockWait w;
    w.pid = json::Get<uint32_t>(e, "pid", 0);
    w.tid = json::Get<uint32_t>(e, "tid", 0);
    w.owner = json::Get<uint32_t>(e, "owner", kMaxTid + 1);
    w.out_ns = json::Get<uint64_t>(e, "out_ns", 0);
    w.end_ns = json::Get<uint64_t>(e, "end_ns", 0);
    w.mutex = json::Get<uint64_t>(e, "mutex", 0);
    w.owner_in_process = json::Get<bool>(e, "owner_in_process", false);
    if (!e.is_object() || w.pid == 0 || w.pid > kMaxTid || w.tid == 0 || w.tid > kMaxTid ||
        w.owner > kMaxTid || w.mutex == 0 || (w.end_ns != 0 && w.end_ns < w.out_ns)) {
      return Corrupt(fmt::format("{}: section lock_waits: entry {} is malformed", what, i));
    }
    out.push_back(w);
  }
  return out;
}

StatusOr<std::vector<RecordedLockWait>> LoadLockWaits(const store::RecordReader& reader) {
  if (reader.FindSection(kSectionLockWaits) == nullptr) return std::vector<RecordedLockWait>{};
  // ~200 bytes an entry.
  ASSIGN_OR_RETURN(std::string bytes, reader.ReadSection(kSectionLockWaits, 32u << 20));
  return DecodeLockWaits(bytes, reader.display_name());
}

}  // namespace flightrec::recorder
