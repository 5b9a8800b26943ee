#include "store/store.h"

#include <dirent.h>
#include <fcntl.h>
#include <grp.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/acl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <random>
#include <set>
#include <vector>

#include <fmt/format.h>

#include "common/checked_json.h"
#include "tests/support/files.h"
#include "tests/support/records.h"
#include "tests/support/run.h"
#include "tests/support/wait.h"

namespace flightrec::store {
namespace {

using flightrec::testing::RunInChild;
using flightrec::testing::TempDir;
using testing::TestOptions;
using testing::WriteSmallRecord;

// Opens the store at `dir` in a child (recovery runs there): fails the test
// if recovery killed the child, the open failed, or it took more than 30 s
// (a planted file that blocks recovery; the child is killed then).
void OpenInAChild(const std::string& dir) {
  pid_t pid = fork();
  if (pid == 0) _exit(Store::Open(dir, TestOptions()).ok() ? 0 : 1);
  ASSERT_GT(pid, 0);
  int status = 0;
  const bool ended =
      flightrec::testing::WaitFor([&] { return waitpid(pid, &status, WNOHANG) == pid; },
                                  std::chrono::seconds(30), std::chrono::milliseconds(20));
  if (!ended) {
    kill(pid, SIGKILL);
    waitpid(pid, &status, 0);
  }
  ASSERT_TRUE(ended) << "recovery of " << dir << " did not finish within 30 s";
  ASSERT_TRUE(WIFEXITED(status)) << "recovery was killed by signal " << WTERMSIG(status);
  ASSERT_EQ(WEXITSTATUS(status), 0);
}

std::string Pattern(size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::string s(n, '\0');
  // Compressible but not trivial: runs of random lengths drawn from a small alphabet.
  for (size_t i = 0; i < n;) {
    char c = static_cast<char>('a' + rng() % 16);
    size_t run = 1 + rng() % 32;
    for (size_t j = 0; j < run && i < n; ++j) s[i++] = c;
  }
  return s;
}

TEST(RecordFileTest, SeveralSectionsRoundTrip) {
  TempDir d;
  auto s = Store::Open(d.path(), TestOptions());
  ASSERT_TRUE(s.ok()) << s.status().message();
  auto rec = (*s)->BeginRecord("dump");
  ASSERT_TRUE(rec.ok()) << rec.status().message();
  std::string big = Pattern(3 << 20, 1);
  ASSERT_TRUE((*rec)->writer().AddSection("events", big).ok());
  ASSERT_TRUE((*rec)->writer().AddSection("empty", "").ok());
  ASSERT_TRUE((*rec)->writer().BeginSection("streamed").ok());
  for (int i = 0; i < 10; ++i) ASSERT_TRUE((*rec)->writer().Write(Pattern(100000, i)).ok());
  ASSERT_TRUE((*rec)->writer().EndSection().ok());
  nlohmann::json meta = {{"reason", "test"}, {"start_ns", 5}, {"end_ns", 9}};
  auto row = (*s)->Commit(std::move(*rec), meta);
  ASSERT_TRUE(row.ok()) << row.status().message();
  EXPECT_EQ(row->reason, "test");
  EXPECT_EQ(row->raw_size, big.size() + 1000000u);
  EXPECT_LT(row->file_size, row->raw_size);

  auto r = (*s)->OpenRecord(row->id);
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ((*r)->header().kind, "dump");
  EXPECT_EQ((*r)->header().id, row->id);
  EXPECT_FALSE((*r)->header().boot_id.empty());
  ASSERT_EQ((*r)->sections().size(), 3u);
  EXPECT_EQ(*(*r)->ReadSection("events"), big);
  EXPECT_EQ(*(*r)->ReadSection("empty"), "");
  std::string want;
  for (int i = 0; i < 10; ++i) want += Pattern(100000, i);
  EXPECT_EQ(*(*r)->ReadSection("streamed"), want);
  EXPECT_TRUE((*r)->Verify().ok());
  EXPECT_EQ((*r)->meta()["reason"], "test");
  EXPECT_EQ((*r)->ReadSection("nope").status().code(), StatusCode::kNotFound);
}

// The hook changes zstd's level within the core's frame and its workers
// between frames (coredump-hook/core_compression.h): the record must read
// back the same, and the new level must take effect.
TEST(RecordFileTest, CompressionChangesMidSectionRoundTripAndTakeEffect) {
  TempDir d;
  auto s = Store::Open(d.path(), TestOptions());
  ASSERT_TRUE(s.ok()) << s.status().message();
  std::vector<std::string> chunks;
  for (uint32_t i = 0; i < 24; ++i) chunks.push_back(Pattern(1 << 20, 100 + i));
  const std::string& chunk = chunks[0];
  auto write = [&](bool switch_level) -> RecordRow {
    auto rec = (*s)->BeginRecord("crash");
    EXPECT_TRUE(rec.ok());
    auto& w = (*rec)->writer();
    w.SetCompression(1, 2);
    EXPECT_TRUE(w.BeginSection("core").ok());
    for (int i = 0; i < 24; ++i) {
      // After a quarter, a level zstd accepts within the frame (workers run).
      if (switch_level && i == 6) w.SetCompression(12, 2);
      EXPECT_TRUE(w.Write(chunks[i]).ok());
    }
    EXPECT_TRUE(w.EndSection().ok());
    // Single-threaded from the next section's frame on; a level change in
    // the middle of a single-threaded frame waits for the next frame.
    w.SetCompression(3, 0);
    EXPECT_TRUE(w.BeginSection("after").ok());
    EXPECT_TRUE(w.Write(chunk).ok());
    w.SetCompression(5, 1);
    EXPECT_TRUE(w.Write(chunk).ok());
    EXPECT_TRUE(w.EndSection().ok());
    auto row = (*s)->Commit(std::move(*rec), {{"reason", "t"}});
    EXPECT_TRUE(row.ok()) << row.status().message();
    auto r = (*s)->OpenRecord(row->id);
    EXPECT_TRUE(r.ok());
    std::string core = *(*r)->ReadSection("core");
    EXPECT_EQ(core.size(), 24 * chunk.size());
    for (int i = 0; i < 24; ++i) {
      EXPECT_EQ(core.compare(i * chunk.size(), chunk.size(), chunks[i]), 0) << "chunk " << i;
    }
    EXPECT_EQ(*(*r)->ReadSection("after"), chunk + chunk);
    EXPECT_TRUE((*r)->Verify().ok());
    return *row;
  };
  RecordRow level1 = write(false), switched = write(true);
  EXPECT_LT(switched.file_size, level1.file_size)
      << "level 12 from the 7th MiB on compressed no better than level 1 throughout";
}

TEST(RecordFileTest, DuplicateOrUnnamedSectionsAreRefused) {
  TempDir d;
  auto s = Store::Open(d.path(), TestOptions());
  ASSERT_TRUE(s.ok());
  auto rec = (*s)->BeginRecord("dump");
  ASSERT_TRUE((*rec)->writer().AddSection("a", "1").ok());
  EXPECT_FALSE((*rec)->writer().AddSection("a", "2").ok());
  EXPECT_FALSE((*rec)->writer().BeginSection("").ok());
}

TEST(StoreTest, IdsResolveByPrefixAndByNewest) {
  TempDir d;
  auto s = Store::Open(d.path(), TestOptions());
  ASSERT_TRUE(s.ok());
  auto a = WriteSmallRecord(**s, "a");
  auto b = WriteSmallRecord(**s, "b");
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_EQ((*s)->Get("-1")->id, b->id);
  EXPECT_EQ((*s)->Get("-2")->id, a->id);
  EXPECT_EQ((*s)->Get("-3").status().code(), StatusCode::kNotFound);
  EXPECT_EQ((*s)->Get(a->id.substr(0, a->id.size() - 1))->id.substr(0, a->id.size() - 1),
            a->id.substr(0, a->id.size() - 1));
  EXPECT_EQ((*s)->Get("zzz").status().code(), StatusCode::kNotFound);
  // Both ids share the timestamp prefix when written in the same second.
  if (a->id.substr(0, 16) == b->id.substr(0, 16)) {
    EXPECT_EQ((*s)->Get(a->id.substr(0, 16)).status().code(), StatusCode::kInvalidArgument);
  }
}

TEST(StoreTest, ListFiltersByKindPidExeAndTime) {
  TempDir d;
  auto s = Store::Open(d.path(), TestOptions());
  ASSERT_TRUE(s.ok());
  nlohmann::json m1 = {{"processes", {{{"pid", 10}, {"exe", "/bin/a"}, {"comm", "a"}}}}};
  nlohmann::json m2 = {{"crash", {{"pid", 20}, {"exe", "/bin/b"}, {"signal", 11}, {"uid", 1000}}}};
  auto r1 = WriteSmallRecord(**s, "x", m1);
  ASSERT_TRUE(r1.ok());
  auto rec = (*s)->BeginRecord("crash");
  ASSERT_TRUE((*rec)->writer().AddSection("core", "ELF").ok());
  auto r2 = (*s)->Commit(std::move(*rec), m2);
  ASSERT_TRUE(r2.ok());
  ListQuery q;
  q.kind = "crash";
  EXPECT_EQ((*s)->List(q)->size(), 1u);
  q = {};
  q.pid = 10;
  ASSERT_EQ((*s)->List(q)->size(), 1u);
  EXPECT_EQ((*s)->List(q)->at(0).id, r1->id);
  q = {};
  q.exe = "/bin/b";
  EXPECT_EQ((*s)->List(q)->at(0).id, r2->id);
  q = {};
  q.uid = 1000;
  EXPECT_EQ((*s)->List(q)->size(), 1u);
  q = {};
  q.since_ns = r2->created_ns + 1;
  EXPECT_EQ((*s)->List(q)->size(), 0u);
  q = {};
  q.until_ns = r1->created_ns;
  EXPECT_GE((*s)->List(q)->size(), 1u);
}

// Corrupts a copy of a committed record in several ways; each copy fails with
// an error naming the file (and the section where one is involved) while the
// untouched records stay readable.
class CorruptionTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto s = Store::Open(dir_.path(), TestOptions());
    ASSERT_TRUE(s.ok());
    store_ = std::move(*s);
    auto good = WriteSmallRecord(*store_, Pattern(200000, 3));
    ASSERT_TRUE(good.ok());
    good_ = *good;
    path_ = dir_.path() + "/" + good_.file;
    std::ifstream in(path_, std::ios::binary);
    bytes_.assign(std::istreambuf_iterator<char>(in), {});
  }
  std::string WriteVariant(const std::string& name, const std::string& content) {
    std::string p = dir_.path() + "/" + name;
    std::ofstream(p, std::ios::binary) << content;
    return p;
  }
  TempDir dir_;
  std::unique_ptr<Store> store_;
  RecordRow good_;
  std::string path_;
  std::string bytes_;
};

