// libFuzzer target over the panic region's parser and the panic record's
// dump builder (DecodePanicRegion): the bytes an earlier boot's kernel left
// in RAM, which recorderd reads as root at start. scripts/fuzz.sh builds and
// runs it beside record_fuzzer, from fuzz/seeds/panic/; its own target so
// that every mutation lands in a region rather than in a record.
#include <cstddef>
#include <cstdint>

#include "fuzz/panic_decode.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  flightrec::fuzz::DecodePanicRegion(data, size);
  return 0;
}
