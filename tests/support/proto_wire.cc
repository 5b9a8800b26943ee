#include "tests/support/proto_wire.h"

namespace flightrec::testing {

bool ParseWire(const std::string& msg, std::vector<WireField>* out) {
  size_t i = 0;
  auto varint = [&](uint64_t* v) {
    *v = 0;
    for (int shift = 0; i < msg.size() && shift < 64; shift += 7) {
      uint8_t b = static_cast<uint8_t>(msg[i++]);
      *v |= uint64_t{b & 0x7fu} << shift;
      if (!(b & 0x80)) return true;
    }
    return false;
  };
  out->clear();
  while (i < msg.size()) {
    uint64_t tag;
    if (!varint(&tag)) return false;
    WireField f;
    f.number = static_cast<uint32_t>(tag >> 3);
    if ((tag & 7) == 0) {
      if (!varint(&f.varint)) return false;
    } else if ((tag & 7) == 1) {  // fixed64, little-endian
      if (msg.size() - i < 8) return false;
      for (int k = 0; k < 8; ++k) f.varint |= uint64_t{static_cast<uint8_t>(msg[i + k])} << (8 * k);
      i += 8;
    } else if ((tag & 7) == 2) {
      uint64_t len;
      if (!varint(&len) || len > msg.size() - i) return false;
      f.bytes = msg.substr(i, len);
      i += len;
    } else {
      return false;
    }
    out->push_back(std::move(f));
  }
  return true;
}

}  // namespace flightrec::testing