TEST_F(CorruptionTest, EmptyFileIsNamed) {
  auto p = WriteVariant("empty.bin", "");
  auto r = RecordReader::Open(p);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find(p), std::string::npos);
  EXPECT_NE(r.status().message().find("empty"), std::string::npos);
}

TEST_F(CorruptionTest, ForeignFileIsRecognised) {
  std::ifstream in("/bin/true", std::ios::binary);
  std::string elf((std::istreambuf_iterator<char>(in)), {});
  auto r = RecordReader::Open(WriteVariant("foreign.bin", elf));
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("not a flightrec record"), std::string::npos);
}

TEST_F(CorruptionTest, TruncationAtEveryRegionIsDetected) {
  for (size_t keep : {size_t{10}, size_t{40}, bytes_.size() / 2, bytes_.size() - 1}) {
    auto p = WriteVariant("trunc.bin", bytes_.substr(0, keep));
    auto r = RecordReader::Open(p);
    ASSERT_FALSE(r.ok()) << "kept " << keep;
    EXPECT_EQ(r.status().code(), StatusCode::kCorrupt);
    EXPECT_NE(r.status().message().find(p), std::string::npos);
  }
}

TEST_F(CorruptionTest, BitFlipInSectionNamesTheSection) {
  auto r0 = RecordReader::Open(path_);
  ASSERT_TRUE(r0.ok());
  const SectionInfo* ev = (*r0)->FindSection("events");
  ASSERT_NE(ev, nullptr);
  std::string flipped = bytes_;
  flipped[ev->offset + ev->stored_size / 2] ^= 0x10;
  auto p = WriteVariant("flip.bin", flipped);
  auto r = RecordReader::Open(p);
  ASSERT_TRUE(r.ok());  // header and TOC are intact
  Status st = (*r)->Verify();
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.message().find("section 'events'"), std::string::npos) << st.message();
  EXPECT_NE(st.message().find(p), std::string::npos);
}

