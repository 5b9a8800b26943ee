// Replays the fuzz seeds and every input the fuzzers ever crashed on
// (fuzz/regression/, panic regions in fuzz/regression/panic/) through the
// harnesses' entry functions, built with the project's compiler: a regression
// aborts this test even where clang and libFuzzer are not installed.
#include <fcntl.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "fuzz/panic_decode.h"

namespace fs = std::filesystem;

namespace {

std::vector<fs::path> Inputs(const char* sub) {
  const char* src = std::getenv("FLIGHTREC_SOURCE_DIR");
  std::vector<fs::path> out;
  if (src == nullptr) return out;
  for (const auto& e : fs::directory_iterator(fs::path(src) / "fuzz" / sub)) {
    if (e.is_regular_file() && e.path().filename() != "README.md") out.push_back(e.path());
  }
  std::sort(out.begin(), out.end());
  return out;
}

// `decode`: the harness's entry, as the libFuzzer target calls it.
void Replay(
    const std::vector<fs::path>& inputs,
    void (*decode)(const uint8_t*, size_t) = [](const uint8_t* d, size_t n) {
      flightrec::fuzz::DecodeInput(d, n);
    }) {
  int saved = dup(STDOUT_FILENO);
  int devnull = open("/dev/null", O_WRONLY | O_CLOEXEC);
  dup2(devnull, STDOUT_FILENO);
  for (const auto& p : inputs) {
    std::ifstream f(p, std::ios::binary);
    std::stringstream ss;
    ss << f.rdbuf();
    const std::string bytes = ss.str();
    SCOPED_TRACE(p.string());
    // A crash (abort, uncaught exception, segfault) ends the test binary:
    // ctest reports it failed; the name of the input is on stderr.
    fprintf(stderr, "replaying %s\n", p.c_str());
    try {
      decode(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size());
    } catch (const std::exception& e) {
      // In the CLI this would have been an abort (or, since the fix, the
      // last-resort error in RecorderMain): every decoder must return a
      // Status instead.
      fprintf(stderr, "FAILED: %s: uncaught exception: %s\n", p.c_str(), e.what());
      ADD_FAILURE() << p << ": uncaught exception: " << e.what();
    }
  }
  fflush(stdout);
  dup2(saved, STDOUT_FILENO);
  close(saved);
  close(devnull);
}

TEST(FuzzCorpus, SeedsDecode) {
  auto in = Inputs("seeds");
  ASSERT_GE(in.size(), 2u) << "the seed corpus is missing";
  Replay(in);
}

TEST(FuzzCorpus, RegressionsDecodeWithoutCrashing) {
  auto in = Inputs("regression");
  ASSERT_FALSE(in.empty()) << "the regression corpus is missing";
  Replay(in);
}

// panic_fuzzer's corpora, through its entry (DecodePanicRegion).
TEST(FuzzCorpus, PanicRegionsDecodeWithoutCrashing) {
  auto in = Inputs("regression/panic");
  ASSERT_GE(in.size(), 3u) << "the panic regression corpus is missing";
  auto seeds = Inputs("seeds/panic");
  ASSERT_GE(seeds.size(), 2u) << "the panic seed corpus is missing";
  in.insert(in.end(), seeds.begin(), seeds.end());
  Replay(in, flightrec::fuzz::DecodePanicRegion);
}

}  // namespace
