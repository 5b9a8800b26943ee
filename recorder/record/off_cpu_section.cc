#include "recorder/record/off_cpu_section.h"

#include <cctype>

#include <fmt/format.h>

#include "common/checked_json.h"
#include "recorder/model/event_codec.h"

namespace flightrec::recorder {

OffCpuSections EncodeOffCpu(const std::vector<OffCpuInterval>& intervals, int64_t threshold_ns) {
  EventEncoder enc;
  std::string states;
  states.reserve(intervals.size());
  for (const auto& iv : intervals) {
    enc.Add(iv.sample);
    // Upper case: the thread ran again; lower case: still blocked at the freeze.
    states.push_back(iv.ongoing ? static_cast<char>(std::tolower(iv.state)) : iv.state);
  }
  nlohmann::json info = {
      {"version", 1}, {"threshold_ns", threshold_ns}, {"states", std::move(states)}};
  return {enc.Take(), json::Dump(info)};
}

StatusOr<OffCpuRecord> DecodeOffCpu(std::string_view events, std::string_view info_text,
                                    uint64_t freeze_ns, const std::string& what) {
  auto bad = [&what](const std::string& msg) {
    return Corrupt(fmt::format("record {}: off-CPU sections: {}", what, msg));
  };
  nlohmann::json info = json::ParseBounded(info_text);
  if (!info.is_object() || json::Get<int64_t>(info, "version", 0) != 1) {
    return bad("section 'off_cpu_info' is not a version 1 JSON object");
  }
  const std::string states = json::Str(info, "states");
  if (states.size() > kMaxOffCpuIntervals) {
    return bad(fmt::format("{} intervals, more than a record may hold ({})", states.size(),
                           kMaxOffCpuIntervals));
  }
  OffCpuRecord r;
  r.present = true;
  r.threshold_ns = json::Get<int64_t>(info, "threshold_ns", 0);
  EventDecoder dec(events);
  for (size_t i = 0;; ++i) {
    Event e;
    auto next = dec.Next(&e);
    if (!next.ok())
      return next.status().Annotate(fmt::format("record {}: section 'off_cpu'", what));
    if (!*next) {
      if (i != states.size()) {
        return bad(fmt::format("{} intervals but {} states", i, states.size()));
      }
      break;
    }
    auto* s = std::get_if<Sample>(&e);
    if (s == nullptr) return bad(fmt::format("event {} is not a sample", i));
    if (i >= states.size())
      return bad(fmt::format("more intervals than the {} states", states.size()));
    const char st = states[i];
    if (st != 'S' && st != 'D' && st != 's' && st != 'd') {
      return bad(fmt::format("interval {}: state {:#x} is not S, D, s or d", i,
                             static_cast<unsigned char>(st)));
    }
    // The interval ends at its switch-in, at the latest at the freeze.
    if (freeze_ns == 0 || s->time_ns > freeze_ns || s->period > freeze_ns - s->time_ns) {
      return bad(fmt::format(
          "interval {} (tid {}) lasts {} ns from {} ns, past the record's freeze time {} ns", i,
          s->tid, s->period, s->time_ns, freeze_ns));
    }
    OffCpuInterval iv;
    iv.sample = std::move(*s);
    iv.state = static_cast<char>(std::toupper(st));
    iv.ongoing = st == 's' || st == 'd';
    r.intervals.push_back(std::move(iv));
  }
  return r;
}

StatusOr<OffCpuRecord> LoadOffCpu(const store::RecordReader& reader, uint64_t freeze_ns) {
  const bool has_events = reader.FindSection(kSectionOffCpu) != nullptr;
  const bool has_info = reader.FindSection(kSectionOffCpuInfo) != nullptr;
  if (!has_events && !has_info) return OffCpuRecord{};
  if (!has_events || !has_info) {
    return Corrupt(fmt::format("record {}: has only one of sections 'off_cpu' and 'off_cpu_info'",
                               reader.display_name()));
  }
  // A few hundred bytes per interval at most (a DWARF stack copy ~8 KiB).
  ASSIGN_OR_RETURN(std::string events, reader.ReadSection(kSectionOffCpu, 1u << 30));
  ASSIGN_OR_RETURN(std::string info, reader.ReadSection(kSectionOffCpuInfo, 16u << 20));
  return DecodeOffCpu(events, info, freeze_ns, reader.display_name());
}

}  // namespace flightrec::recorder