TEST_F(CorruptionTest, EveryByteFlipIsCaughtSomewhere) {
  // Flip each byte of a small record: opening or verifying must fail, never crash.
  auto s2 = WriteSmallRecord(*store_, "tiny payload");
  ASSERT_TRUE(s2.ok());
  std::ifstream in(dir_.path() + "/" + s2->file, std::ios::binary);
  std::string b((std::istreambuf_iterator<char>(in)), {});
  int caught = 0;
  for (size_t i = 0; i < b.size(); ++i) {
    std::string v = b;
    v[i] ^= 0x01;
    auto p = WriteVariant("f.bin", v);
    auto r = RecordReader::Open(p);
    if (!r.ok() || !(*r)->Verify().ok()) {
      ++caught;
    } else {
      ADD_FAILURE() << "flip at byte " << i << " went unnoticed";
    }
  }
  // JSON whitespace-insensitive spots could in principle survive; with our
  // compact JSON, XXH3 over header and TOC catches every flip.
  EXPECT_EQ(caught, static_cast<int>(b.size()));
}

TEST_F(CorruptionTest, OtherRecordsStayReadableAndVerifyReportsTheBadOne) {
  auto other = WriteSmallRecord(*store_, "other");
  ASSERT_TRUE(other.ok());
  // Damage the first record in place.
  std::string flipped = bytes_;
  flipped[flipped.size() / 2] ^= 0xff;
  std::ofstream(path_, std::ios::binary | std::ios::trunc) << flipped;
  auto problems = store_->Verify(std::nullopt);
  ASSERT_TRUE(problems.ok());
  ASSERT_EQ(problems->size(), 1u);
  EXPECT_NE(problems->at(0).find(good_.id), std::string::npos);
  EXPECT_EQ(store_->Get(good_.id)->state, "corrupt");
  auto r = store_->OpenRecord(other->id);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(*(*r)->ReadSection("events"), "other");
}

TEST_F(CorruptionTest, UnknownMajorVersionIsRefusedClearly) {
  std::string v = bytes_;
  v[8] = 2;  // major version field
  auto r = RecordReader::Open(WriteVariant("v2.bin", v));
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kUnsupported);
  EXPECT_NE(r.status().message().find("upgrade flightrec"), std::string::npos);
}

TEST(RecoveryTest, StrayTemporariesGoUnindexedFilesReturnMissingFilesAreMarked) {
  TempDir d;
  std::string kept_id, lost_id, orphan_id;
  {
    auto s = Store::Open(d.path(), TestOptions());
    ASSERT_TRUE(s.ok());
    kept_id = WriteSmallRecord(**s, "kept")->id;
    lost_id = WriteSmallRecord(**s, "lost")->id;
    orphan_id = WriteSmallRecord(**s, "orphan")->id;
    ASSERT_TRUE((*s)->index().Delete(orphan_id).ok());  // file without row
  }
  std::filesystem::remove(d.path() + "/" + lost_id + ".frec");  // row without file
  std::ofstream(d.path() + "/.tmp-dead") << "half a record";    // dead writer's temp
  auto s = Store::Open(d.path(), TestOptions());
  ASSERT_TRUE(s.ok());
  EXPECT_EQ((*s)->recovery().temporaries_removed, 1);
  EXPECT_EQ((*s)->recovery().reindexed, 1);
  EXPECT_EQ((*s)->recovery().marked_missing, 1);
  EXPECT_FALSE(std::filesystem::exists(d.path() + "/.tmp-dead"));
  EXPECT_EQ((*s)->Get(lost_id)->state, "missing");
  EXPECT_EQ(*(*(*s)->OpenRecord(orphan_id))->ReadSection("events"), "orphan");
  EXPECT_EQ(*(*(*s)->OpenRecord(kept_id))->ReadSection("events"), "kept");
}

TEST(RecoveryTest, HostileRecordFilesAreQuarantinedAndTheStoreKeepsWorking) {
  TempDir d;
  {
    auto s = Store::Open(d.path(), TestOptions());
    ASSERT_TRUE(s.ok());
    ASSERT_TRUE(WriteSmallRecord(**s, "before").ok());
  }
  auto hostile = testing::HostileRecords();
  for (const auto& [name, bytes] : hostile) {
    std::ofstream(d.path() + "/" + name, std::ios::binary) << bytes;
  }
  ASSERT_NO_FATAL_FAILURE(OpenInAChild(d.path()));
  auto s = Store::Open(d.path(), TestOptions());
  ASSERT_TRUE(s.ok()) << s.status().message();
  for (const auto& [name, bytes] : hostile) {
    EXPECT_FALSE(std::filesystem::exists(d.path() + "/" + name)) << name;
    // Moved aside with its bytes intact, never deleted.
    std::ifstream in(d.path() + "/quarantine/" + name, std::ios::binary);
    std::string kept((std::istreambuf_iterator<char>(in)), {});
    EXPECT_EQ(kept, bytes) << name;
  }
  EXPECT_EQ((*s)->List({})->size(), 1u);
  // A record committed afterwards is indexed as usual.
  auto after = WriteSmallRecord(**s, "after");
  ASSERT_TRUE(after.ok()) << after.status().message();
  auto again = Store::Open(d.path(), TestOptions());
  ASSERT_TRUE(again.ok());
  EXPECT_EQ((*again)->List({})->size(), 2u);
  EXPECT_EQ((*again)->recovery().quarantined.size(), 0u);
}

