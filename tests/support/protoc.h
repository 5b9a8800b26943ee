// The real protobuf compiler as a test's decoder: `protoc --decode_raw`, and
// `protoc --decode` with a small schema a test writes for the fields it reads
// by name.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "tests/support/run.h"

namespace flightrec::testing {

// `protoc --decode_raw < file`.
RunResult ProtocDecodeRaw(const std::string& file);

// Writes `schema` (a .proto's text) to dir/proto_name, then runs
// `protoc --proto_path=dir --decode=message proto_name < file`.
RunResult ProtocDecode(const std::string& dir, const std::string& proto_name,
                       const std::string& schema, const std::string& file,
                       const std::string& message = "Trace");

// `protoc --proto_path=proto_path --decode=message proto_file < file`: a
// file decoded with a published schema (proto_file relative to proto_path).
RunResult ProtocDecodeWith(const std::string& proto_path, const std::string& proto_file,
                           const std::string& message, const std::string& file);

// protoc's text output as a tree.
struct Node {
  std::string key;
  uint32_t number = 0;  // 0 for a named field
  bool message = false;
  std::string text;  // scalar as printed; strings unescaped
  std::vector<Node> fields;
  uint64_t U() const { return std::stoull(text); }
  int64_t I() const { return std::stoll(text); }
  // The fields numbered n (--decode_raw).
  std::vector<const Node*> All(uint32_t n) const;
  // The one field numbered n; null if there is none or more than one.
  const Node* One(uint32_t n) const;
  // The fields named k (--decode).
  std::vector<const Node*> Named(const std::string& k) const;
  // The one field named k; null if there is none or more than one.
  const Node* Name(const std::string& k) const;
};

// One field of protoc's text output: "N: value" or "N { ... }" (by number,
// --decode_raw), or "name: value" / "name { ... }" (--decode with a schema).
// Throws std::runtime_error on unbalanced braces.
Node ParseText(const std::string& text);

}  // namespace flightrec::testing
