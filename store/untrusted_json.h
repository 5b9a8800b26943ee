// JSON from record files is attacker-controlled (anyone who can place a file
// in a store, or a crashing program whose name lands in its metadata): these
// helpers parse it with a depth bound and read fields without ever throwing.
//
// Why a depth bound before parsing: nlohmann's parser is iterative, but
// copying, dumping and comparing a value recurse, so a 200 000-deep array
// parsed fine and then overflowed the stack wherever it was copied.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "common/status.h"

namespace flightrec::store {

// Deeper than anything flightrec writes (meta is at most ~5 levels).
inline constexpr size_t kMaxJsonDepth = 64;
// A parsed value costs ~16-64 bytes whatever its text, so a 64 MiB TOC of
// "[0,0,0,..." would take ~1 GiB: the number of values is bounded too. A
// dump's meta on a large machine (thousands of processes and file cookies)
// has tens of thousands.
inline constexpr size_t kMaxJsonValues = 1 << 20;

struct JsonShape {
  size_t depth = 0;   // deepest nesting of arrays/objects
  size_t values = 0;  // upper bound on the number of values (commas + containers + 1)
};
// Scans `text` (brackets and commas outside strings) without parsing it.
JsonShape ScanJson(std::string_view text);

// Parses untrusted JSON: refuses nesting deeper than max_depth or more than
// max_values values before any parse, and syntax errors, with a Corrupt
// status naming `what`.
StatusOr<nlohmann::json> ParseUntrustedJson(std::string_view text, const std::string& what,
                                            size_t max_depth = kMaxJsonDepth,
                                            size_t max_values = kMaxJsonValues);

// Checked field reads: the default when `o` is not an object, the key is
// absent, or the value has another type (never a nlohmann type_error).
int64_t JsonInt(const nlohmann::json& o, const char* key, int64_t def = 0);
std::string JsonStr(const nlohmann::json& o, const char* key, const std::string& def = "");
bool JsonBool(const nlohmann::json& o, const char* key, bool def);
// o[key] when o is an object holding an object there, else an empty object.
const nlohmann::json& JsonObj(const nlohmann::json& o, const char* key);

}  // namespace flightrec::store
