// The sections of an `oom` record besides a death record's (docs/FORMAT.md,
// "Records of kind oom"): `oom`, JSON with the kernel's figures, the memory
// cgroup's and the victim's RSS over the window; and `mem_growth`, the
// victim's sampled memory growth (page-fault samples with their call chains)
// in the events encoding, attributed at replay with the record's mappings.
// Records are hostile input: decoding bounds the count and refuses samples
// outside the record's window or standing for absurd growth.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "common/status.h"
#include "recorder/model/events.h"
#include "store/record_file.h"

namespace flightrec::recorder {

inline constexpr const char* kSectionOom = "oom";
inline constexpr const char* kSectionMemGrowth = "mem_growth";

// Samples a record may hold (rings of 256 KiB per CPU hold ~1 500 each).
inline constexpr size_t kMaxMemGrowthSamples = 1u << 20;
// Faults one sample may stand for.
inline constexpr uint64_t kMaxFaultsPerSample = 1u << 20;
// RSS points a record may hold, and JSON bytes of section `oom`.
inline constexpr size_t kMaxRssPointsInRecord = 4096;
inline constexpr size_t kMaxOomSectionBytes = 1u << 20;

std::string EncodeMemGrowth(const std::vector<Sample>& samples);

// Decodes section `mem_growth`; every sample within [window_start_ns,
// freeze_ns] with a period of 1..kMaxFaultsPerSample. `what` names the record.
StatusOr<std::vector<Sample>> DecodeMemGrowth(std::string_view events, uint64_t window_start_ns,
                                              uint64_t freeze_ns, const std::string& what);

// Reads and decodes a record's `mem_growth` (empty without it).
StatusOr<std::vector<Sample>> LoadMemGrowth(const store::RecordReader& reader,
                                            uint64_t window_start_ns, uint64_t freeze_ns);

// Section `oom` of a record, checked: a JSON object of version 1 within
// kMaxOomSectionBytes whose `rss` holds at most kMaxRssPointsInRecord
// points; null without the section; Corrupt naming what is wrong.
StatusOr<nlohmann::json> LoadOomSection(const store::RecordReader& reader);
// The same checks on the section's bytes (for tests and the fuzzer).
StatusOr<nlohmann::json> ParseOomSection(std::string_view text, const std::string& what);

}  // namespace flightrec::recorder
