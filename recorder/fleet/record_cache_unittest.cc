// RecordCache with a fake object store (the real one is the S3 client's,
// tested against Ceph's gateway): what reaches a report is exactly the
// bytes the index vouches for, fetched once.
#include "recorder/fleet/record_cache.h"

#include <stdlib.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <vector>

#include <gtest/gtest.h>

#include "recorder/fleet/digest_pg.h"
#include "tests/support/files.h"

namespace flightrec::fleet {
namespace {

class FakeStore : public ObjectFetcher {
 public:
  Status Fetch(const std::string& key, int fd, uint64_t max_bytes) override {
    ++fetches;
    if (!error.ok()) return error;
    auto it = objects.find(key);
    if (it == objects.end()) return NotFound("no object " + key);
    if (it->second.size() > max_bytes) return Corrupt("object larger than announced");
    return write(fd, it->second.data(), it->second.size()) ==
                   static_cast<ssize_t>(it->second.size())
               ? OkStatus()
               : ErrnoStatus("write");
  }
  std::map<std::string, std::string> objects;
  Status error;
  int fetches = 0;
};

using flightrec::testing::TempDir;

constexpr uint64_t kCacheBytes = 64 << 20;

std::string ReadFile(const std::string& p) {
  std::ifstream in(p, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

// Files in the cache directory (temporaries included).
size_t Entries(const std::string& dir) {
  size_t n = 0;
  for ([[maybe_unused]] const auto& e : std::filesystem::directory_iterator(dir)) ++n;
  return n;
}

struct Fixture {
  TempDir tmp;
  FakeStore store;
  IndexRecord rec;
  std::string bytes = std::string("FREC") + std::string(100000, 'x') + "end";
  Fixture() {
    rec.host_id = "host-a";
    rec.record_id = "20261125T101500Z-0a0b0c";
    rec.object_key = "host-a/2026/11/25/20261125T101500Z-0a0b0c.frec";
    rec.sha256 = Sha256Hex(bytes);
    rec.bytes = bytes.size();
    store.objects[rec.object_key] = bytes;
  }
  std::string CacheDir() const { return tmp.path() + "/cache"; }
};

TEST(RecordCacheTest, FetchesOnceThenServesTheVerifiedCopy) {
  Fixture f;
  auto cache = RecordCache::Open(f.CacheDir(), kCacheBytes);
  ASSERT_TRUE(cache.ok()) << cache.status().ToString();
  auto p = cache->Get(f.rec, f.store);
  ASSERT_TRUE(p.ok()) << p.status().ToString();
  EXPECT_EQ(ReadFile(*p), f.bytes);
  auto again = cache->Get(f.rec, f.store);
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(*again, *p);
  EXPECT_EQ(f.store.fetches, 1);
  EXPECT_EQ(Entries(f.CacheDir()), 1u);
  EXPECT_EQ(std::filesystem::status(f.CacheDir()).permissions() & std::filesystem::perms::all,
            std::filesystem::perms::owner_all);
}

TEST(RecordCacheTest, ADamagedCachedFileIsFetchedAgain) {
  Fixture f;
  auto cache = RecordCache::Open(f.CacheDir(), kCacheBytes);
  auto p = cache->Get(f.rec, f.store);
  ASSERT_TRUE(p.ok());
  {
    std::fstream io(*p, std::ios::in | std::ios::out | std::ios::binary);
    io.seekp(10);
    io.put('Y');  // same size, other bytes
  }
  auto again = cache->Get(f.rec, f.store);
  ASSERT_TRUE(again.ok()) << again.status().ToString();
  EXPECT_EQ(ReadFile(*again), f.bytes);
  EXPECT_EQ(f.store.fetches, 2);
}

TEST(RecordCacheTest, BytesThatAreNotTheIndexsAreRefusedAndLeaveNothing) {
  Fixture f;
  auto cache = RecordCache::Open(f.CacheDir(), kCacheBytes);
  f.store.objects[f.rec.object_key][50] = 'Z';  // corrupted in the bucket
  auto p = cache->Get(f.rec, f.store);
  ASSERT_FALSE(p.ok());
  EXPECT_EQ(p.status().code(), StatusCode::kCorrupt);
  EXPECT_NE(p.status().message().find("SHA-256"), std::string::npos) << p.status().message();
  EXPECT_NE(p.status().message().find(f.rec.object_key), std::string::npos);
  EXPECT_EQ(Entries(f.CacheDir()), 0u) << "no partial or unverified file stays";
  // Truncated: the size says so before any hashing.
  f.store.objects[f.rec.object_key] = f.bytes.substr(0, 1000);
  p = cache->Get(f.rec, f.store);
  ASSERT_FALSE(p.ok());
  EXPECT_NE(p.status().message().find("1000 bytes where the index says"), std::string::npos)
      << p.status().message();
  EXPECT_EQ(Entries(f.CacheDir()), 0u);
}

TEST(RecordCacheTest, AStoreErrorIsPassedOnWithTheRecordNamed) {
  Fixture f;
  auto cache = RecordCache::Open(f.CacheDir(), kCacheBytes);
  f.store.error = Unavailable("gateway unreachable");
  auto p = cache->Get(f.rec, f.store);
  ASSERT_FALSE(p.ok());
  EXPECT_EQ(p.status().code(), StatusCode::kUnavailable);
  EXPECT_NE(p.status().message().find("record host-a/20261125T101500Z-0a0b0c"), std::string::npos)
      << p.status().message();
  EXPECT_EQ(Entries(f.CacheDir()), 0u);
}

TEST(RecordCacheTest, IdsThatAreNotTheStoresNeverBecomePaths) {
  Fixture f;
  auto cache = RecordCache::Open(f.CacheDir(), kCacheBytes);
  for (const char* id : {"../../etc/passwd", "20261125T101500Z-/../x", "", "x"}) {
    f.rec.record_id = id;
    EXPECT_EQ(cache->Get(f.rec, f.store).status().code(), StatusCode::kInvalidArgument) << id;
  }
  EXPECT_EQ(f.store.fetches, 0);
}

TEST(RecordCacheTest, TwoHostsRecordsOfOneIdAreKeptApart) {
  Fixture f;
  auto cache = RecordCache::Open(f.CacheDir(), kCacheBytes);
  IndexRecord other = f.rec;
  other.host_id = "host-b";
  other.object_key = "host-b/x.frec";
  const std::string other_bytes = "FREC other host";
  other.sha256 = Sha256Hex(other_bytes);
  other.bytes = other_bytes.size();
  f.store.objects[other.object_key] = other_bytes;
  auto a = cache->Get(f.rec, f.store);
  auto b = cache->Get(other, f.store);
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_NE(*a, *b);
  EXPECT_EQ(ReadFile(*a), f.bytes);
  EXPECT_EQ(ReadFile(*b), other_bytes);
}

TEST(RecordCacheTest, TheCacheStaysWithinItsSizeDroppingTheLeastRecentlyUsed) {
  Fixture f;
  std::vector<IndexRecord> recs;
  for (int i = 0; i < 4; ++i) {
    IndexRecord r = f.rec;
    r.record_id = "20261125T10150" + std::to_string(i) + "Z-0a0b0c";
    r.object_key = "host-a/2026/11/25/" + r.record_id + ".frec";
    const std::string bytes = "FREC" + std::string(100000, static_cast<char>('a' + i));
    r.sha256 = Sha256Hex(bytes);
    r.bytes = bytes.size();
    f.store.objects[r.object_key] = bytes;
    recs.push_back(r);
  }
  auto cache = RecordCache::Open(f.CacheDir(), 250000);  // two records fit
  ASSERT_TRUE(cache.ok()) << cache.status().ToString();
  auto cached = [&](const IndexRecord& r) { return std::filesystem::exists(*cache->PathFor(r)); };
  ASSERT_TRUE(cache->Get(recs[0], f.store).ok());
  ASSERT_TRUE(cache->Get(recs[1], f.store).ok());
  ASSERT_TRUE(cache->Get(recs[0], f.store).ok());  // used again: recs[1] is now the oldest
  ASSERT_TRUE(cache->Get(recs[2], f.store).ok());
  EXPECT_TRUE(cached(recs[0]));
  EXPECT_FALSE(cached(recs[1]));
  EXPECT_TRUE(cached(recs[2]));
  ASSERT_TRUE(cache->Get(recs[3], f.store).ok());
  EXPECT_FALSE(cached(recs[0]));
  EXPECT_EQ(Entries(f.CacheDir()), 2u);
  EXPECT_EQ(f.store.fetches, 4);
  // A record larger than the whole cache is refused before it is fetched.
  auto small = RecordCache::Open(f.CacheDir(), 50000);
  ASSERT_TRUE(small.ok());
  auto p = small->Get(recs[1], f.store);
  ASSERT_FALSE(p.ok());
  EXPECT_EQ(p.status().code(), StatusCode::kNoSpace);
  EXPECT_NE(p.status().message().find("CacheMaxUse="), std::string::npos) << p.status().message();
  EXPECT_EQ(f.store.fetches, 4);
}

}  // namespace
}  // namespace flightrec::fleet
