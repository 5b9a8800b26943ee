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

}  // namespace flightrec
