#include "recorder/record/mem_growth_section.h"

#include <fmt/format.h>

#include "common/checked_json.h"
#include "recorder/model/event_codec.h"

namespace flightrec::recorder {

std::string EncodeMemGrowth(const std::vector<Sample>& samples) {
  EventEncoder enc;
  for (const auto& s : samples) enc.Add(s);
  return enc.Take();
}

StatusOr<std::vector<Sample>> DecodeMemGrowth(std::string_view events, uint64_t window_start_ns,
                                              uint64_t freeze_ns, const std::string& what) {
  auto bad = [&what](const std::string& msg) {
    return Corrupt(fmt::format("record {}: section 'mem_growth': {}", what, msg));
  };
  std::vector<Sample> out;
  EventDecoder dec(events);
  for (size_t i = 0;; ++i) {
    Event e;
    auto next = dec.Next(&e);
    if (!next.ok())
      return next.status().Annotate(fmt::format("record {}: section 'mem_growth'", what));
    if (!*next) break;
    if (i >= kMaxMemGrowthSamples) {
      return bad(fmt::format("more than {} samples", kMaxMemGrowthSamples));
    }
    auto* s = std::get_if<Sample>(&e);
    if (s == nullptr) return bad(fmt::format("event {} is not a sample", i));
    if (s->time_ns < window_start_ns || s->time_ns > freeze_ns) {
      return bad(fmt::format("sample {} at {} ns is outside the record's window [{}, {}] ns", i,
                             s->time_ns, window_start_ns, freeze_ns));
    }
    if (s->period == 0 || s->period > kMaxFaultsPerSample) {
      return bad(
          fmt::format("sample {} stands for {} faults (1..{})", i, s->period, kMaxFaultsPerSample));
    }
    out.push_back(std::move(*s));
  }
  return out;
}

StatusOr<std::vector<Sample>> LoadMemGrowth(const store::RecordReader& reader,
                                            uint64_t window_start_ns, uint64_t freeze_ns) {
  if (reader.FindSection(kSectionMemGrowth) == nullptr) return std::vector<Sample>{};
  // A frame-pointer sample is a few hundred bytes.
  ASSIGN_OR_RETURN(std::string events, reader.ReadSection(kSectionMemGrowth, 1u << 30));
  return DecodeMemGrowth(events, window_start_ns, freeze_ns, reader.display_name());
}

StatusOr<nlohmann::json> ParseOomSection(std::string_view text, const std::string& what) {
  auto bad = [&what](const std::string& msg) {
    return Corrupt(fmt::format("record {}: section 'oom': {}", what, msg));
  };
  if (text.size() > kMaxOomSectionBytes) {
    return bad(fmt::format("{} bytes, more than {}", text.size(), kMaxOomSectionBytes));
  }
  ASSIGN_OR_RETURN(nlohmann::json j,
                   json::ParseUntrusted(text, fmt::format("record {}: section 'oom'", what)));
  if (!j.is_object() || json::Get<int64_t>(j, "version", 0) != 1) {
    return bad("not a version 1 JSON object");
  }
  const auto& rss = json::Field(j, "rss");
  if (!rss.is_null() && !rss.is_array()) return bad("'rss' is not an array");
  if (rss.is_array() && rss.size() > kMaxRssPointsInRecord) {
    return bad(fmt::format("{} RSS points, more than {}", rss.size(), kMaxRssPointsInRecord));
  }
  return j;
}

StatusOr<nlohmann::json> LoadOomSection(const store::RecordReader& reader) {
  if (reader.FindSection(kSectionOom) == nullptr) return nlohmann::json();
  ASSIGN_OR_RETURN(std::string text, reader.ReadSection(kSectionOom, kMaxOomSectionBytes));
  return ParseOomSection(text, reader.display_name());
}

}  // namespace flightrec::recorder
