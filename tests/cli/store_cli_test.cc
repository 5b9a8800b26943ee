// The store commands as a user sees them: exit codes, messages, --json.
#include <gtest/gtest.h>

#include <fstream>
#include <nlohmann/json.hpp>

#include "tests/cli/run_util.h"
#include "tests/store/test_util.h"

namespace flightrec {
namespace {

using testing::BuildPath;
using testing::RunCommand;

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
  store::testing::TempDir dir_;
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

TEST(StoreCliNoStoreTest, EmptyStoreListsNothingAndUnknownCommandFails) {
  store::testing::TempDir d;
  auto r = RunCommand({BuildPath("recorder/cli/recorder"), "--store", d.path() + "/none", "list"});
  EXPECT_EQ(r.exit_code, 0);
  EXPECT_NE(r.err.find("No records"), std::string::npos);
  r = RunCommand({BuildPath("recorder/cli/recorder"), "frobnicate"});
  EXPECT_NE(r.exit_code, 0);
}

}  // namespace
}  // namespace flightrec
