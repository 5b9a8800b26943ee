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

// Returns the maximum nesting depth of `text` as JSON, scanning brackets
// outside strings; stops early once `limit` is exceeded (returns limit + 1).
size_t JsonNestingDepth(std::string_view text, size_t limit);

// Parses untrusted JSON: refuses nesting deeper than max_depth before any
// parse, and syntax errors, with a Corrupt status naming `what`.
StatusOr<nlohmann::json> ParseUntrustedJson(std::string_view text, const std::string& what,
                                            size_t max_depth = kMaxJsonDepth);

// Checked field reads: the default when `o` is not an object, the key is
// absent, or the value has another type (never a nlohmann type_error).
int64_t JsonInt(const nlohmann::json& o, const char* key, int64_t def = 0);
std::string JsonStr(const nlohmann::json& o, const char* key, const std::string& def = "");
bool JsonBool(const nlohmann::json& o, const char* key, bool def);
// o[key] when o is an object holding an object there, else an empty object.
const nlohmann::json& JsonObj(const nlohmann::json& o, const char* key);

}  // namespace flightrec::store
