// Records for store tests: options without machine-derived defaults, a small
// record, and hostile record files that pass every checksum.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "store/store.h"

namespace flightrec::store::testing {

// Options for a test store: retention applied only when a test asks, no
// writer threads.
StoreOptions TestOptions();

// Commits a record with an "events" section holding `payload` and a small
// "config" section.
StatusOr<RecordRow> WriteSmallRecord(Store& s, const std::string& payload,
                                     nlohmann::json meta = nlohmann::json::object());

// Builds a record file byte by byte from any header and TOC text, with the
// checksums computed the way RecordWriter computes them, so that a test can
// plant a hostile file that passes every checksum (docs/FORMAT.md, "File
// layout"). `body` goes between the header and the TOC; `header_len`
// overrides the declared header length (0 = the real one).
std::string CraftRecord(const std::string& header_json, const std::string& toc_json,
                        const std::string& body = "", uint32_t header_len = 0);

// `inner` inside `depth` JSON arrays.
std::string Nested(size_t depth, const std::string& inner = "1");

// A valid record header naming `id`.
std::string GoodHeader(const std::string& id);

// Hostile record files, each with valid checksums: name -> bytes. Every one
// of them must be refused (quarantined) by recovery, never crash it.
std::vector<std::pair<std::string, std::string>> HostileRecords();

}  // namespace flightrec::store::testing
