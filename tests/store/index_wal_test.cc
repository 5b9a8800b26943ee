// StoreOptions::checkpoint_index_on_close: a short-lived writer (the
// coredump hook) may leave the index's WAL behind instead of checkpointing
// it at every close, without a committed record ever being lost.
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <string>

#include "store/store.h"
#include "tests/support/files.h"
#include "tests/support/records.h"

namespace flightrec::store {
namespace {

using flightrec::testing::TempDir;
using testing::TestOptions;
using testing::WriteSmallRecord;

// Size of `path`, -1 when it does not exist.
off_t SizeOf(const std::string& path) {
  struct stat sb;
  return stat(path.c_str(), &sb) == 0 ? sb.st_size : -1;
}

// Commits one record in a store opened with `checkpoint`, closes it; gives
// the record's id.
std::string CommitOne(const std::string& dir, bool checkpoint) {
  StoreOptions o = TestOptions();
  o.checkpoint_index_on_close = checkpoint;
  auto s = Store::Open(dir, o);
  EXPECT_TRUE(s.ok()) << s.status().ToString();
  if (!s.ok()) return "";
  auto row = WriteSmallRecord(**s, "payload");
  EXPECT_TRUE(row.ok()) << row.status().ToString();
  return row.ok() ? row->id : "";
}

TEST(IndexWalTest, DefaultCloseCheckpointsAndEmptiesTheWal) {
  TempDir d;
  ASSERT_FALSE(CommitOne(d.path(), true).empty());
  // Kept, empty (SQLITE_FCNTL_PERSIST_WAL: its name stays so that opening
  // the store does not change the directory).
  EXPECT_EQ(SizeOf(d.path() + "/index.sqlite-wal"), 0);
}

TEST(IndexWalTest, WithoutCheckpointTheRowIsInTheWalAndReadersSeeIt) {
  TempDir d;
  std::string id = CommitOne(d.path(), false);
  ASSERT_FALSE(id.empty());
  // The row's pages were not copied into the index: they are in the WAL.
  EXPECT_GT(SizeOf(d.path() + "/index.sqlite-wal"), 0);
  StoreOptions ro = TestOptions();
  ro.read_only = true;
  auto r = Store::Open(d.path(), ro);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  auto got = (*r)->Get(id);
  ASSERT_TRUE(got.ok()) << got.status().ToString();
  EXPECT_EQ(got->id, id);
}

TEST(IndexWalTest, ARowLostWithTheUnsyncedWalIsReindexedFromTheDurableFile) {
  TempDir d;
  std::string first = CommitOne(d.path(), true);
  std::string id = CommitOne(d.path(), false);
  ASSERT_FALSE(id.empty());
  // A power loss may drop WAL frames that were never synced: drop them all.
  ASSERT_EQ(unlink((d.path() + "/index.sqlite-wal").c_str()), 0);
  unlink((d.path() + "/index.sqlite-shm").c_str());
  auto s = Store::Open(d.path(), TestOptions());
  ASSERT_TRUE(s.ok()) << s.status().ToString();
  EXPECT_EQ((*s)->recovery().reindexed, 1);
  auto got = (*s)->Get(id);
  ASSERT_TRUE(got.ok()) << got.status().ToString();
  EXPECT_EQ(got->id, id);
  EXPECT_TRUE((*s)->Get(first).ok());
}

}  // namespace
}  // namespace flightrec::store
