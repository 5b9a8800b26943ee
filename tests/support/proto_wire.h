// A minimal reader of the protobuf wire format, for tests that check an
// export's bytes field by field (pprof, Perfetto) without its schema.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace flightrec::testing {

// One field of a message: its number and a varint (wire type 0; fixed64,
// wire type 1, is read into it too) or bytes (wire type 2) value.
struct WireField {
  uint32_t number = 0;
  uint64_t varint = 0;
  std::string bytes;
};

// The fields of `msg` in order into *out; false (with *out partial) on a
// truncated varint, a length past the end, or another wire type.
bool ParseWire(const std::string& msg, std::vector<WireField>* out);

}  // namespace flightrec::testing
