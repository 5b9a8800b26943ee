// A section larger than memory budgets: 2 GiB streamed through the writer and
// back through the reader, each in a child process whose peak RSS (VmHWM) must
// stay within 64 MiB.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>
#include <xxhash.h>

#include <fstream>
#include <random>

#include "tests/support/files.h"
#include "tests/support/records.h"
#include "tests/support/run.h"

namespace flightrec::store {
namespace {

constexpr uint64_t kSectionBytes = 2ull << 30;
constexpr uint64_t kRssLimitKiB = 64 * 1024;

// A 1 MiB block of compressible text, varied per chunk index so zstd cannot
// reduce the whole stream to back-references of one block.
void FillChunk(std::string* chunk, uint64_t index) {
  std::mt19937 rng(static_cast<unsigned>(index));
  for (size_t i = 0; i < chunk->size();) {
    char c = static_cast<char>('A' + rng() % 26);
    size_t run = 1 + rng() % 12;
    for (size_t j = 0; j < run && i < chunk->size(); ++j) (*chunk)[i++] = c;
  }
}

uint64_t PeakRssKiB() {
  std::ifstream in("/proc/self/status");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("VmHWM:", 0) == 0) return std::stoull(line.substr(6));
  }
  return ~0ull;
}

// Runs fn in a child; returns its exit code (fn's return) — a crash is -1.
template <typename Fn>
int InChild(Fn fn) {
  const int st = flightrec::testing::RunInChild(fn);
  return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

TEST(StoreLargeTest, TwoGiBSectionStreamsInBoundedMemory) {
  flightrec::testing::TempDir d;
  const std::string store = d.path() + "/store";
  const std::string out = d.path() + "/result";
  // Writer child: exit 0 = ok, 1 = error, 2 = RSS over the limit.
  int rc = InChild([&] {
    StoreOptions opts = testing::TestOptions();
    opts.writer.workers = 2;  // the production setting, with zstd's buffers
    auto s = Store::Open(store, opts);
    if (!s.ok()) return 1;
    auto rec = (*s)->BeginRecord("crash");
    if (!rec.ok() || !(*rec)->writer().BeginSection("core").ok()) return 1;
    std::string chunk(1 << 20, '\0');
    XXH3_state_t* h = XXH3_createState();
    XXH3_64bits_reset(h);
    for (uint64_t i = 0; i < kSectionBytes / chunk.size(); ++i) {
      FillChunk(&chunk, i);
      XXH3_64bits_update(h, chunk.data(), chunk.size());
      if (!(*rec)->writer().Write(chunk).ok()) return 1;
    }
    if (!(*rec)->writer().EndSection().ok()) return 1;
    if (!(*rec)->writer().AddSection("events", "small").ok()) return 1;
    auto row = (*s)->Commit(std::move(*rec), {});
    if (!row.ok()) return 1;
    std::ofstream(out) << row->id << " " << XXH3_64bits_digest(h) << " " << PeakRssKiB();
    XXH3_freeState(h);
    return PeakRssKiB() <= kRssLimitKiB ? 0 : 2;
  });
  std::string id;
  uint64_t digest = 0, writer_rss = 0;
  std::ifstream(out) >> id >> digest >> writer_rss;
  ASSERT_EQ(rc, 0) << "writer peak RSS " << writer_rss << " KiB (limit " << kRssLimitKiB << ")";
  RecordProperty("writer_peak_rss_kib", std::to_string(writer_rss));
  std::printf("writer peak RSS: %lu KiB\n", static_cast<unsigned long>(writer_rss));

  // Reader child: streams the section back, checks content and its own RSS.
  rc = InChild([&] {
    auto s = Store::Open(store, testing::TestOptions());
    if (!s.ok()) return 1;
    auto r = (*s)->OpenRecord(id);
    if (!r.ok()) return 1;
    if ((*r)->sections()[0].raw_size != kSectionBytes) return 1;
    if ((*r)->sections()[0].frames.size() < 2) return 1;  // seekable frames
    auto sec = (*r)->OpenSection("core");
    if (!sec.ok()) return 1;
    std::vector<char> buf(1 << 20);
    XXH3_state_t* h = XXH3_createState();
    XXH3_64bits_reset(h);
    for (;;) {
      auto n = (*sec)->Read(buf.data(), buf.size());
      if (!n.ok()) return 1;
      if (*n == 0) break;
      XXH3_64bits_update(h, buf.data(), *n);
    }
    bool same = XXH3_64bits_digest(h) == digest;
    XXH3_freeState(h);
    std::printf("reader peak RSS: %lu KiB\n", static_cast<unsigned long>(PeakRssKiB()));
    std::fflush(stdout);
    if (!same) return 3;
    return PeakRssKiB() <= kRssLimitKiB ? 0 : 2;
  });
  EXPECT_EQ(rc, 0) << "reader failed (1 = error, 2 = RSS over limit, 3 = content differs)";
}

}  // namespace
}  // namespace flightrec::store
