// A minimal protobuf wire-format writer (varints, fixed64, length-delimited
// fields) for the formats we emit: pprof's profile.proto, Perfetto's trace
// protos and OTLP profiles. Hand-written on purpose: those few messages need ~40 lines, while
// protoc-generated code would pull protobuf into the build for them.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "common/leb128.h"
#include "common/terminal_escape.h"

namespace flightrec::recorder::exporter {

class ProtoWriter {
 public:
  void Varint(uint32_t field, uint64_t v) {
    Tag(field, 0);
    Raw(v);
  }
  void Bytes(uint32_t field, std::string_view s) {
    Tag(field, 2);
    Raw(s.size());
    buf_.append(s);
  }
  // A `string` field holding text from a record: protobuf strings are
  // UTF-8, and viewers show them, so it is written as the terminal shows it.
  void Text(uint32_t field, std::string_view s) { Bytes(field, EscapeForTerminal(s)); }
  void Fixed64(uint32_t field, uint64_t v) {
    Tag(field, 1);
    AppendFixed64(&buf_, v);
  }
  // The tag and length of a length-delimited field whose `size` bytes the
  // caller writes after it: a message too large to hold twice is streamed.
  void Header(uint32_t field, uint64_t size) {
    Tag(field, 2);
    Raw(size);
  }
  // A little-endian fixed64, as packed repeated fixed64 fields hold them.
  static void AppendFixed64(std::string* out, uint64_t v) {
    for (int i = 0; i < 8; ++i) out->push_back(static_cast<char>(v >> (8 * i)));
  }
  // A nested message, written by its own ProtoWriter.
  void Message(uint32_t field, const ProtoWriter& m) { Bytes(field, m.buf_); }
  // Packed repeated varints (proto3 default for repeated scalars).
  void Packed(uint32_t field, const std::vector<uint64_t>& vs) {
    ProtoWriter p;
    for (uint64_t v : vs) p.Raw(v);
    Bytes(field, p.buf_);
  }
  const std::string& data() const { return buf_; }
  std::string& mutable_data() { return buf_; }
  void Clear() { buf_.clear(); }

 private:
  void Tag(uint32_t field, uint32_t wire) { Raw((static_cast<uint64_t>(field) << 3) | wire); }
  void Raw(uint64_t v) { AppendUleb128(&buf_, v); }
  std::string buf_;
};

}  // namespace flightrec::recorder::exporter
