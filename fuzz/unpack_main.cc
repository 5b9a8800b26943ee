// record-fuzz-unpack IN.frec OUT: writes a record in the harness's unpacked
// form (record_decode.h), sections cut to 16 KiB, for the seed corpus.
// record-fuzz-unpack --pack INPUT OUT.frec: the record file the harness
// decodes for a corpus input, to try a finding with the real `recorder`.
#include <cstdio>
#include <fstream>
#include <sstream>
#include <string>

#include "fuzz/record_decode.h"

int main(int argc, char** argv) {
  if (argc == 4 && std::string(argv[1]) == "--pack") {
    std::ifstream in(argv[2], std::ios::binary);
    std::stringstream ss;
    ss << in.rdbuf();
    std::string out = flightrec::fuzz::RecordFileFor(ss.str());
    if (out.empty()) return 1;
    std::ofstream(argv[3], std::ios::binary) << out;
    return 0;
  }
  if (argc != 3) {
    std::fprintf(stderr, "usage: %s IN.frec OUT\n", argv[0]);
    return 2;
  }
  bool ok = false;
  std::string out = flightrec::fuzz::UnpackRecordFile(argv[1], 16 << 10, &ok);
  if (!ok) {
    std::fprintf(stderr, "cannot read %s\n", argv[1]);
    return 1;
  }
  std::ofstream(argv[2], std::ios::binary) << out;
  return 0;
}
