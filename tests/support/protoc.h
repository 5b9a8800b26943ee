// The real protobuf compiler as a test's decoder: `protoc --decode_raw`, and
// `protoc --decode` with a small schema a test writes for the fields it reads
// by name.
#pragma once

#include <string>

#include "tests/support/run.h"

namespace flightrec::testing {

// `protoc --decode_raw < file`.
RunResult ProtocDecodeRaw(const std::string& file);

// Writes `schema` (a .proto's text) to dir/proto_name, then runs
// `protoc --proto_path=dir --decode=message proto_name < file`.
RunResult ProtocDecode(const std::string& dir, const std::string& proto_name,
                       const std::string& schema, const std::string& file,
                       const std::string& message = "Trace");

}  // namespace flightrec::testing
