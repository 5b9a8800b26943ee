// libFuzzer target over the record reader and every query command's decode
// path (scripts/fuzz.sh builds and runs it; see record_decode.h).
#include <fcntl.h>
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <cstdlib>

#include "fuzz/panic_decode.h"

namespace {
// FLIGHTREC_FUZZ_EVERY_VARIANT=1 (scripts/fuzz.sh's corpus replay): every
// output variant of every command per input, as fuzz_corpus_test does.
bool every_variant = false;
}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  const char* every = std::getenv("FLIGHTREC_FUZZ_EVERY_VARIANT");
  every_variant = every != nullptr && every[0] == '1';
  // The commands print; libFuzzer's own reports go to stderr.
  int devnull = open("/dev/null", O_WRONLY | O_CLOEXEC);
  if (devnull >= 0) dup2(devnull, STDOUT_FILENO);
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  // While fuzzing, one output variant per command group per input (exec/s).
  flightrec::fuzz::DecodeInput(data, size, every_variant);
  return 0;
}