TEST(RecoveryTest, AFifoOrSocketNamedLikeARecordIsQuarantinedWithoutBeingOpened) {
  // open(O_RDONLY) of a FIFO waits for a writer: a FIFO named like a record
  // hung every open of the store (and `recorder list`) for good.
  TempDir d;
  std::string kept;
  {
    auto s = Store::Open(d.path(), TestOptions());
    ASSERT_TRUE(s.ok());
    kept = WriteSmallRecord(**s, "kept")->id;
  }
  const std::string fifo = "20200101T000000Z-0000f1.frec";
  ASSERT_EQ(mkfifo((d.path() + "/" + fifo).c_str(), 0644), 0);
  const std::string sock = "20200101T000000Z-0000f2.frec";
  {
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_un addr{};
    addr.sun_family = AF_UNIX;
    const std::string path = d.path() + "/" + sock;
    ASSERT_LT(path.size(), sizeof(addr.sun_path));
    std::strcpy(addr.sun_path, path.c_str());
    ASSERT_EQ(bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)), 0);
    close(fd);
  }
  ASSERT_NO_FATAL_FAILURE(OpenInAChild(d.path()));
  for (const std::string& name : {fifo, sock}) {
    struct stat st {};
    EXPECT_NE(lstat((d.path() + "/" + name).c_str(), &st), 0) << name;
    ASSERT_EQ(lstat((d.path() + "/quarantine/" + name).c_str(), &st), 0) << name;
    EXPECT_FALSE(S_ISREG(st.st_mode)) << name;
  }
  // A FIFO planted after that (no longer in quarantine's way) is reported once.
  ASSERT_EQ(mkfifo((d.path() + "/" + fifo).c_str(), 0644), 0);
  auto s = Store::Open(d.path(), TestOptions());
  ASSERT_TRUE(s.ok()) << s.status().message();
  ASSERT_EQ((*s)->recovery().quarantined.size(), 1u);
  EXPECT_NE((*s)->recovery().quarantined[0].find("not a regular file"), std::string::npos)
      << (*s)->recovery().quarantined[0];
  EXPECT_EQ(*(*(*s)->OpenRecord(kept))->ReadSection("events"), "kept");
}

TEST(RecoveryTest, QuarantineReportsEachFileAndWhy) {
  TempDir d;
  ASSERT_TRUE(Store::Open(d.path(), TestOptions()).ok());
  auto hostile = testing::HostileRecords();
  std::ofstream(d.path() + "/" + hostile[0].first, std::ios::binary) << hostile[0].second;
  auto s = Store::Open(d.path(), TestOptions());
  ASSERT_TRUE(s.ok());
  ASSERT_EQ((*s)->recovery().quarantined.size(), 1u);
  const std::string& line = (*s)->recovery().quarantined[0];
  EXPECT_NE(line.find(hostile[0].first), std::string::npos) << line;
  EXPECT_NE(line.find("nested deeper than 64"), std::string::npos) << line;
  EXPECT_EQ((*s)->recovery().unreadable, 1);
}

TEST(RecoveryTest, WrongTypesInMetaAreIndexedWithDefaultsNotFatal) {
  TempDir d;
  ASSERT_TRUE(Store::Open(d.path(), TestOptions()).ok());
  std::string id = "20200101T000000Z-0000aa";
  std::string toc = R"({"sections":[],"meta":{"reason":5,"start_ns":"x","end_ns":[],)"
                    R"("owner_uid":"me","pids":["a"],)"
                    R"("processes":[{"pid":"x","exe":5,"comm":{},"uid":"r"},7],)"
                    R"("crash":{"pid":"x","tid":[],"exe":[],"signal":"s","dumpable":"yes",)"
                    R"("uid":"u","history":5,"core_size":"big","truncated":1},)"
                    R"("cookies":[{"build_id":1,"path":2,"dev":"d","ino":{}},"x"]}})";
  std::ofstream(d.path() + "/" + id + ".frec", std::ios::binary)
      << testing::CraftRecord(testing::GoodHeader(id), toc);
  ASSERT_NO_FATAL_FAILURE(OpenInAChild(d.path()));
  auto s = Store::Open(d.path(), TestOptions());
  ASSERT_TRUE(s.ok());
  auto row = (*s)->Get(id);
  ASSERT_TRUE(row.ok()) << row.status().message();
  EXPECT_EQ(row->reason, "");
  EXPECT_EQ(row->start_ns, 0);
}

TEST(UntrustedJsonTest, BracketsInsideStringsDoNotCountAndLimitsHold) {
  EXPECT_EQ(json::Scan(R"({"a":"[[[\"[[{{","b":[1,[2]]})").depth, 3u);
  EXPECT_EQ(json::Scan(R"({"a":"\\"})").depth, 1u);  // an escaped backslash ends nothing
  EXPECT_TRUE(json::ParseUntrusted(testing::Nested(64), "t").ok());
  auto deep = json::ParseUntrusted(testing::Nested(65), "t");
  EXPECT_EQ(deep.status().code(), StatusCode::kCorrupt);
  EXPECT_NE(deep.status().message().find("nested deeper than 64"), std::string::npos);
  EXPECT_FALSE(json::ParseUntrusted("[1,2,3,4]", "t", 64, 3).ok());
  EXPECT_FALSE(json::ParseUntrusted("{\"a\":", "t").ok());
  // Checked reads never throw on a wrong type.
  nlohmann::json o = {{"i", "x"}, {"s", 5}, {"b", 1}, {"o", 2}};
  EXPECT_EQ(json::Get<int64_t>(o, "i", 7), 7);
  EXPECT_EQ(json::Str(o, "s", "d"), "d");
  EXPECT_TRUE(json::Get<bool>(o, "b", true));
  EXPECT_TRUE(json::Object(o, "o").empty());
  EXPECT_EQ(json::Get<int64_t>(nlohmann::json::array(), "i", 3), 3);
}

TEST(RecordFileTest, NullOrAbsentMetaReadsAsEmpty) {
  // Records committed with `{}` (a JSON null) before Commit normalised it.
  TempDir d;
  for (const char* toc : {R"({"sections":[],"meta":null})", R"({"sections":[]})"}) {
    std::string p = d.path() + "/r.frec";
    std::ofstream(p, std::ios::binary | std::ios::trunc)
        << testing::CraftRecord(testing::GoodHeader("20200101T000000Z-0000ac"), toc);
    auto r = RecordReader::Open(p);
    ASSERT_TRUE(r.ok()) << r.status().message();
    EXPECT_TRUE((*r)->meta().is_object());
  }
}

TEST(RecordFileTest, HugeSectionCountIsRefusedQuickly) {
  TempDir d;
  nlohmann::json secs = nlohmann::json::array();
  for (int i = 0; i < 100000; ++i) {
    secs.push_back({{"name", fmt::format("s{}", i)},
                    {"offset", 100},
                    {"stored_size", 0},
                    {"raw_size", 0},
                    {"xxh3", "2d06800538d394c2"},
                    {"frames", nlohmann::json::array()}});
  }
  std::string id = "20200101T000000Z-0000ab";
  std::string p = d.path() + "/" + id + ".frec";
  std::ofstream(p, std::ios::binary) << testing::CraftRecord(
      testing::GoodHeader(id), nlohmann::json{{"sections", secs}, {"meta", {}}}.dump(),
      std::string(68, 'x'));
  auto start = std::chrono::steady_clock::now();
  auto r = RecordReader::Open(p);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("sections"), std::string::npos) << r.status().message();
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(2));
}

TEST(RecoveryTest, LiveWritersTemporaryIsLeftAlone) {
  TempDir d;
  auto s = Store::Open(d.path(), TestOptions());
  ASSERT_TRUE(s.ok());
  auto rec = (*s)->BeginRecord("dump");
  ASSERT_TRUE(rec.ok());
  ASSERT_TRUE((*rec)->writer().AddSection("events", "in progress").ok());
  auto other = Store::Open(d.path(), TestOptions());  // e.g. a crash handler starting
  ASSERT_TRUE(other.ok());
  EXPECT_EQ((*other)->recovery().temporaries_removed, 0);
  auto row = (*s)->Commit(std::move(*rec), {});
  ASSERT_TRUE(row.ok()) << row.status().message();
  EXPECT_EQ((*other)->List({})->size(), 1u);
}

TEST(StoreTest, SymlinkedStoreDirectoryIsRefused) {
  TempDir d;
  std::filesystem::create_directory(d.path() + "/real");
  std::filesystem::create_directory_symlink(d.path() + "/real", d.path() + "/link");
  auto s = Store::Open(d.path() + "/link", TestOptions());
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.status().message().find("symlink"), std::string::npos);
}

