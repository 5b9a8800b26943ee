// Checked parsing of and access to JSON that came from a file or a peer (a
// record's header, table of contents, meta, metadata, backtrace and config
// sections; the store index's meta column): anyone who can place a file in a
// store, or a crashing program whose name lands in its metadata, controls it. nlohmann's
// value()/get()/at() throw on a missing key or a wrong type, and an uncaught throw aborts the
// process: a hostile record would crash every command that reads it. These accessors never throw: a
// missing key, a value of another type or a number out of the target's range gives the default, and
// containers of the wrong kind read as empty ones.
#pragma once

#include <cstdint>
#include <limits>
#include <string>
#include <string_view>
#include <type_traits>

#include <nlohmann/json.hpp>

#include "common/status.h"
#include "common/terminal_escape.h"

namespace flightrec::json {

using Json = nlohmann::json;

// j[key] when j is an object that has it, else null.
inline const Json& Field(const Json& j, std::string_view key) {
  static const Json kNull;
  if (!j.is_object()) return kNull;
  auto it = j.find(key);
  return it == j.end() ? kNull : *it;
}

// j as a T when it holds a T in range, else def.
template <class T>
T As(const Json& j, T def) {
  if constexpr (std::is_same_v<T, std::string>) {
    return j.is_string() ? j.get_ref<const std::string&>() : def;
  } else if constexpr (std::is_same_v<T, bool>) {
    return j.is_boolean() ? j.get<bool>() : def;
  } else if constexpr (std::is_floating_point_v<T>) {
    return j.is_number() ? j.get<T>() : def;
  } else {
    static_assert(std::is_integral_v<T>);
    if (j.is_number_unsigned()) {
      const uint64_t v = j.get<uint64_t>();
      return v <= static_cast<uint64_t>(std::numeric_limits<T>::max()) ? static_cast<T>(v) : def;
    }
    if (j.is_number_integer()) {
      const int64_t v = j.get<int64_t>();
      if constexpr (std::is_unsigned_v<T>) {
        return v >= 0 && static_cast<uint64_t>(v) <= std::numeric_limits<T>::max()
                   ? static_cast<T>(v)
                   : def;
      } else {
        return v >= std::numeric_limits<T>::min() && v <= std::numeric_limits<T>::max()
                   ? static_cast<T>(v)
                   : def;
      }
    }
    return def;
  }
}

template <class T>
T Get(const Json& j, std::string_view key, T def) {
  return As<T>(Field(j, key), def);
}
inline std::string Str(const Json& j, std::string_view key, std::string def = "") {
  return As<std::string>(Field(j, key), std::move(def));
}
inline std::string Str(const Json& j) { return As<std::string>(j, ""); }

// j[key] when it is an object (array), else an empty one.
inline const Json& Object(const Json& j, std::string_view key) {
  static const Json kEmpty = Json::object();
  const Json& f = Field(j, key);
  return f.is_object() ? f : kEmpty;
}
inline const Json& Array(const Json& j, std::string_view key) {
  static const Json kEmpty = Json::array();
  const Json& f = Field(j, key);
  return f.is_array() ? f : kEmpty;
}

// The bytes of a text field stored as `key` + `key_hex` (terminal_escape.h:
// a crashed program's name, path or argv that is not UTF-8), else Str(j,
// key). Pass the result through EscapeForTerminal before printing it.
inline std::string RawText(const Json& j, std::string_view key) {
  std::string raw;
  if (FromHex(Str(j, std::string(key) + "_hex"), &raw) && !raw.empty()) return raw;
  return Str(j, key);
}

// Sets obj[key] to `raw` as UTF-8, and obj[key_hex] to its bytes when it is
// not UTF-8 (see terminal_escape.h). obj must be an object or null.
inline void SetText(Json& obj, const std::string& key, std::string_view raw) {
  if (IsValidUtf8(raw)) {
    obj[key] = std::string(raw);
  } else {
    obj[key] = ToValidUtf8(raw);
    obj[key + "_hex"] = ToHex(raw);
  }
}

// Why bounds before parsing: nlohmann's parser is iterative, but copying,
// dumping and comparing a value recurse once per level, so a 200 000-deep
// array parsed fine and then overflowed the stack wherever it was copied.
// Deeper than anything flightrec writes (a record's meta is ~5 levels).
inline constexpr size_t kMaxDepth = 64;
// A parsed value costs ~16-64 bytes whatever its text, so a 64 MiB table of
// contents of "[0,0,0,..." would take ~1 GiB: ParseUntrusted bounds the
// number of values too. A dump's meta on a large machine (thousands of
// processes and file cookies) has tens of thousands.
inline constexpr size_t kMaxValues = 1 << 20;

struct Shape {
  size_t depth = 0;   // deepest nesting of arrays/objects
  size_t values = 0;  // upper bound on the number of values (commas + containers + 1)
};
// Scans `text` (brackets and commas outside strings) without parsing it.
Shape Scan(std::string_view text);

// Parses untrusted JSON: refuses nesting deeper than max_depth or more than
// max_values values before any parse, and syntax errors, with a Corrupt
// status naming `what`. Never throws.
StatusOr<Json> ParseUntrusted(std::string_view text, const std::string& what,
                              size_t max_depth = kMaxDepth, size_t max_values = kMaxValues);

// The same for callers that want a value either way: a discarded value
// (is_discarded()) when `text` is not JSON or nests deeper than max_depth
// (the number of values is not bounded here). Never throws.
Json ParseBounded(std::string_view text, size_t max_depth = kMaxDepth);

// dump() throws on strings that are not valid UTF-8 (a process name is
// bytes): those are written with U+FFFD in their place instead.
inline std::string Dump(const Json& j, int indent = -1) {
  return j.dump(indent, ' ', false, Json::error_handler_t::replace);
}

}  // namespace flightrec::json
