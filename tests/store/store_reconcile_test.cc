// Store::Open walks the store directory only when it changed since the last
// reconcile (store/reconcile.cc), and retention's totals are kept by
// triggers: what recovery finds must still be found, and the totals must
// equal a recount.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <sqlite3.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <set>
#include <string>

#include "tests/support/files.h"
#include "tests/support/records.h"
#include "tests/support/run.h"

namespace flightrec::store {
namespace {

using flightrec::testing::RunInChild;
using flightrec::testing::TempDir;
using testing::TestOptions;
using testing::WriteSmallRecord;

std::unique_ptr<Store> OpenOk(const std::string& dir, StoreOptions o = TestOptions()) {
  auto s = Store::Open(dir, o);
  EXPECT_TRUE(s.ok()) << s.status().message();
  return s.ok() ? std::move(*s) : nullptr;
}

TEST(ReconcileTest, AnUnchangedDirectoryIsNotWalked) {
  TempDir d;
  std::string id;
  // A new store: nothing to compare with. Its first walk creates by-uid/, and
  // a walk that changed the directory stamps nothing: the next one does.
  EXPECT_TRUE(OpenOk(d.path())->recovery().walked);
  {
    auto s = OpenOk(d.path());
    EXPECT_TRUE(s->recovery().walked);
    id = WriteSmallRecord(*s, "a")->id;
  }
  // The store's own commit moved the stamp on: no walk.
  auto s = OpenOk(d.path());
  EXPECT_FALSE(s->recovery().walked);
  // Nor after another store's commit, a grant, or retention's removals.
  auto other = OpenOk(d.path());
  ASSERT_TRUE(WriteSmallRecord(*other, "b").ok());
  ASSERT_TRUE(WriteSmallRecord(*other, "c").ok());
  ASSERT_TRUE(other->GrantReader(id, 65534).ok());
  EXPECT_FALSE(OpenOk(d.path())->recovery().walked);
  RetentionLimits lim;
  lim.max_count = 1;
  lim.max_use = UINT64_MAX;
  lim.keep_free = 0;
  auto v = other->Vacuum(lim, false, std::set<std::string>{});
  ASSERT_TRUE(v.ok());
  EXPECT_EQ(v->removed.size(), 2u);
  auto after = OpenOk(d.path());
  EXPECT_FALSE(after->recovery().walked);
  EXPECT_EQ(after->List({})->size(), 1u);
  // Asked for (recorderd's start, `recorder verify`): a walk all the same.
  StoreOptions full = TestOptions();
  full.full_recovery = true;
  EXPECT_TRUE(OpenOk(d.path(), full)->recovery().walked);
}

// The case coarse timestamps make hard: a file planted right after the
// store's own commit, within the same clock tick, changes neither mtime nor
// ctime from what the commit left; the store's mark on the directory is
// what lets the next open see it.
TEST(ReconcileTest, FilesPlantedRightAfterOurCommitAreFoundByTheNextOpen) {
  TempDir d;
  OpenOk(d.path());  // a new store's walk creates by-uid/ (see above)
  OpenOk(d.path());
  const auto hostile = testing::HostileRecords().front();
  // Each file alone, at once after the commit: on a filesystem with coarse
  // timestamps (ext4 before Linux 6.13, ext2) it often lands in the same
  // tick as the commit's rename. With the mark left out, this test failed 2
  // runs in 4 with TMPDIR on a loop-mounted ext2 (never with the mark); on
  // a kernel with multigrain ctime it passes either way.
  const std::string unindexed = [&] {
    auto s = OpenOk(d.path());
    EXPECT_FALSE(s->recovery().walked);
    TempDir other;
    auto o = OpenOk(other.path());
    auto row = WriteSmallRecord(*o, "planted");
    std::string bytes = flightrec::testing::ReadFile(other.path() + "/" + row->file);
    EXPECT_TRUE(WriteSmallRecord(*s, "ours").ok());
    std::ofstream(d.path() + "/" + row->file, std::ios::binary) << bytes;
    return row->id;
  }();
  auto next = OpenOk(d.path());
  EXPECT_TRUE(next->recovery().walked);
  EXPECT_EQ(next->recovery().reindexed, 1);
  EXPECT_TRUE(next->Get(unindexed).ok());
  next.reset();
  {
    auto s = OpenOk(d.path());
    EXPECT_FALSE(s->recovery().walked);
    EXPECT_TRUE(WriteSmallRecord(*s, "ours").ok());
    std::ofstream(d.path() + "/20200101T000000Z-0000aa.frec", std::ios::binary) << hostile.second;
  }
  next = OpenOk(d.path());
  EXPECT_TRUE(next->recovery().walked);
  EXPECT_EQ(next->recovery().quarantined.size(), 1u);
  next.reset();
  // A walk that changed the directory (the quarantine) stamps nothing; the
  // next one finds it clean and stamps it.
  EXPECT_TRUE(OpenOk(d.path())->recovery().walked);
  {
    auto s = OpenOk(d.path());
    EXPECT_FALSE(s->recovery().walked);
    EXPECT_TRUE(WriteSmallRecord(*s, "ours").ok());
    std::ofstream(d.path() + "/.tmp-dead") << "half a record";
  }
  next = OpenOk(d.path());
  EXPECT_TRUE(next->recovery().walked);
  EXPECT_EQ(next->recovery().temporaries_removed, 1);
  EXPECT_FALSE(std::filesystem::exists(d.path() + "/.tmp-dead"));
}

TEST(ReconcileTest, ChangesAfterAnOpenThatDidNotWalkAreFound) {
  TempDir d;
  std::string lost;
  OpenOk(d.path());  // a new store's walk creates by-uid/ (see above)
  {
    auto s = OpenOk(d.path());
    ASSERT_TRUE(WriteSmallRecord(*s, "kept").ok());
    lost = WriteSmallRecord(*s, "lost")->id;
  }
  auto quiet = OpenOk(d.path());
  ASSERT_FALSE(quiet->recovery().walked);
  std::filesystem::remove(d.path() + "/" + lost + ".frec");  // behind the store's back
  auto next = OpenOk(d.path());
  EXPECT_TRUE(next->recovery().walked);
  EXPECT_EQ(next->recovery().marked_missing, 1);
  EXPECT_EQ(next->Get(lost)->state, "missing");
}

TEST(ReconcileTest, AFileRenamedInWithoutItsIndexRowIsIndexedByTheNextOpen) {
  TempDir d;
  auto s = OpenOk(d.path());
  ASSERT_TRUE(WriteSmallRecord(*s, "first").ok());
  // A writer killed between its rename and its index row: the record file is
  // complete and in place, the stamp was not moved on.
  auto rec = s->BeginRecord("dump");
  ASSERT_TRUE(rec.ok());
  ASSERT_TRUE((*rec)->writer().AddSection("events", "orphan").ok());
  ASSERT_TRUE((*rec)->writer().Finish(nlohmann::json::object()).ok());
  const std::string id = (*rec)->id();
  ASSERT_EQ(rename((d.path() + "/tmp/.tmp-" + id).c_str(), (d.path() + "/" + id + ".frec").c_str()),
            0);
  rec->reset();
  auto next = OpenOk(d.path());
  EXPECT_TRUE(next->recovery().walked);
  EXPECT_EQ(next->recovery().reindexed, 1);
  EXPECT_EQ(*(*next->OpenRecord(id))->ReadSection("events"), "orphan");
}

TEST(ReconcileTest, ADeadWritersTemporaryGoesWithoutAWalk) {
  TempDir d;
  OpenOk(d.path());
  // The writer dies holding its temporary: the store directory itself does
  // not change, tmp/ is looked at on every open.
  ASSERT_EQ(RunInChild([&] {
              auto s = Store::Open(d.path(), TestOptions());
              if (!s.ok()) return 1;
              auto rec = (*s)->BeginRecord("dump");
              if (!rec.ok() || !(*rec)->writer().AddSection("events", "x").ok()) return 2;
              _exit(0);  // no destructor removes the temporary
            }),
            0);
  ASSERT_EQ(std::distance(std::filesystem::directory_iterator(d.path() + "/tmp"),
                          std::filesystem::directory_iterator()),
            1);
  auto next = OpenOk(d.path());
  EXPECT_FALSE(next->recovery().walked);
  EXPECT_EQ(next->recovery().temporaries_removed, 1);
  EXPECT_TRUE(std::filesystem::is_empty(d.path() + "/tmp"));
}

TEST(ReconcileTest, AFilePlantedInByUidRightAfterAGrantIsFound) {
  TempDir d;
  std::string dir = d.path() + "/store";
  auto s = OpenOk(dir);
  auto row = WriteSmallRecord(*s, "granted");
  ASSERT_TRUE(row.ok());
  ASSERT_TRUE(s->GrantReader(row->id, 65534).ok());
  std::ofstream(dir + "/by-uid/65534/planted.frec") << "not a link";
  ASSERT_EQ(symlink("../../20200101T000000Z-000000.frec",
                    (dir + "/by-uid/65534/20200101T000000Z-000000.frec").c_str()),
            0);
  auto next = OpenOk(dir);
  EXPECT_TRUE(next->recovery().walked);
  EXPECT_EQ(next->recovery().foreign_in_by_uid, 1);
  EXPECT_EQ(next->recovery().links_removed, 1);
}

// Usage() (from the totals the triggers keep) against a recount of the rows.
void ExpectTotalsMatchARecount(Store& s) {
  auto usage = s.index().Usage();
  ASSERT_TRUE(usage.ok()) << usage.status().message();
  nlohmann::json got = nlohmann::json::array();
  for (const auto& u : *usage) {
    got.push_back({{"owner_uid", u.owner_uid},
                   {"n", u.count},
                   {"bytes", u.bytes},
                   {"oldest", u.oldest_created_ns}});
  }
  std::sort(got.begin(), got.end(),
            [](const auto& a, const auto& b) { return a["owner_uid"] < b["owner_uid"]; });
  auto want = s.index().QueryReadOnly(
      "SELECT owner_uid, count(*) AS n, sum(file_size) AS bytes, min(created_ns) AS oldest "
      "FROM records WHERE state <> 'missing' GROUP BY owner_uid ORDER BY owner_uid");
  ASSERT_TRUE(want.ok()) << want.status().message();
  EXPECT_EQ(got, *want);
}

// root opening a store a user made (`recorder list` as root on the store of
// an unprivileged `recorder record`), one from before tmp/ existed: accepted,
// and the tmp/ it creates is the user's, who can still write records.
TEST(ReconcileTest, RootOpeningAUsersStoreLeavesTmpToTheUser) {
  ASSERT_EQ(geteuid(), 0u) << "needs root (chown)";
  TempDir d;
  ASSERT_EQ(chmod(d.path().c_str(), 0777), 0);
  const std::string st = d.path() + "/store";
  auto as_user = [&](const char* payload) {
    return RunInChild([&] {
      if (setgid(65534) != 0 || setuid(65534) != 0) return 3;
      auto s = Store::Open(st, TestOptions());
      return s.ok() && WriteSmallRecord(**s, payload).ok() ? 0 : 1;
    });
  };
  ASSERT_EQ(as_user("a"), 0);
  ASSERT_EQ(rmdir((st + "/tmp").c_str()), 0);  // a store from before tmp/
  {
    auto s = OpenOk(st);
    ASSERT_NE(s, nullptr);
    EXPECT_EQ(s->List({}).value().size(), 1u);
  }
  struct stat tmp {};
  ASSERT_EQ(stat((st + "/tmp").c_str(), &tmp), 0);
  EXPECT_EQ(tmp.st_uid, 65534u);
  EXPECT_EQ(tmp.st_mode & 0777, 0700u);
  EXPECT_EQ(as_user("b"), 0);  // a temporary goes into tmp/ on the way
  // A tmp/ that is not the store owner's is refused.
  ASSERT_EQ(chown((st + "/tmp").c_str(), 0, 0), 0);
  auto bad = Store::Open(st, TestOptions());
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("not owned by the store's owner"), std::string::npos);
}

TEST(TotalsTest, TotalsEqualARecountAfterCommitsRetentionAndRemovals) {
  TempDir d;
  auto s = OpenOk(d.path());
  std::vector<std::string> ids;
  for (int i = 0; i < 12; ++i) {
    nlohmann::json meta = nlohmann::json::object();
    if (i % 3 == 1) meta["owner_uid"] = 1000 + i % 2;
    ids.push_back(WriteSmallRecord(*s, std::string(100 + 50 * i, 'x'), meta)->id);
  }
  // A crash naming a history dump makes the dump its user's (an UPDATE).
  auto crash = WriteSmallRecord(*s, "c", {{"crash", {{"uid", 2000}, {"history", ids[0]}}}});
  ASSERT_TRUE(crash.ok());
  ExpectTotalsMatchARecount(*s);
  EXPECT_EQ(s->Get(ids[0])->owner_uid, 2000u);
  // Retention's removals (DELETE).
  RetentionLimits lim;
  lim.max_count = 9;
  lim.max_use = UINT64_MAX;
  lim.keep_free = 0;
  auto v = s->Vacuum(lim, false, std::set<std::string>{});
  ASSERT_TRUE(v.ok());
  EXPECT_EQ(v->removed.size(), 4u);
  ExpectTotalsMatchARecount(*s);
  // A file removed behind the store's back: the walk marks its row missing,
  // which no longer counts; a verify that finds the file back counts it again.
  const std::string file = s->Get(ids[11])->file;
  TempDir aside;
  std::filesystem::rename(d.path() + "/" + file, aside.path() + "/" + file);
  auto next = OpenOk(d.path());
  EXPECT_EQ(next->recovery().marked_missing, 1);
  ExpectTotalsMatchARecount(*next);
  std::filesystem::rename(aside.path() + "/" + file, d.path() + "/" + file);
  ASSERT_TRUE(next->Verify(ids[11]).ok());
  EXPECT_EQ(next->Get(ids[11])->state, "ok");
  ExpectTotalsMatchARecount(*next);
  // Re-indexing an existing row (DELETE then INSERT) and removing every row.
  ASSERT_TRUE(next->index().Upsert(*next->Get(ids[11])).ok());
  ExpectTotalsMatchARecount(*next);
  auto rows = next->List({});
  ASSERT_TRUE(rows.ok());
  ASSERT_EQ(rows->size(), 9u);
  for (const auto& r : *rows) ASSERT_TRUE(next->index().Delete(r.id).ok());
  ExpectTotalsMatchARecount(*next);
  EXPECT_TRUE(next->index().Usage()->empty());
}

TEST(TotalsTest, AVersionTwoIndexGetsItsTotalsOnMigration) {
  TempDir d;
  {
    auto s = OpenOk(d.path());
    ASSERT_TRUE(WriteSmallRecord(*s, "a").ok());
    ASSERT_TRUE(WriteSmallRecord(*s, "bb", {{"owner_uid", 7}}).ok());
  }
  {
    // Back to what a version 2 index holds.
    sqlite3* db = nullptr;
    ASSERT_EQ(sqlite3_open((d.path() + "/index.sqlite").c_str(), &db), SQLITE_OK);
    ASSERT_EQ(sqlite3_exec(db,
                           "DROP TRIGGER usage_on_insert; DROP TRIGGER usage_on_delete; "
                           "DROP TRIGGER usage_on_update; DROP TABLE usage_totals; "
                           "DROP TABLE reconciled; PRAGMA user_version=2",
                           nullptr, nullptr, nullptr),
              SQLITE_OK)
        << sqlite3_errmsg(db);
    sqlite3_close(db);
  }
  auto s = OpenOk(d.path());
  EXPECT_TRUE(s->recovery().walked);
  ExpectTotalsMatchARecount(*s);
  EXPECT_EQ(s->index().Usage()->size(), 2u);
  ASSERT_TRUE(WriteSmallRecord(*s, "ccc", {{"owner_uid", 7}}).ok());
  ExpectTotalsMatchARecount(*s);
  EXPECT_FALSE(OpenOk(d.path())->recovery().walked);
}

}  // namespace
}  // namespace flightrec::store
