// Unit tests of the perf.data encoding (perf_data.cc) on hand-made samples:
// the file is parsed back by the layout perf's header.c reads. That perf
// itself reads the file is tests/export/perf_data_test.cc.
#include "recorder/export/perf_data.h"
#include "recorder/attribution/vdso.h"

#include <gtest/gtest.h>
#include <linux/perf_event.h>
#include <unistd.h>

#include <cstring>
#include <sstream>

#include "recorder/attribution/vdso.h"
#include "recorder/export/export.h"

namespace flightrec::recorder::exporter::perfdata {
namespace {

template <typename T>
T At(const std::string& s, size_t off) {
  T v{};
  EXPECT_LE(off + sizeof(T), s.size());
  if (off + sizeof(T) <= s.size()) std::memcpy(&v, s.data() + off, sizeof(T));
  return v;
}

TEST(PerfDataTest, HeaderStringsArePaddedToNameAlign) {
  Buf b;
  b.HeaderString("host");
  ASSERT_EQ(b.size(), 4u + 64u);
  EXPECT_EQ(At<uint32_t>(b.data(), 0), 64u);  // the length counts the padding
  EXPECT_EQ(b.data().substr(4, 5), std::string("host\0", 5));
  Buf c;
  c.Str("12345678", 8);  // the NUL needs another 8 bytes
  EXPECT_EQ(c.size(), 16u);
}

TEST(PerfDataTest, BuildIdsAreHexOfAtMostTwentyBytes) {
  EXPECT_EQ(BuildIdBytes("00ff10"), std::string("\x00\xff\x10", 3));
  EXPECT_EQ(BuildIdBytes("ABcd"), "\xab\xcd");
  EXPECT_EQ(BuildIdBytes(""), "");
  EXPECT_EQ(BuildIdBytes("abc"), "");                 // odd length
  EXPECT_EQ(BuildIdBytes("zz"), "");                  // not hex
  EXPECT_EQ(BuildIdBytes(std::string(42, 'a')), "");  // 21 bytes
  EXPECT_EQ(BuildIdBytes(std::string(40, 'a')).size(), 20u);
}

TEST(PerfDataTest, EventsMapToTheirAttrAndOddOnesAreRefused) {
  auto clock = AttrForEvent("cpu-clock", 1000);
  ASSERT_TRUE(clock.ok());
  EXPECT_EQ(clock->type, uint32_t{PERF_TYPE_SOFTWARE});
  EXPECT_EQ(clock->config, uint64_t{PERF_COUNT_SW_CPU_CLOCK});
  EXPECT_EQ(clock->period, 1'000'000u);
  auto cycles = AttrForEvent("cycles", 99);
  ASSERT_TRUE(cycles.ok());
  EXPECT_EQ(cycles->type, uint32_t{PERF_TYPE_HARDWARE});
  EXPECT_EQ(cycles->freq, 99u);
  auto raw = AttrForEvent("type 4 config 192 period 5000", 0);
  ASSERT_TRUE(raw.ok());
  EXPECT_EQ(raw->type, 4u);
  EXPECT_EQ(raw->config, 192u);
  EXPECT_EQ(raw->period, 5000u);
  EXPECT_FALSE(AttrForEvent("type 4 config 192 period 5000 --evil", 0).ok());
  auto odd = AttrForEvent("\x1b[2Jbogus", 0);
  ASSERT_FALSE(odd.ok());
  EXPECT_EQ(odd.status().message().find('\x1b'), std::string::npos);  // escaped
}

TEST(PerfDataTest, KallsymsAddressFindsTheCoreKernelsSymbol) {
  char path[] = "/tmp/perf_data_unittest.XXXXXX";
  int fd = mkstemp(path);
  ASSERT_GE(fd, 0);
  const std::string text =
      "0000000000000000 A fixed_percpu_data\n"
      "ffffffffc0001000 t _text\t[some_module]\n"
      "ffffffff81000000 T _text\n"
      "ffffffff81000000 T _stext\n";
  ASSERT_EQ(write(fd, text.data(), text.size()), static_cast<ssize_t>(text.size()));
  close(fd);
  EXPECT_EQ(KallsymsAddress(path, "_text"), 0xffffffff81000000u);
  EXPECT_EQ(KallsymsAddress(path, "_etext"), 0u);
  EXPECT_EQ(KallsymsAddress("/nonexistent", "_text"), 0u);
  unlink(path);
}

TEST(PerfDataTest, FileAttrIsVersionSevenWithTheSampleType) {
  auto a = AttrForEvent("cpu-clock", 1000);
  ASSERT_TRUE(a.ok());
  std::string fa = FileAttr(*a);
  ASSERT_EQ(fa.size(), kAttrSize + 16u);
  perf_event_attr attr{};
  std::memcpy(&attr, fa.data(), kAttrSize);
  EXPECT_EQ(attr.size, kAttrSize);
  EXPECT_EQ(attr.sample_type,
            uint64_t{PERF_SAMPLE_IP | PERF_SAMPLE_TID | PERF_SAMPLE_TIME | PERF_SAMPLE_CPU |
                     PERF_SAMPLE_PERIOD | PERF_SAMPLE_CALLCHAIN});
  EXPECT_EQ(attr.sample_id_all, 1u);
  EXPECT_EQ(attr.sample_period, 1'000'000u);
}

// Two samples of one thread in /bin/x (build-id 0102...), the second with a
// kernel frame, exported and walked record by record.
struct Exported {
  attribution::CookieTable cookies;
  std::vector<attribution::AttributedSample> samples;
  attribution::Symbol sym;
  std::vector<const attribution::Symbol*> stack;
  std::string boot_id, vdso_build_id;  // the record's
  Exported() {
    MmapEvent m;
    m.filename = "/bin/x";
    for (char c = 1; c <= 20; ++c) m.build_id += c;  // raw bytes, as mmap events hold them
    m.ino = 7;
    uint32_t cookie = cookies.Intern(m);
    sym.function = "f";
    stack = {&sym};
    for (int i = 0; i < 2; ++i) {
      attribution::AttributedSample s;
      s.time_ns = 1000 + i;
      s.pid = 10;
      s.tid = 11;
      s.cpu = 3;
      s.period = 250;
      s.comm = "worker-one";
      if (i == 1) s.frames.push_back({true, 0, 0xffffffff81000010ull, ""});
      s.frames.push_back({false, cookie, 0x1234, ""});
      s.frames.push_back({false, cookie, 0x1100, ""});
      samples.push_back(s);
    }
  }
  StatusOr<std::string> Run(const std::string& event = "cpu-clock",
                            std::vector<std::string>* notes = nullptr) {
    auto ex = MakeExporter("perf");
    if (!ex.ok()) return ex.status();
    std::ostringstream out;
    analysis::RecordInfo info;
    info.id = "r";
    info.host = "box";
    info.kernel = "6.1.0";
    info.config = {{"backend", {{"event", event}, {"frequency_hz", 1000}}}};
    info.boot_id = boot_id;
    info.vdso_build_id = vdso_build_id;
    (*ex)->Begin(info, &out);
    for (const auto& s : samples) (*ex)->Add(analysis::ResolvedSample{&s, stack, 0, &cookies});
    RETURN_IF_ERROR((*ex)->Finish());
    if (notes) *notes = (*ex)->Notes();
    return out.str();
  }
};

TEST(PerfDataTest, FileHasHeaderAttrRecordsAndBuildIdTable) {
  Exported e;
  auto file = e.Run();
  ASSERT_TRUE(file.ok()) << file.status().message();
  const std::string& f = *file;
  ASSERT_GE(f.size(), kFileHeaderSize);
  EXPECT_EQ(f.substr(0, 8), "PERFILE2");
  EXPECT_EQ(At<uint64_t>(f, 8), kFileHeaderSize);
  EXPECT_EQ(At<uint64_t>(f, 16), kAttrSize + 16u);
  EXPECT_EQ(At<uint64_t>(f, 24), kFileHeaderSize);  // attrs offset
  EXPECT_EQ(At<uint64_t>(f, 32), kAttrSize + 16u);  // one attr
  const uint64_t data_at = At<uint64_t>(f, 40), data_size = At<uint64_t>(f, 48);
  ASSERT_EQ(data_at, kFileHeaderSize + kAttrSize + 16);
  const uint64_t bits = At<uint64_t>(f, 72);
  EXPECT_EQ(bits,
            (1u << 2) | (1u << 3) | (1u << 4) | (1u << 6) | (1u << 7) | (1u << 11) | (1u << 21));

  // The data section: COMM, MMAP2, SAMPLE, SAMPLE (the mapping once).
  std::vector<uint32_t> types;
  std::vector<std::vector<uint64_t>> chains;
  for (uint64_t at = data_at; at < data_at + data_size;) {
    auto type = At<uint32_t>(f, at);
    auto misc = At<uint16_t>(f, at + 4);
    auto size = At<uint16_t>(f, at + 6);
    ASSERT_GE(size, 8u);
    ASSERT_EQ(size % 8, 0u) << "records stay 8-byte aligned";
    types.push_back(type);
    if (type == PERF_RECORD_COMM) {
      EXPECT_EQ(At<uint32_t>(f, at + 12), 11u);
      EXPECT_STREQ(f.c_str() + at + 16, "worker-one");
    }
    if (type == PERF_RECORD_MMAP2) {
      EXPECT_TRUE(misc & (1 << 14)) << "the mapping carries its build-id";
      EXPECT_EQ(At<uint64_t>(f, at + 32), 0u);  // pgoff
      EXPECT_EQ(At<uint8_t>(f, at + 40), 20u);  // build_id_size
      EXPECT_EQ(At<uint8_t>(f, at + 44), 0x01);
      EXPECT_STREQ(f.c_str() + at + 72, "/bin/x");
    }
    if (type == PERF_RECORD_SAMPLE) {
      const uint64_t base = at + 8;
      uint64_t nr = At<uint64_t>(f, base + 40);
      std::vector<uint64_t> chain;
      for (uint64_t i = 0; i < nr; ++i) chain.push_back(At<uint64_t>(f, base + 48 + 8 * i));
      EXPECT_EQ(At<uint64_t>(f, base), chain[1]) << "ip is the innermost frame";
      EXPECT_EQ(At<uint32_t>(f, base + 12), 11u);
      EXPECT_EQ(At<uint32_t>(f, base + 24), 3u);
      EXPECT_EQ(At<uint64_t>(f, base + 32), 250u);
      EXPECT_EQ(misc & PERF_RECORD_MISC_CPUMODE_MASK,
                chain[0] == PERF_CONTEXT_KERNEL ? PERF_RECORD_MISC_KERNEL : PERF_RECORD_MISC_USER);
      chains.push_back(chain);
    }
    at += size;
  }
  EXPECT_EQ(types, (std::vector<uint32_t>{PERF_RECORD_COMM, PERF_RECORD_MMAP2, PERF_RECORD_SAMPLE,
                                          PERF_RECORD_SAMPLE}));
  ASSERT_EQ(chains.size(), 2u);
  ASSERT_EQ(chains[0].size(), 3u);
  EXPECT_EQ(chains[0][0], uint64_t{PERF_CONTEXT_USER});
  // The file offsets, at one base the MMAP2 maps to offset 0.
  EXPECT_EQ(chains[0][1] - chains[0][2], 0x1234u - 0x1100u);
  EXPECT_EQ(chains[1], (std::vector<uint64_t>{PERF_CONTEXT_KERNEL, 0xffffffff81000010ull,
                                              PERF_CONTEXT_USER, chains[0][1], chains[0][2]}));

  // The feature index follows the data; the first entry is the build-id
  // table: one 36-byte event + the name padded to 64.
  const uint64_t index_at = data_at + data_size;
  const uint64_t bid_at = At<uint64_t>(f, index_at), bid_size = At<uint64_t>(f, index_at + 8);
  ASSERT_EQ(bid_size, 36u + 64u);
  EXPECT_EQ(At<uint16_t>(f, bid_at + 6), bid_size);
  EXPECT_EQ(At<int32_t>(f, bid_at + 8), -1);  // the host
  EXPECT_EQ(At<uint8_t>(f, bid_at + 12), 0x01);
  EXPECT_EQ(At<uint8_t>(f, bid_at + 32), 20u);
  EXPECT_STREQ(f.c_str() + bid_at + 36, "/bin/x");
  // The last feature (SAMPLE_TIME) ends the file.
  const uint64_t last_at = At<uint64_t>(f, index_at + (__builtin_popcountll(bits) - 1) * 16);
  EXPECT_EQ(last_at + 16, f.size());
  EXPECT_EQ(At<uint64_t>(f, last_at), 1000u);
  EXPECT_EQ(At<uint64_t>(f, last_at + 8), 1001u);
}

TEST(PerfDataTest, AnEventWithoutAnAttrIsAnError) {
  Exported odd_event;
  EXPECT_FALSE(odd_event.Run("tracepoint:sched").ok());
}

// A frame perf.data cannot place costs that frame (an unknown address, with
// a note), not the export of every other sample.
TEST(PerfDataTest, FramesThatCannotBePlacedAreUnknownWithANote) {
  Exported far;
  far.samples[0].frames[0].offset = 1ull << 40;  // past any 4 GiB window
  std::vector<std::string> notes;
  auto r = far.Run("cpu-clock", &notes);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  ASSERT_EQ(notes.size(), 1u);
  EXPECT_NE(notes[0].find("1 frames past 4 GiB into their file"), std::string::npos) << notes[0];

  Exported no_path;
  MmapEvent m;
  m.filename = "/" + std::string(5000, 'a');
  m.ino = 9;
  for (auto& s : no_path.samples) {
    for (auto& f : s.frames) {
      if (!f.kernel) f.cookie = no_path.cookies.Intern(m);
    }
  }
  r = no_path.Run("cpu-clock", &notes);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  ASSERT_EQ(notes.size(), 1u);
  EXPECT_NE(notes[0].find("4 frames in files without a usable path"), std::string::npos)
      << notes[0];
  EXPECT_EQ(r->find(std::string(100, 'a')), std::string::npos) << "the path was mapped";
}

// The MMAP2 records of a file: (name, whether it carries a build-id).
std::vector<std::pair<std::string, bool>> Mmap2s(const std::string& f) {
  std::vector<std::pair<std::string, bool>> maps;
  const uint64_t data_at = At<uint64_t>(f, 40), data_size = At<uint64_t>(f, 48);
  for (uint64_t at = data_at; at < data_at + data_size;) {
    const auto size = At<uint16_t>(f, at + 6);
    if (size < 8) break;
    if (At<uint32_t>(f, at) == PERF_RECORD_MMAP2) {
      maps.emplace_back(f.c_str() + at + 72, (At<uint16_t>(f, at + 4) & (1 << 14)) != 0);
    }
    at += size;
  }
  return maps;
}

// A vDSO frame goes out in a "[vdso]" map, as perf record writes it. perf
// names a [vdso] without a build-id from its own vDSO, so the map has none
// only when the record's image is this machine's; a foreign one carries its
// build-id (perf then looks for that very image) and the export says so.
TEST(PerfDataTest, VdsoFramesAreMappedAsVdsoWithABuildIdOnlyWhenForeign) {
  auto own = attribution::ReadOwnVdso();
  ASSERT_TRUE(own.ok()) << own.status().ToString();
  const std::string own_id = attribution::VdsoBuildId(*own);
  ASSERT_FALSE(own_id.empty());
  auto with_vdso = [](Exported& e) {
    for (auto& s : e.samples) s.frames.insert(s.frames.end() - 2, {false, 0, 0xb46, "[vdso]"});
  };

  Exported here;
  here.vdso_build_id = own_id;
  with_vdso(here);
  std::vector<std::string> notes;
  auto f = here.Run("cpu-clock", &notes);
  ASSERT_TRUE(f.ok()) << f.status().ToString();
  EXPECT_TRUE(notes.empty()) << notes[0];
  auto maps = Mmap2s(*f);
  EXPECT_NE(std::find(maps.begin(), maps.end(), std::pair<std::string, bool>{"[vdso]", false}),
            maps.end());
  EXPECT_EQ(f->find(BuildIdBytes(own_id)), std::string::npos) << "no build-id is written";

  Exported foreign;
  foreign.vdso_build_id = std::string(40, 'a');
  with_vdso(foreign);
  f = foreign.Run("cpu-clock", &notes);
  ASSERT_TRUE(f.ok()) << f.status().ToString();
  maps = Mmap2s(*f);
  EXPECT_NE(std::find(maps.begin(), maps.end(), std::pair<std::string, bool>{"[vdso]", true}),
            maps.end());
  EXPECT_NE(f->find(std::string(20, '\xaa')), std::string::npos) << "the build-id is written";
  ASSERT_EQ(notes.size(), 1u);
  EXPECT_NE(notes[0].find("2 [vdso] frames are in another kernel's vDSO"), std::string::npos)
      << notes[0];

  // No image and another boot: nothing to name them by, so no map.
  Exported unknown;
  unknown.boot_id = "not-this-boot";
  with_vdso(unknown);
  f = unknown.Run("cpu-clock", &notes);
  ASSERT_TRUE(f.ok()) << f.status().ToString();
  maps = Mmap2s(*f);
  EXPECT_EQ(std::count_if(maps.begin(), maps.end(), [](auto& m) { return m.first == "[vdso]"; }),
            0);
  ASSERT_EQ(notes.size(), 1u);
  EXPECT_NE(notes[0].find("2 frames in the vDSO of another boot"), std::string::npos) << notes[0];
}

}  // namespace
}  // namespace flightrec::recorder::exporter::perfdata
