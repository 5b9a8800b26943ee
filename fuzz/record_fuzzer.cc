// libFuzzer target over the record reader and every query command's decode
// path (scripts/fuzz.sh builds and runs it; see record_decode.h).
#include <fcntl.h>
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <cstdlib>

#include "fuzz/record_decode.h"

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  // The commands print; libFuzzer's own reports go to stderr.
  int devnull = open("/dev/null", O_WRONLY | O_CLOEXEC);
  if (devnull >= 0) dup2(devnull, STDOUT_FILENO);
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  flightrec::fuzz::DecodeRecordBytes(data, size);
  return 0;
}
