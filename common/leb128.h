// LEB128, the one implementation: unsigned (protobuf varints, DWARF ULEB128,
// the record event codec) and signed (DWARF SLEB128), DWARF 5 section 7.6.
// Readers are bounded: they never read past `end` and refuse values that do
// not fit 64 bits, since the bytes come from record and ELF files.
#pragma once

#include <cstddef>
#include <cstdint>

namespace flightrec {

// The most bytes one 64-bit value takes.
inline constexpr size_t kMaxUleb128Bytes = 10;

// Writes v at p, which has room for kMaxUleb128Bytes, and returns the end:
// for encoders that fill a buffer sized once instead of appending per byte.
template <typename Byte>
inline Byte* WriteUleb128(Byte* p, uint64_t v) {
  while (v >= 0x80) {
    *p++ = static_cast<Byte>((v & 0x7f) | 0x80);
    v >>= 7;
  }
  *p++ = static_cast<Byte>(v);
  return p;
}

// Appends v; Out is a byte container (std::string, std::vector<uint8_t>).
template <typename Out>
inline void AppendUleb128(Out* out, uint64_t v) {
  typename Out::value_type b[kMaxUleb128Bytes];
  out->insert(out->end(), b, WriteUleb128(b, v));
}

template <typename Out>
inline void AppendSleb128(Out* out, int64_t v) {
  using Byte = typename Out::value_type;
  for (;;) {
    uint8_t b = v & 0x7f;
    v >>= 7;  // arithmetic: the sign is kept
    bool done = (v == 0 && !(b & 0x40)) || (v == -1 && (b & 0x40));
    out->push_back(static_cast<Byte>(b | (done ? 0 : 0x80)));
    if (done) return;
  }
}

// Reads one value from [*p, end) and advances *p past it; false (and *p
// unspecified) when the bytes end first or the value exceeds 64 bits.
inline bool ReadUleb128(const uint8_t** p, const uint8_t* end, uint64_t* v) {
  uint64_t result = 0;
  for (int shift = 0; shift < 64; shift += 7) {
    if (*p >= end) return false;
    uint8_t b = *(*p)++;
    if (shift == 63 && b > 1) return false;  // would overflow 64 bits
    result |= static_cast<uint64_t>(b & 0x7f) << shift;
    if ((b & 0x80) == 0) {
      *v = result;
      return true;
    }
  }
  return false;
}

inline bool ReadSleb128(const uint8_t** p, const uint8_t* end, int64_t* v) {
  uint64_t result = 0;
  int shift = 0;
  uint8_t b = 0;
  do {
    if (*p >= end || shift >= 64) return false;
    b = *(*p)++;
    result |= static_cast<uint64_t>(b & 0x7f) << shift;
    shift += 7;
  } while (b & 0x80);
  if (shift < 64 && (b & 0x40)) result |= ~uint64_t{0} << shift;  // sign-extend
  *v = static_cast<int64_t>(result);
  return true;
}

}  // namespace flightrec
