// Text from a record (a crashed program's name, argv, exe path, a symbol
// name from its binary) is attacker-controlled: printed raw, an ESC/CSI/OSC
// sequence in it would drive the reader's terminal (retitle it, hide lines,
// fake output, on some terminals write files). Every human-readable output
// passes such text through EscapeForTerminal first, as coredumpctl and ls do;
// --json output is escaped by the JSON writer instead.
#pragma once

#include <string>
#include <string_view>

namespace flightrec {

// Returns `s` with every byte that could act on a terminal spelled out:
//   \n \r \t \\ as those two characters; other C0 controls and DEL as \xNN;
//   C1 controls (U+0080..U+009F, which some terminals obey like ESC+char)
//   and Unicode bidi/line/paragraph controls (U+2028..U+202E, U+2066..U+2069)
//   as \uNNNN; bytes that are not valid UTF-8 (stray continuation bytes,
//   overlong forms, surrogates, truncated sequences) as \xNN, one per byte.
// Printable ASCII and valid UTF-8 text pass unchanged, so ordinary names read
// as before. The result contains no byte below 0x20 and no 0x7f.
std::string EscapeForTerminal(std::string_view s);

// Text a crashed program chooses (its name, exe path, argv, cwd) is bytes,
// not UTF-8, and JSON strings must be UTF-8 (nlohmann's dump() throws on
// anything else). flightrec stores such a string losslessly as two fields:
// `key` with every byte that is not valid UTF-8 replaced by U+FFFD (readable,
// searchable), and, only when a byte was replaced, `key_hex` with all of the
// original bytes in lowercase hex. Readers that show the text take the bytes
// from `key_hex` when it is there (RawText in checked_json.h).
bool IsValidUtf8(std::string_view s);
// `s` with each byte that is not part of a valid UTF-8 sequence as U+FFFD.
std::string ToValidUtf8(std::string_view s);
// Lowercase hex of every byte; FromHex is its inverse (false on anything
// that is not an even number of hex digits).
std::string ToHex(std::string_view s);
bool FromHex(std::string_view hex, std::string* out);

}  // namespace flightrec
