#include "tests/support/protoc.h"

#include <fstream>

namespace flightrec::testing {

// The files are arguments of the shell, never part of its script.
RunResult ProtocDecodeRaw(const std::string& file) {
  return RunCommand({"/bin/sh", "-c", "exec /usr/bin/protoc --decode_raw < \"$1\"", "sh", file});
}

RunResult ProtocDecode(const std::string& dir, const std::string& proto_name,
                       const std::string& schema, const std::string& file,
                       const std::string& message) {
  std::ofstream(dir + "/" + proto_name) << schema;
  return RunCommand({"/bin/sh", "-c",
                     "exec /usr/bin/protoc --proto_path=\"$1\" --decode=\"$2\" \"$3\" < \"$4\"",
                     "sh", dir, message, proto_name, file});
}

}  // namespace flightrec::testing