TEST(StoreTest, NewStoreIsPrivate) {
  TempDir d;
  auto s = Store::Open(d.path() + "/new", TestOptions());
  ASSERT_TRUE(s.ok());
  struct stat st {};
  ASSERT_EQ(stat((d.path() + "/new").c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0700u);
  auto rec = WriteSmallRecord(**s, "x");
  ASSERT_EQ(stat((d.path() + "/new/" + rec->file).c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600u);
}

// Item 8 of issue 11: index.sqlite was created 0644, so any user read every
// user's crash metadata.
TEST(StoreTest, IndexIsPrivateAndOtherUsersCannotReadIt) {
  TempDir d;
  std::string dir = d.path() + "/store";
  {
    auto s = Store::Open(dir, TestOptions());
    ASSERT_TRUE(s.ok());
    ASSERT_TRUE(WriteSmallRecord(**s, "x").ok());
    struct stat st {};
    for (const char* f : {"/index.sqlite", "/index.sqlite-wal", "/index.sqlite-shm"}) {
      ASSERT_EQ(stat((dir + f).c_str(), &st), 0) << f;
      EXPECT_EQ(st.st_mode & 0077, 0u) << f << " is " << std::oct << (st.st_mode & 0777);
    }
  }
  // A store made before the fix (or by hand): world-readable index, world-
  // writable directory. Fixed by the next open.
  ASSERT_EQ(chmod((dir + "/index.sqlite").c_str(), 0644), 0);
  ASSERT_EQ(chmod(dir.c_str(), 0777), 0);
  {
    auto s = Store::Open(dir, TestOptions());
    ASSERT_TRUE(s.ok());
    ASSERT_TRUE(WriteSmallRecord(**s, "y").ok());
  }
  struct stat st {};
  ASSERT_EQ(stat((dir + "/index.sqlite").c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600u);
  ASSERT_EQ(stat(dir.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0066, 0u) << std::oct << (st.st_mode & 0777);
  EXPECT_EQ(st.st_mode & 0011, 0011u) << "others lost the search bit";
  ASSERT_EQ(geteuid(), 0u) << "needs root to switch to another user";
  // As installed (`recorder coredump install`): the store traversable so that
  // users reach the record files granted to them; the index still closed.
  ASSERT_EQ(chmod(d.path().c_str(), 0755), 0);
  ASSERT_EQ(chmod(dir.c_str(), 0755), 0);
  int status = RunInChild([&] {
    if (setgid(65534) != 0 || setuid(65534) != 0) return 3;
    int fd = open((dir + "/index.sqlite").c_str(), O_RDONLY);
    if (fd >= 0) return 1;  // read every user's metadata
    if (errno != EACCES) return 2;
    // sqlite's own read-only open fails too.
    auto s = Store::Open(dir, [] {
      StoreOptions o = TestOptions();
      o.read_only = true;
      return o;
    }());
    return !s.ok() && s.status().code() == StatusCode::kPermissionDenied ? 0 : 4;
  });
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 0) << "1: nobody read the index; 4: no clear permission error";
}

// Switches the calling (child) process to `uid` for good: groups, gid, uid.
bool BecomeUser(uid_t uid) {
  return setgroups(0, nullptr) == 0 && setresgid(uid, uid, uid) == 0 &&
         setresuid(uid, uid, uid) == 0;
}

std::set<std::string> Names(const std::string& dir) {
  std::set<std::string> out;
  DIR* d = opendir(dir.c_str());
  if (d == nullptr) return {"<" + std::string(std::strerror(errno)) + ">"};
  while (struct dirent* e = readdir(d)) {
    std::string n = e->d_name;
    if (n != "." && n != "..") out.insert(n);
  }
  closedir(d);
  return out;
}

// Item 8 of issue 11: with the store 0755, any user listed every record
// name. The store is 0711 (others search, never list), and a user finds
// exactly the records granted to them in by-uid/<uid>/.
TEST(GrantTest, NobodyListsExactlyTheirGrantedRecordsAndCannotListTheStore) {
  ASSERT_EQ(geteuid(), 0u) << "needs root to switch to another user";
  TempDir d;
  ASSERT_EQ(chmod(d.path().c_str(), 0755), 0);
  std::string dir = d.path() + "/store";
  auto s = Store::Open(dir, TestOptions());
  ASSERT_TRUE(s.ok()) << s.status().ToString();
  auto mine = WriteSmallRecord(**s, "nobody's crash");
  auto theirs = WriteSmallRecord(**s, "uid 65533's crash");
  auto roots = WriteSmallRecord(**s, "root's dump");
  ASSERT_TRUE(mine.ok() && theirs.ok() && roots.ok());
  ASSERT_TRUE((*s)->GrantReader(mine->id, 65534).ok());
  Status g = (*s)->GrantReader(theirs->file, 65533);
  ASSERT_TRUE(g.ok()) << g.ToString();
  ASSERT_TRUE((*s)->GrantReader(mine->file, 65534).ok()) << "granting twice must be harmless";
  struct stat st {};
  ASSERT_EQ(stat(dir.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0711u) << std::oct << (st.st_mode & 0777);
  ASSERT_EQ(stat((dir + "/by-uid").c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0711u);
  ASSERT_EQ(stat((dir + "/by-uid/65534").c_str(), &st), 0);
  EXPECT_EQ(st.st_uid, 0u);
  EXPECT_EQ(st.st_mode & 0007, 0u);
  int status = RunInChild([&] {
    if (!BecomeUser(65534)) return 10;
    if (opendir(dir.c_str()) != nullptr || errno != EACCES) return 1;  // listed the store
    if (Names(dir + "/by-uid/65534") != std::set<std::string>{mine->file}) return 2;
    if (opendir((dir + "/by-uid/65533").c_str()) != nullptr || errno != EACCES) return 3;
    if (opendir((dir + "/by-uid").c_str()) != nullptr || errno != EACCES) return 4;
    // Through the link, with an ordinary open that follows it.
    int fd = open((dir + "/by-uid/65534/" + mine->file).c_str(), O_RDONLY);
    if (fd < 0) return 5;
    char magic[8] = {};
    bool read_ok = read(fd, magic, 8) == 8 && std::memcmp(magic, kFileMagic, 8) == 0;
    close(fd);
    if (!read_ok) return 6;
    auto files = GrantedRecordFiles(dir, 65534);
    if (!files.ok() || *files != std::vector<std::string>{mine->file}) return 7;
    auto r = OpenGrantedRecord(dir, mine->file);
    if (!r.ok() || (*r)->header().id != mine->id) return 8;
    for (const auto* other : {&*theirs, &*roots}) {
      if (open((dir + "/" + other->file).c_str(), O_RDONLY) >= 0 || errno != EACCES) return 9;
      if (OpenGrantedRecord(dir, other->file).ok()) return 9;
    }
    if (open((dir + "/index.sqlite").c_str(), O_RDONLY) >= 0) return 11;
    return 0;
  });
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 0)
      << "1: store listable; 2: wrong by-uid listing; 3/4: another uid's or by-uid listable; "
         "5/6: link not readable; 7/8: library lookup; 9: another record readable; 11: index";
  status = RunInChild([&] {
    if (!BecomeUser(65532)) return 10;
    auto files = GrantedRecordFiles(dir, 65532);
    return files.ok() && files->empty() ? 0 : 1;
  });
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 0) << "a user without grants got an error or records";
}

TEST(GrantTest, RetentionRemovesTheLinksOfARemovedRecord) {
  TempDir d;
  auto s = Store::Open(d.path() + "/store", TestOptions());
  ASSERT_TRUE(s.ok());
  auto old = WriteSmallRecord(**s, "old");
  auto young = WriteSmallRecord(**s, "young");
  ASSERT_TRUE(old.ok() && young.ok());
  ASSERT_TRUE((*s)->GrantReader(old->id, 65534).ok());
  ASSERT_TRUE((*s)->GrantReader(old->id, 65533).ok());
  ASSERT_TRUE((*s)->GrantReader(young->id, 65534).ok());
  RetentionLimits lim;
  lim.max_count = 1;
  lim.max_use = UINT64_MAX;
  lim.keep_free = 0;
  auto v = (*s)->Vacuum(lim, false, std::set<std::string>{});
  ASSERT_TRUE(v.ok());
  ASSERT_EQ(v->removed, std::vector<std::string>{old->id});
  struct stat st {};
  for (const char* u : {"65534", "65533"}) {
    std::string link = fmt::format("{}/store/by-uid/{}/{}", d.path(), u, old->file);
    EXPECT_NE(lstat(link.c_str(), &st), 0) << link << " outlived its record";
  }
  EXPECT_EQ(lstat((d.path() + "/store/by-uid/65534/" + young->file).c_str(), &st), 0);
}

TEST(GrantTest, RecoveryRemovesDanglingLinksAndLeavesPlantedFilesAlone) {
  TempDir d;
  std::string dir = d.path() + "/store";
  std::string rec_file;
  {
    auto s = Store::Open(dir, TestOptions());
    ASSERT_TRUE(s.ok());
    auto rec = WriteSmallRecord(**s, "kept");
    ASSERT_TRUE(rec.ok());
    rec_file = rec->file;
    ASSERT_TRUE((*s)->GrantReader(rec->id, 65534).ok());
  }
  std::string u = dir + "/by-uid/65534/";
  // A link whose record was removed behind the store's back, a link that does
  // not point where the store's links point, and a plain file.
  ASSERT_EQ(
      symlink("../../20200101T000000Z-000000.frec", (u + "20200101T000000Z-000000.frec").c_str()),
      0);
  ASSERT_EQ(symlink("/etc/shadow", (u + "20200101T000000Z-000001.frec").c_str()), 0);
  std::ofstream(u + "planted.frec") << "not a link";
  auto s = Store::Open(dir, TestOptions());
  ASSERT_TRUE(s.ok());
  EXPECT_EQ((*s)->recovery().links_removed, 2);
  EXPECT_EQ((*s)->recovery().foreign_in_by_uid, 1);
  EXPECT_EQ(Names(u), (std::set<std::string>{rec_file, "planted.frec"}));
  // Only root writes in by-uid/, but a name there that is not the store's
  // link is refused, never followed or replaced.
  ASSERT_EQ(rename((u + "planted.frec").c_str(), (u + rec_file).c_str()), 0);
  EXPECT_FALSE((*s)->GrantReader(rec_file, 65534).ok());
  std::string elsewhere = d.path() + "/elsewhere";
  ASSERT_EQ(mkdir(elsewhere.c_str(), 0700), 0);
  ASSERT_EQ(symlink(elsewhere.c_str(), (dir + "/by-uid/65533").c_str()), 0);
  EXPECT_FALSE((*s)->GrantReader(rec_file, 65533).ok());
  EXPECT_TRUE(Names(elsewhere).empty());
}

// A store from before by-uid/: the hook granted records by ACL only, and
// users found them by listing the 0755 store. Narrowed to 0711, they would
// lose them; the first open links what the ACLs grant.
TEST(GrantTest, ACLGrantsOfAnOlderStoreAreLinkedOnce) {
  TempDir d;
  std::string dir = d.path() + "/store";
  std::string granted, other;
  {
    auto s = Store::Open(dir, TestOptions());
    ASSERT_TRUE(s.ok());
    auto a = WriteSmallRecord(**s, "granted by the old hook");
    auto b = WriteSmallRecord(**s, "root's");
    ASSERT_TRUE(a.ok() && b.ok());
    granted = a->file;
    other = b->file;
  }
  ASSERT_EQ(rmdir((dir + "/by-uid").c_str()), 0);
  acl_t acl = acl_from_text("u::rw-,u:65534:r--,g::---,m::r--,o::---");
  ASSERT_NE(acl, nullptr);
  ASSERT_EQ(acl_set_file((dir + "/" + granted).c_str(), ACL_TYPE_ACCESS, acl), 0);
  acl_free(acl);
  ASSERT_EQ(chmod(dir.c_str(), 0755), 0);
  auto s = Store::Open(dir, TestOptions());
  ASSERT_TRUE(s.ok());
  EXPECT_EQ(Names(dir + "/by-uid"), std::set<std::string>{"65534"});
  EXPECT_EQ(Names(dir + "/by-uid/65534"), std::set<std::string>{granted});
  auto files = GrantedRecordFiles(dir, 65534);
  ASSERT_TRUE(files.ok());
  EXPECT_EQ(*files, std::vector<std::string>{granted});
}

TEST(GrantTest, AnExistingWorldReadableStoreIsNarrowedTo0711) {
  TempDir d;
  std::string dir = d.path() + "/store";
  ASSERT_EQ(mkdir(dir.c_str(), 0755), 0);
  ASSERT_EQ(chmod(dir.c_str(), 0755), 0);
  auto s = Store::Open(dir, TestOptions());
  ASSERT_TRUE(s.ok());
  struct stat st {};
  ASSERT_EQ(stat(dir.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0711u) << std::oct << (st.st_mode & 0777);
}

TEST(StoreTest, SqlIsReadOnly) {
  TempDir d;
  auto s = Store::Open(d.path(), TestOptions());
  ASSERT_TRUE(s.ok());
  ASSERT_TRUE(WriteSmallRecord(**s, "x").ok());
  auto rows = (*s)->index().QueryReadOnly("SELECT kind, count(*) AS n FROM records GROUP BY kind");
  ASSERT_TRUE(rows.ok()) << rows.status().message();
  EXPECT_EQ((*rows)[0]["kind"], "dump");
  EXPECT_EQ((*rows)[0]["n"], 1);
  auto del = (*s)->index().QueryReadOnly("DELETE FROM records");
  EXPECT_EQ(del.status().code(), StatusCode::kPermissionDenied);
  EXPECT_EQ((*s)->List({})->size(), 1u);
  EXPECT_EQ((*s)->index().QueryReadOnly("SELEKT 1").status().code(), StatusCode::kInvalidArgument);
  EXPECT_FALSE((*s)->index().QueryReadOnly("SELECT 1; DELETE FROM records").ok());
}

TEST(RetentionTest, LimitsApplyInTheDocumentedOrderOldestFirst) {
  TempDir d;
  auto s = Store::Open(d.path(), TestOptions());
  ASSERT_TRUE(s.ok());
  std::vector<RecordRow> rows;
  for (int i = 0; i < 6; ++i) {
    auto r = WriteSmallRecord(**s, Pattern(50000, i));
    ASSERT_TRUE(r.ok());
    rows.push_back(*r);
  }
  // Make the first record look two days old (age is read from the index).
  ASSERT_TRUE((*s)->index().QueryReadOnly("SELECT 1").ok());
  {
    auto idx = Index::Open(d.path() + "/index.sqlite");
    ASSERT_TRUE(idx.ok());
    RecordRow old = rows[0];
    old.created_ns -= 2LL * 86400 * 1000000000;
    old.meta = nlohmann::json::object();
    ASSERT_TRUE((*idx)->Upsert(old).ok());
  }
  uint64_t each = rows[1].file_size;
  RetentionLimits lim;
  lim.max_age_ns = 86400LL * 1000000000;  // 1 day → removes rows[0]
  lim.max_count = 4;                      // 5 left → removes rows[1]
  lim.max_use = each * 3 + each / 2;      // 4 left → removes rows[2]
  lim.keep_free = 0;
  auto dry = (*s)->Vacuum(lim, /*dry_run=*/true);
  ASSERT_TRUE(dry.ok());
  EXPECT_EQ((*s)->List({})->size(), 6u);
  auto rep = (*s)->Vacuum(lim);
  ASSERT_TRUE(rep.ok()) << rep.status().message();
  ASSERT_EQ(rep->removed.size(), 3u);
  EXPECT_EQ(rep->removed, dry->removed);
  EXPECT_EQ(rep->removed[0], rows[0].id);
  EXPECT_EQ(rep->reasons[0], "age");
  EXPECT_EQ(rep->removed[1], rows[1].id);
  EXPECT_EQ(rep->reasons[1], "count");
  EXPECT_EQ(rep->removed[2], rows[2].id);
  EXPECT_EQ(rep->reasons[2], "max_use");
  EXPECT_FALSE(std::filesystem::exists(d.path() + "/" + rows[0].file));
  EXPECT_EQ((*s)->List({})->size(), 3u);
  // keep_free larger than the filesystem: removing every record could not meet
  // it, so nothing goes (issue 11, item 7: it used to wipe the store).
  RetentionLimits all;
  all.keep_free = ~0ull;
  rep = (*s)->Vacuum(all, false, rows[5].id);
  ASSERT_TRUE(rep.ok());
  EXPECT_TRUE(rep->refused);
  EXPECT_TRUE(rep->removed.empty());
  ASSERT_EQ(rep->notes.size(), 1u);
  EXPECT_NE(rep->notes[0].find("cannot be met"), std::string::npos) << rep->notes[0];
  EXPECT_EQ((*s)->List({})->size(), 3u);
}

// Item 7 of issue 11: one user's big crash used to evict root's older
// records and the user's own history dump (oldest first, whoever owned it).
TEST(RetentionTest, SpaceIsReclaimedFromTheHeaviestUserAndProtectedHistorySurvives) {
  TempDir d;
  auto s = Store::Open(d.path(), TestOptions());
  ASSERT_TRUE(s.ok());
  auto crash_meta = [](int uid, const std::string& history = "") {
    return nlohmann::json{{"crash", {{"uid", uid}, {"pid", 1}, {"history", history}}}};
  };
  std::mt19937_64 rng(7);
  auto noise = [&](size_t n) {  // incompressible, so sizes are predictable
    std::string b(n, '\0');
    for (auto& c : b) c = static_cast<char>(rng());
    return b;
  };
  auto root1 = WriteSmallRecord(**s, noise(30000), crash_meta(0));
  auto root2 = WriteSmallRecord(**s, noise(30000), crash_meta(0));
  // recorderd's history dump for user 1000's coming crash: written as root,
  // with no owner of its own.
  auto history = WriteSmallRecord(**s, noise(60000));
  auto user_old = WriteSmallRecord(**s, noise(60000), crash_meta(1000));
  ASSERT_TRUE(root1.ok() && root2.ok() && history.ok() && user_old.ok());
  EXPECT_EQ(history->owner_uid, 0u);
  EXPECT_EQ(user_old->owner_uid, 1000u);
  uint64_t before = *(*s)->TotalBytes();

  StoreOptions o = TestOptions();
  o.apply_retention_on_commit = true;
  o.retention.keep_free = 0;
  o.retention.max_use = before + 80000;  // the new crash pushes it ~50 KB over
  auto s2 = Store::Open(d.path(), o);
  ASSERT_TRUE(s2.ok());
  auto user_new = WriteSmallRecord(**s2, noise(130000), crash_meta(1000, history->id));
  ASSERT_TRUE(user_new.ok()) << user_new.status().message();
  // The history now belongs to user 1000 (for accounting), and survives.
  EXPECT_EQ((*s2)->Get(history->id)->owner_uid, 1000u);
  EXPECT_TRUE((*s2)->Get(history->id).ok());
  EXPECT_TRUE((*s2)->Get(root1->id).ok()) << "root's record was evicted by another user's crash";
  EXPECT_TRUE((*s2)->Get(root2->id).ok());
  EXPECT_FALSE((*s2)->Get(user_old->id).ok()) << "the user's own older crash should go first";
  EXPECT_TRUE((*s2)->Get(user_new->id).ok());

  // An explicit protect set is honoured by Vacuum and Commit.
  RetentionLimits all;
  all.keep_free = 0;
  all.max_use = 0;
  auto rep = (*s2)->Vacuum(all, /*dry_run=*/true, std::set<std::string>{root1->id});
  ASSERT_TRUE(rep.ok());
  EXPECT_EQ(std::count(rep->removed.begin(), rep->removed.end(), root1->id), 0);
  EXPECT_EQ(rep->removed.size(), 3u);
}

TEST(IndexTest, VersionOneIndexMigratesOwnersFromCrashes) {
  TempDir d;
  std::string crash_id, hist_id;
  {
    auto s = Store::Open(d.path(), TestOptions());
    ASSERT_TRUE(s.ok());
    hist_id = WriteSmallRecord(**s, "h")->id;
    crash_id = WriteSmallRecord(**s, "c", {{"crash", {{"uid", 1234}, {"history", hist_id}}}})->id;
  }
  {
    // Back to what a version 1 index holds.
    sqlite3* db = nullptr;
    ASSERT_EQ(sqlite3_open((d.path() + "/index.sqlite").c_str(), &db), SQLITE_OK);
    ASSERT_EQ(sqlite3_exec(db,
                           "DROP TRIGGER usage_on_insert; DROP TRIGGER usage_on_delete; "
                           "DROP TRIGGER usage_on_update; DROP TABLE usage_totals; "
                           "DROP TABLE reconciled; "
                           "DROP INDEX records_by_owner; DROP INDEX records_usage; "
                           "ALTER TABLE records DROP COLUMN owner_uid; "
                           "PRAGMA user_version=1",
                           nullptr, nullptr, nullptr),
              SQLITE_OK)
        << sqlite3_errmsg(db);
    sqlite3_close(db);
  }
  auto s = Store::Open(d.path(), TestOptions());
  ASSERT_TRUE(s.ok()) << s.status().message();
  EXPECT_EQ((*s)->Get(crash_id)->owner_uid, 1234u);
  EXPECT_EQ((*s)->Get(hist_id)->owner_uid, 1234u);
}

TEST(RetentionTest, DefaultsFollowSystemdCoredump) {
  TempDir d;
  auto s = Store::Open(d.path(), TestOptions());
  ASSERT_TRUE(s.ok());
  auto lim = (*s)->EffectiveLimits({});
  ASSERT_TRUE(lim.ok());
  struct statvfs v {};
  statvfs(d.path().c_str(), &v);
  uint64_t fs = static_cast<uint64_t>(v.f_blocks) * v.f_frsize;
  EXPECT_EQ(*lim->max_use, std::min<uint64_t>(fs / 10, 4ull << 30));
  EXPECT_EQ(*lim->keep_free, std::min<uint64_t>(fs * 15 / 100, 4ull << 30));
}

TEST(StoreTest, DefaultStoreDirFollowsUserAndEnvironment) {
  setenv("FLIGHTREC_STORE", "/tmp/x-store", 1);
  EXPECT_EQ(DefaultStoreDir(), "/tmp/x-store");
  unsetenv("FLIGHTREC_STORE");
  if (geteuid() == 0) {
    EXPECT_EQ(DefaultStoreDir(), "/var/lib/flightrec");
  }
  pid_t pid = fork();
  if (pid == 0) {
    // As an unprivileged user the store lives under XDG_STATE_HOME.
    if (setuid(65534) != 0 && geteuid() == 0) _exit(3);
    setenv("XDG_STATE_HOME", "/x/state", 1);
    _exit(DefaultStoreDir() == "/x/state/flightrec" ? 0 : 1);
  }
  int status = 0;
  waitpid(pid, &status, 0);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0);
}

}  // namespace
}  // namespace flightrec::store
