// The store commands as a user sees them: exit codes, messages, --json.
#include <grp.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <map>
#include <optional>

#include <fmt/format.h>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "tests/support/files.h"
#include "tests/support/records.h"
#include "tests/support/run.h"

namespace flightrec {
namespace {

using testing::BuildPath;
using testing::RunCommand;

// RunCommand as another user.
testing::RunResult RunAs(uid_t uid, const std::vector<std::string>& argv) {
  return RunCommand(argv, {}, uid);
}

class StoreCliTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto s = store::Store::Open(dir_.path(), store::testing::TestOptions());
    ASSERT_TRUE(s.ok());
    nlohmann::json meta = {{"reason", "cli test"},
                           {"pids", {4242}},
                           {"processes", {{{"pid", 4242}, {"exe", "/usr/bin/x"}, {"comm", "x"}}}}};
    a_ = *store::testing::WriteSmallRecord(**s, "first", meta);
    b_ = *store::testing::WriteSmallRecord(**s, "second");
  }
  testing::RunResult Cli(std::vector<std::string> args) {
    args.insert(args.begin(), {BuildPath("recorder/cli/recorder"), "--store", dir_.path()});
    return RunCommand(args);
  }
  testing::TempDir dir_;
  store::RecordRow a_, b_;
};

TEST_F(StoreCliTest, ListShowsRecordsAndFilters) {
  auto r = Cli({"list"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find(a_.id), std::string::npos);
  EXPECT_NE(r.out.find(b_.id), std::string::npos);
  EXPECT_NE(r.out.find("cli test"), std::string::npos);
  r = Cli({"list", "--pid", "4242", "--json"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  auto j = nlohmann::json::parse(r.out);
  ASSERT_EQ(j.size(), 1u);
  EXPECT_EQ(j[0]["id"], a_.id);
  r = Cli({"list", "--since", "garbage"});
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.err.find("invalid time"), std::string::npos);
}

TEST_F(StoreCliTest, InfoByNewestAndUnknownId) {
  auto r = Cli({"info", "-1", "--json"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  auto j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["id"], b_.id);
  EXPECT_EQ(j["sections"].size(), 2u);
  r = Cli({"info", "does-not-exist"});
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.err.find("no record matches"), std::string::npos);
  EXPECT_TRUE(r.out.empty());
}

TEST_F(StoreCliTest, VerifyFailsAndNamesTheDamagedRecord) {
  EXPECT_EQ(Cli({"verify"}).exit_code, 0);
  std::string path = dir_.path() + "/" + a_.file;
  std::fstream f(path, std::ios::in | std::ios::out | std::ios::binary);
  f.seekp(static_cast<std::streamoff>(a_.file_size / 2));
  f.put('\x7f');
  f.close();
  auto r = Cli({"verify"});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.out.find(a_.id), std::string::npos) << r.out;
  EXPECT_EQ(r.out.find("BAD  " + b_.id), std::string::npos);
  EXPECT_EQ(Cli({"verify", b_.id}).exit_code, 0);
}

// Issue 13 item 6: verify --json says which record and which section is bad.
TEST_F(StoreCliTest, VerifyJsonGivesEachRecordAndSection) {
  auto good = Cli({"verify", "--json"});
  ASSERT_EQ(good.exit_code, 0) << good.err;
  auto j = nlohmann::json::parse(good.out);
  EXPECT_EQ(j["ok"], true);
  ASSERT_EQ(j["records"].size(), 2u);
  std::string path = dir_.path() + "/" + a_.file;
  // Damage the last stored byte of the first section (`events`).
  {
    auto rd = store::RecordReader::Open(path);
    ASSERT_TRUE(rd.ok());
    const auto* sec = (*rd)->FindSection("events");
    ASSERT_NE(sec, nullptr);
    std::fstream f(path, std::ios::in | std::ios::out | std::ios::binary);
    f.seekg(static_cast<std::streamoff>(sec->offset + sec->stored_size - 1));
    char c = static_cast<char>(f.get());
    f.seekp(static_cast<std::streamoff>(sec->offset + sec->stored_size - 1));
    f.put(static_cast<char>(c ^ 0x55));
  }
  auto bad = Cli({"verify", "--json"});
  EXPECT_EQ(bad.exit_code, 1);
  j = nlohmann::json::parse(bad.out);
  EXPECT_EQ(j["ok"], false);
  for (const auto& r : j["records"]) {
    if (r["id"] != a_.id) {
      EXPECT_EQ(r["ok"], true) << r;
      continue;
    }
    EXPECT_EQ(r["ok"], false);
    ASSERT_EQ(r["sections"].size(), 2u) << r;
    EXPECT_EQ(r["sections"][0]["name"], "events");
    EXPECT_EQ(r["sections"][0]["ok"], false);
    EXPECT_NE(r["sections"][0]["error"].get<std::string>().find("checksum"), std::string::npos);
    EXPECT_EQ(r["sections"][1]["name"], "config");
    EXPECT_EQ(r["sections"][1]["ok"], true);  // the rest of the record is still good
  }
}

// Issue 13 item 6: any unique part of an id names the record; an ambiguous
// part lists the candidates; --store may follow the command.
TEST_F(StoreCliTest, IdsMatchByAnyUniquePartAndAmbiguityListsCandidates) {
  const std::string suffix = a_.id.substr(a_.id.find('-') + 1);
  auto r = Cli({"info", suffix, "--json"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(nlohmann::json::parse(r.out)["id"], a_.id);
  // A middle part: the seconds and the dash and the suffix's start.
  r = Cli({"info", a_.id.substr(13, 6), "--json"});
  if (b_.id.find(a_.id.substr(13, 6)) == std::string::npos) {
    ASSERT_EQ(r.exit_code, 0) << r.err;
    EXPECT_EQ(nlohmann::json::parse(r.out)["id"], a_.id);
  }
  // "Z-" is in every id: ambiguous, both named.
  r = Cli({"info", "Z-"});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("ambiguous: 2 records match"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find(a_.id), std::string::npos) << r.err;
  EXPECT_NE(r.err.find(b_.id), std::string::npos) << r.err;
  r = Cli({"info", "Z-zz"});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.err.find("no record matches 'Z-zz'"), std::string::npos) << r.err;
  // Many matches: a bounded list.
  auto s = store::Store::Open(dir_.path(), store::testing::TestOptions());
  ASSERT_TRUE(s.ok());
  for (int i = 0; i < 12; ++i) ASSERT_TRUE(store::testing::WriteSmallRecord(**s, "x").ok());
  r = Cli({"info", "Z-"});
  EXPECT_NE(r.err.find("ambiguous: 14 records match"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("and 6 more"), std::string::npos) << r.err;
  // --store after the command.
  r = RunCommand({BuildPath("recorder/cli/recorder"), "list", "--json", "--store", dir_.path()});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(nlohmann::json::parse(r.out).size(), 14u);
}

// Issue 13 item 6: the README says every command has --json; so does each
// command's --help.
TEST(CliHelpTest, EveryCommandHasJson) {
  const std::vector<std::vector<std::string>> commands = {{"list"},
                                                          {"info"},
                                                          {"verify"},
                                                          {"vacuum"},
                                                          {"sql"},
                                                          {"dump"},
                                                          {"status"},
                                                          {"trigger", "add"},
                                                          {"trigger", "list"},
                                                          {"trigger", "remove"},
                                                          {"record"},
                                                          {"script"},
                                                          {"report"},
                                                          {"timeline"},
                                                          {"export"},
                                                          {"flamegraph"},
                                                          {"crash", "list"},
                                                          {"crash", "info"},
                                                          {"crash", "core"},
                                                          {"crash", "debug"},
                                                          {"coredump", "install"},
                                                          {"coredump", "uninstall"}};
  for (auto args : commands) {
    std::string name = args.size() == 2 ? args[0] + " " + args[1] : args[0];
    args.insert(args.begin(), BuildPath("recorder/cli/recorder"));
    args.push_back("--help");
    auto r = RunCommand(args);
    EXPECT_EQ(r.exit_code, 0) << name << ": " << r.err;
    EXPECT_NE(r.out.find("--json"), std::string::npos) << name << ":\n" << r.out;
  }
}

TEST_F(StoreCliTest, VacuumDryRunThenForReal) {
  auto r = Cli({"vacuum", "--max-count", "1", "--dry-run", "--json"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  auto j = nlohmann::json::parse(r.out);
  ASSERT_EQ(j["removed"].size(), 1u);
  EXPECT_EQ(j["removed"][0], a_.id);
  EXPECT_EQ(nlohmann::json::parse(Cli({"list", "--json"}).out).size(), 2u);
  ASSERT_EQ(Cli({"vacuum", "--max-count", "1"}).exit_code, 0);
  EXPECT_EQ(nlohmann::json::parse(Cli({"list", "--json"}).out).size(), 1u);
  EXPECT_NE(Cli({"vacuum", "--max-use", "lots"}).exit_code, 0);
}

TEST_F(StoreCliTest, SqlReadsButNeverWrites) {
  auto r = Cli({"sql", "SELECT pid, exe FROM record_processes", "--json"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  auto j = nlohmann::json::parse(r.out);
  ASSERT_EQ(j.size(), 1u);
  EXPECT_EQ(j[0]["pid"], 4242);
  r = Cli({"sql", "DROP TABLE records"});
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.err.find("read-only"), std::string::npos);
  EXPECT_EQ(nlohmann::json::parse(Cli({"list", "--json"}).out).size(), 2u);
}

// Item 3 of issue 11: one hostile file in the store used to kill `recorder
// list` (and the hook and the daemon, which recover the same way).
TEST_F(StoreCliTest, HostileRecordFilesAreQuarantinedByList) {
  auto hostile = store::testing::HostileRecords();
  for (const auto& [name, bytes] : hostile) {
    std::ofstream(dir_.path() + "/" + name, std::ios::binary) << bytes;
  }
  // Readable, but every field the index and the listing read has a wrong type.
  std::string odd = "20200101T000000Z-0000aa";
  std::ofstream(dir_.path() + "/" + odd + ".frec", std::ios::binary) << store::testing::CraftRecord(
      store::testing::GoodHeader(odd),
      R"({"sections":[],"meta":{"reason":5,"pids":["a"],"processes":[{"pid":"x",)"
      R"("exe":5}],"crash":{"pid":"x","exe":[],"signal":"s","tid":{}}}})");
  auto r = Cli({"list"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find(a_.id), std::string::npos);
  EXPECT_NE(r.out.find(odd), std::string::npos) << r.out;
  for (const auto& [name, bytes] : hostile) {
    EXPECT_TRUE(std::filesystem::exists(dir_.path() + "/quarantine/" + name)) << name;
    EXPECT_NE(r.err.find("quarantined " + dir_.path() + "/" + name), std::string::npos)
        << name << "\n"
        << r.err;
  }
  r = Cli({"info", odd});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  r = Cli({"list", "--json"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(nlohmann::json::parse(r.out).size(), 3u);
  // A record committed afterwards is listed.
  auto s = store::Store::Open(dir_.path(), store::testing::TestOptions());
  ASSERT_TRUE(s.ok()) << s.status().message();
  auto c = store::testing::WriteSmallRecord(**s, "third");
  ASSERT_TRUE(c.ok()) << c.status().message();
  r = Cli({"list"});
  EXPECT_NE(r.out.find(c->id), std::string::npos);
}

// Runs the CLI on `store` under timeout(1): 137 if it was still running
// after 30 s (a blocked open), else the CLI's own exit code.
testing::RunResult CliWithin30s(const std::string& store, const std::vector<std::string>& args,
                                std::optional<uid_t> uid = std::nullopt) {
  std::vector<std::string> argv = {
      "/usr/bin/timeout", "-s", "KILL", "30", BuildPath("recorder/cli/recorder"), "--store", store};
  argv.insert(argv.end(), args.begin(), args.end());
  return RunCommand(argv, {}, uid);
}

TEST_F(StoreCliTest, AFifoNamedLikeARecordBlocksNoCommand) {
  // open(O_RDONLY) of a FIFO waits for a writer: a FIFO among the records
  // hung `recorder list` (recovery) and every command reading that record.
  const std::string fifo = "20200101T000000Z-0000f1.frec";
  ASSERT_EQ(mkfifo((dir_.path() + "/" + fifo).c_str(), 0644), 0);
  // An indexed record replaced by a FIFO, in a store from before by-uid/
  // (whose recovery opens every record to read its ACL).
  ASSERT_EQ(unlink((dir_.path() + "/" + b_.file).c_str()), 0);
  ASSERT_EQ(mkfifo((dir_.path() + "/" + b_.file).c_str(), 0644), 0);
  std::error_code ec;
  std::filesystem::remove_all(dir_.path() + "/by-uid", ec);
  auto r = CliWithin30s(dir_.path(), {"list"});
  ASSERT_EQ(r.exit_code, 0) << "list blocked or failed\n" << r.err;
  EXPECT_NE(r.out.find(a_.id), std::string::npos) << r.out;
  EXPECT_NE(r.err.find("quarantined " + dir_.path() + "/" + fifo), std::string::npos) << r.err;
  struct stat st {};
  ASSERT_EQ(lstat((dir_.path() + "/quarantine/" + fifo).c_str(), &st), 0);
  EXPECT_TRUE(S_ISFIFO(st.st_mode));
  r = CliWithin30s(dir_.path(), {"verify"});
  EXPECT_EQ(r.exit_code, 1) << r.out << r.err;
  EXPECT_NE((r.out + r.err).find(b_.id), std::string::npos) << r.out << r.err;
  r = CliWithin30s(dir_.path(), {"info", b_.id});
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.exit_code, 137) << "info blocked on the FIFO";
  r = CliWithin30s(dir_.path(), {"info", a_.id});
  EXPECT_EQ(r.exit_code, 0) << r.err;
}

TEST_F(StoreCliTest, AFifoInPlaceOfAGrantedRecordBlocksNoListOfAnotherUser) {
  const uid_t nobody = 65534;
  ASSERT_EQ(chmod(dir_.path().c_str(), 0755), 0);
  const std::string store_dir = dir_.path() + "/store";
  std::string fifo_file, kept_id;
  {
    auto s = store::Store::Open(store_dir, store::testing::TestOptions());
    ASSERT_TRUE(s.ok());
    auto gone = store::testing::WriteSmallRecord(**s, "replaced by a FIFO");
    auto kept = store::testing::WriteSmallRecord(**s, "kept");
    ASSERT_TRUE(gone.ok() && kept.ok());
    ASSERT_TRUE((*s)->GrantReader(gone->id, nobody).ok());
    ASSERT_TRUE((*s)->GrantReader(kept->id, nobody).ok());
    fifo_file = gone->file;
    kept_id = kept->id;
  }
  ASSERT_EQ(unlink((store_dir + "/" + fifo_file).c_str()), 0);
  ASSERT_EQ(mkfifo((store_dir + "/" + fifo_file).c_str(), 0644), 0);
  // And one in nobody's by-uid/ directory.
  const std::string byuid_fifo = store_dir + "/by-uid/65534/20200101T000000Z-0000f2.frec";
  ASSERT_EQ(mkfifo(byuid_fifo.c_str(), 0644), 0);
  for (const std::vector<std::string>& cmd :
       {std::vector<std::string>{"list"}, {"crash", "list"}}) {
    auto r = CliWithin30s(store_dir, cmd, nobody);
    EXPECT_EQ(r.exit_code, 0) << cmd[0] << " blocked or failed\n" << r.err;
    if (cmd[0] == "list") {
      EXPECT_NE(r.out.find(kept_id), std::string::npos) << r.out;
    }
  }
}

// Item 7 of issue 11: retention took the oldest record whoever owned it, so
// one user's crashes evicted root's. Now the heaviest user pays first.
TEST(StoreCliRetentionTest, VacuumTakesFromTheHeaviestUserFirst) {
  testing::TempDir d;
  auto s = store::Store::Open(d.path(), store::testing::TestOptions());
  ASSERT_TRUE(s.ok());
  std::string noise(40000, '\0');
  uint64_t x = 1;
  for (auto& c : noise) c = static_cast<char>((x = x * 6364136223846793005ull + 1) >> 56);
  auto root_old =
      store::testing::WriteSmallRecord(**s, noise.substr(0, 10000), {{"crash", {{"uid", 0}}}});
  auto user1 = store::testing::WriteSmallRecord(**s, noise, {{"crash", {{"uid", 1000}}}});
  auto user2 = store::testing::WriteSmallRecord(**s, noise, {{"crash", {{"uid", 1000}}}});
  ASSERT_TRUE(root_old.ok() && user1.ok() && user2.ok());
  uint64_t total = root_old->file_size + user1->file_size + user2->file_size;
  auto r = RunCommand({BuildPath("recorder/cli/recorder"), "--store", d.path(), "vacuum",
                       "--keep-free", "0", "--max-use", std::to_string(total - 1000), "--json"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  auto j = nlohmann::json::parse(r.out);
  ASSERT_EQ(j["removed"].size(), 1u) << r.out;
  EXPECT_EQ(j["removed"][0], user1->id) << "root's older record was evicted by a user's crashes";
}

// Low item of issue 11: `recorder sql` accepted ATTACH (which creates files)
// and PRAGMA writable_schema=ON, had no time or output limit, and ran
// recovery (rewriting rows) on the store it queried.
TEST_F(StoreCliTest, SqlRefusesAttachAndWritingPragmas) {
  std::string evil = dir_.path() + "/attached.db";
  auto r = Cli({"sql", "ATTACH '" + evil + "' AS e"});
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.err.find("refused"), std::string::npos) << r.err;
  EXPECT_FALSE(std::filesystem::exists(evil));
  r = Cli({"sql", "PRAGMA writable_schema=ON"});
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.err.find("refused"), std::string::npos) << r.err;
  r = Cli({"sql", "PRAGMA user_version=99"});
  EXPECT_NE(r.exit_code, 0);
  // Reading the schema still works.
  r = Cli({"sql", "PRAGMA table_info(records)", "--json"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_GT(nlohmann::json::parse(r.out).size(), 10u);
  r = Cli({"sql", "PRAGMA user_version", "--json"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
}

TEST_F(StoreCliTest, SqlHasATimeAndAnOutputLimit) {
  auto start = std::chrono::steady_clock::now();
  auto r = Cli({"sql", "--timeout", "0.5",
                "WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c) "
                "SELECT count(*) FROM c"});
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.err.find("interrupted"), std::string::npos) << r.err;
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(20));
  r = Cli({"sql", "--max-rows", "10",
           "WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c LIMIT 1000) "
           "SELECT x FROM c"});
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.err.find("over the limit"), std::string::npos) << r.err;
  EXPECT_TRUE(r.out.empty());
}

TEST_F(StoreCliTest, SqlOnACopiedStoreChangesNothing) {
  testing::TempDir copy;
  std::filesystem::copy(
      dir_.path(), copy.path(),
      std::filesystem::copy_options::recursive | std::filesystem::copy_options::overwrite_existing);
  std::filesystem::remove(copy.path() + "/" + a_.file);  // recovery would mark it missing
  std::ofstream(copy.path() + "/.tmp-stray") << "x";     // and remove this
  auto r = RunCommand({BuildPath("recorder/cli/recorder"), "--store", copy.path(), "sql",
                       "SELECT state FROM records", "--json"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  for (const auto& row : nlohmann::json::parse(r.out)) EXPECT_EQ(row["state"], "ok");
  EXPECT_TRUE(std::filesystem::exists(copy.path() + "/.tmp-stray"));
}

// Item 8 of issue 11: a user who may not read the index (root's, 0600) nor
// list the store (0711) lists the records granted to them (found through
// by-uid/<uid>/), and nobody else's; their crashes too.
TEST_F(StoreCliTest, ListAsAnotherUserShowsOnlyTheirGrantedRecords) {
  ASSERT_EQ(geteuid(), 0u) << "needs root to switch to another user";
  const uid_t nobody = 65534;
  // The temporary directory above the store must be searchable by nobody.
  ASSERT_EQ(chmod(dir_.path().c_str(), 0755), 0);
  std::string store_dir = dir_.path() + "/store";
  auto s = store::Store::Open(store_dir, store::testing::TestOptions());
  ASSERT_TRUE(s.ok());
  auto roots = store::testing::WriteSmallRecord(**s, "root's", {{"reason", "root secret"}});
  auto mine = store::testing::WriteSmallRecord(**s, "nobody's");
  ASSERT_TRUE(roots.ok() && mine.ok());
  // A crash of nobody's, as the hook stores and grants it.
  auto pending = (*s)->BeginRecord("crash");
  ASSERT_TRUE(pending.ok());
  ASSERT_TRUE((*pending)->writer().AddSection("metadata", "{}").ok());
  nlohmann::json crash_meta = {{"crash",
                                {{"pid", 4343},
                                 {"uid", nobody},
                                 {"signal", 11},
                                 {"exe", "/usr/bin/mine"},
                                 {"dumpable", true}}}};
  auto crash = (*s)->Commit(std::move(*pending), crash_meta);
  ASSERT_TRUE(crash.ok()) << crash.status().ToString();
  ASSERT_TRUE((*s)->GrantReader(mine->id, nobody).ok());
  ASSERT_TRUE((*s)->GrantReader(crash->id, nobody).ok());
  ASSERT_TRUE((*s)->GrantReader(roots->id, nobody - 1).ok());
  s->reset();
  struct stat st {};
  ASSERT_EQ(stat(store_dir.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0711u) << std::oct << (st.st_mode & 0777);
  ASSERT_EQ(stat((store_dir + "/index.sqlite").c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0077, 0u);
  const std::string recorder = BuildPath("recorder/cli/recorder");
  auto r = RunAs(nobody, {recorder, "--store", store_dir, "list"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find(mine->id), std::string::npos) << r.out;
  EXPECT_NE(r.out.find(crash->id), std::string::npos) << r.out;
  EXPECT_EQ(r.out.find(roots->id), std::string::npos) << "another user's record is listed";
  EXPECT_EQ(r.out.find("root secret"), std::string::npos);
  r = RunAs(nobody, {recorder, "--store", store_dir, "list", "--json"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(nlohmann::json::parse(r.out).size(), 2u) << r.out;
  r = RunAs(nobody, {recorder, "--store", store_dir, "crash", "list", "--json"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find(crash->id), std::string::npos) << r.out;
  EXPECT_EQ(r.out.find(mine->id), std::string::npos) << "a dump listed as a crash";
  r = RunAs(nobody, {recorder, "--store", store_dir, "crash", "info", crash->id.substr(0, 20)});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("/usr/bin/mine"), std::string::npos) << r.out;
  // Another user, with nothing granted, sees nothing and gets no error.
  r = RunAs(nobody - 2, {recorder, "--store", store_dir, "list", "--json"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(nlohmann::json::parse(r.out).size(), 0u) << r.out;
  r = RunAs(nobody, {recorder, "--store", store_dir, "sql", "SELECT * FROM records"});
  EXPECT_NE(r.exit_code, 0);
}

TEST(StoreCliNoStoreTest, EmptyStoreListsNothingAndUnknownCommandFails) {
  testing::TempDir d;
  auto r = RunCommand({BuildPath("recorder/cli/recorder"), "--store", d.path() + "/none", "list"});
  EXPECT_EQ(r.exit_code, 0);
  EXPECT_NE(r.err.find("No records"), std::string::npos);
  r = RunCommand({BuildPath("recorder/cli/recorder"), "frobnicate"});
  EXPECT_NE(r.exit_code, 0);
}

// A crash's record names the container or systemd unit its process ran in
// (the core hook's labels from /proc/PID/cgroup): crash list shows that in
// place of the pid, escaped; a crash without labels (older records) keeps its pid.
TEST_F(StoreCliTest, CrashListShowsTheContainerOrUnitInsteadOfThePid) {
  auto s = store::Store::Open(dir_.path(), store::testing::TestOptions());
  ASSERT_TRUE(s.ok());
  const std::string id(64, 'a');
  auto crash = [&](int pid, nlohmann::json labels) {
    nlohmann::json process = {{"pid", pid}, {"comm", "x"}, {"exe", "/usr/bin/x"}};
    process.update(labels);
    nlohmann::json meta = {{"crash",
                            {{"pid", pid},
                             {"uid", 0},
                             {"signal", 11},
                             {"signal_name", "SIGSEGV"},
                             {"exe", "/usr/bin/x"},
                             {"comm", "x"}}},
                           {"pids", {pid}},
                           {"processes", {process}}};
    auto rec = (*s)->BeginRecord("crash");
    ASSERT_TRUE(rec.ok());
    ASSERT_TRUE((*rec)->writer().AddSection("metadata", "{}").ok());
    ASSERT_TRUE((*s)->Commit(std::move(*rec), meta).ok());
  };
  crash(
      101,
      {{"container_runtime", "docker"}, {"container_id", id}, {"unit", "docker-" + id + ".scope"}});
  crash(102, {{"unit", "nginx.service"}});
  crash(103, nlohmann::json::object());
  crash(104, {{"unit", "evil\x1b[2J.service"}});
  auto r = Cli({"crash", "list"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("docker://aaaaaaaaaaaa "), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("nginx.service"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find(" 103 "), std::string::npos) << r.out;
  EXPECT_EQ(r.out.find('\x1b'), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("evil\\x1b[2J.service"), std::string::npos) << r.out;
  auto j = nlohmann::json::parse(Cli({"crash", "list", "--json"}).out);
  std::map<int, nlohmann::json> by_pid;
  for (const auto& c : j) by_pid[c["pid"].get<int>()] = c;
  EXPECT_EQ(by_pid[101]["container_id"], id);
  EXPECT_EQ(by_pid[101]["container_runtime"], "docker");
  EXPECT_EQ(by_pid[102]["unit"], "nginx.service");
  EXPECT_FALSE(by_pid[103].contains("unit"));
}

}  // namespace
}  // namespace flightrec
