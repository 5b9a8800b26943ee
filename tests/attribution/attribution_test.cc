// Attribution correctness on real binaries (issue 4, acceptance 1 and 2): a
// real recording of fr_attr_main (C++ executable + libfr_attr.so, each with an
// always-inlined hot helper) replayed by `recorder report` / `script`, with
// the binaries unstripped, stripped with separate debug files (build-id tree
// for the library, .gnu_debuglink for the executable), stripped without debug
// files, rebuilt with different code, and deleted.
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>
#include <string>

#include <nlohmann/json.hpp>

#include "tests/support/files.h"
#include "tests/support/run.h"

namespace flightrec::testing {
namespace {

namespace fs = std::filesystem;

std::string Recorder() { return BuildPath("recorder/cli/recorder"); }

// Line number of the first source line containing marker (so the test never
// hard-codes line numbers).
uint32_t LineOf(const std::string& file, const std::string& marker) {
  std::ifstream in(SourcePath("tests/attribution/" + file));
  std::string line;
  for (uint32_t n = 1; std::getline(in, line); ++n) {
    if (line.find(marker) != std::string::npos) return n;
  }
  return 0;
}

void MustRun(const std::vector<std::string>& argv) {
  auto r = RunCommand(argv);
  ASSERT_EQ(r.exit_code, 0) << argv[0] << ": " << r.err;
}

// Copies variant v of the program and the library into dir.
void Install(const std::string& dir, int variant) {
  fs::create_directories(dir);
  fs::copy_file(BuildPath("tests/attribution/fr_attr_main_v" + std::to_string(variant)),
                dir + "/fr_attr_main", fs::copy_options::overwrite_existing);
  fs::copy_file(BuildPath("tests/attribution/libfr_attr.so"), dir + "/libfr_attr.so",
                fs::copy_options::overwrite_existing);
}

std::string BuildIdHex(const std::string& path) {
  auto r = RunCommand({"/usr/bin/readelf", "-n", path});
  auto pos = r.out.find("Build ID: ");
  if (pos == std::string::npos) return "";
  std::string id = r.out.substr(pos + 10);
  return id.substr(0, id.find_first_of("\n "));
}

class AttributionTest : public ::testing::Test {
 protected:
  std::string store() const { return tmp_.path() + "/store"; }

  // Records `dir`/fr_attr_main for 1.2 s and returns nothing; the record is -1.
  void RecordIn(const std::string& dir) {
    auto r = RunCommand({Recorder(), "--store", store(), "record", "--always", "-F", "499",
                         "--last", "30s", "--", dir + "/fr_attr_main", "1.2"});
    ASSERT_EQ(r.exit_code, 0) << r.err;
  }

  RunResult Report(const std::vector<std::string>& extra_env = {}) {
    return RunCommand(
        {Recorder(), "--store", store(), "report", "-1", "--json", "--children", "--limit", "200"},
        extra_env);
  }

  static nlohmann::json Rows(const RunResult& r) {
    auto j = nlohmann::json::parse(r.out, nullptr, false);
    return j.is_discarded() ? nlohmann::json::array() : j["rows"];
  }

  static const nlohmann::json* Find(const nlohmann::json& rows, const std::string& prefix) {
    for (const auto& r : rows) {
      if (r["key"].get<std::string>().rfind(prefix, 0) == 0) return &r;
    }
    return nullptr;
  }

  // Checks names, inlining and file:line of a recording of fr_attr_main.
  void ExpectFullAttribution(const std::vector<std::string>& env, const std::string& dir) {
    auto r = Report(env);
    ASSERT_EQ(r.exit_code, 0) << r.err;
    auto rows = Rows(r);
    const auto* mi = Find(rows, "main_inline_helper");
    const auto* li = Find(rows, "lib_inline_helper");
    const auto* spin = Find(rows, "attr::Worker::Spin(unsigned long, int)");
    const auto* lib = Find(rows, "lib_hot");
    ASSERT_TRUE(mi && li && spin && lib) << r.out;
    EXPECT_TRUE((*mi)["inlined"].get<bool>());
    EXPECT_TRUE((*li)["inlined"].get<bool>());
    EXPECT_FALSE((*spin)["inlined"].get<bool>());
    EXPECT_EQ((*mi)["dso"], dir + "/fr_attr_main");
    EXPECT_EQ((*li)["dso"], dir + "/libfr_attr.so");
    // The work is split evenly between the two: each has a fair share, and the
    // inlined helpers carry the self time of their callers.
    EXPECT_GT((*mi)["self_pct"].get<double>(), 25.0) << r.out;
    EXPECT_GT((*li)["self_pct"].get<double>(), 25.0) << r.out;
    EXPECT_GE((*spin)["children"].get<uint64_t>(), (*mi)["self"].get<uint64_t>());
    EXPECT_GE((*lib)["children"].get<uint64_t>(), (*li)["self"].get<uint64_t>());

    // file:line of the inlined helper and of the call site in its caller.
    auto s = RunCommand({Recorder(), "--store", store(), "script", "-1", "--json"}, env);
    ASSERT_EQ(s.exit_code, 0) << s.err;
    const uint32_t helper_line = LineOf("fr_attr_main.cc", "main_inline_helper line");
    const uint32_t call_line = LineOf("fr_attr_main.cc", "return main_inline_helper(x, n);");
    const uint32_t lib_line = LineOf("fr_attr_lib.c", "lib_inline_helper loop line");
    ASSERT_TRUE(helper_line && call_line && lib_line);
    size_t checked_main = 0, checked_lib = 0;
    std::istringstream lines(s.out);
    std::string line;
    while (std::getline(lines, line)) {
      auto j = nlohmann::json::parse(line);
      const auto& f = j["frames"];
      for (size_t i = 0; i + 1 < f.size(); ++i) {
        if (f[i]["function"] == "main_inline_helper") {
          EXPECT_TRUE(f[i].value("inlined", false));
          EXPECT_NE(f[i]["file"].get<std::string>().find("fr_attr_main.cc"), std::string::npos);
          // The loop: its `for` line, the marked body line, the closing brace.
          EXPECT_GE(f[i]["line"].get<uint32_t>() + 1, helper_line);
          EXPECT_LE(f[i]["line"].get<uint32_t>(), helper_line + 2);
          EXPECT_EQ(f[i + 1]["function"].get<std::string>().rfind("attr::Worker::Spin", 0), 0u);
          EXPECT_EQ(f[i + 1]["line"], call_line);
          ++checked_main;
        }
        if (f[i]["function"] == "lib_inline_helper") {
          EXPECT_GE(f[i]["line"].get<uint32_t>() + 1, lib_line);
          EXPECT_LE(f[i]["line"].get<uint32_t>(), lib_line + 2);
          EXPECT_EQ(f[i + 1]["function"], "lib_hot");
          ++checked_lib;
        }
      }
    }
    EXPECT_GT(checked_main, 50u);
    EXPECT_GT(checked_lib, 50u);
  }

  TempDir tmp_;
};

TEST_F(AttributionTest, UnstrippedBinariesNameInlinedFunctionsWithFileAndLine) {
  const std::string dir = tmp_.path() + "/plain";
  Install(dir, 1);
  RecordIn(dir);
  ExpectFullAttribution({"FLIGHTREC_DEBUGINFO_PATH=" + tmp_.path() + "/no-debug"}, dir);
}

TEST_F(AttributionTest, StrippedBinariesUseBuildIdTreeAndDebuglink) {
  const std::string dir = tmp_.path() + "/stripped";
  const std::string debug_root = tmp_.path() + "/debug";
  Install(dir, 1);
  // The library's debug info goes into a build-id tree, the executable's
  // next to it in .debug/ and is found through .gnu_debuglink.
  const std::string lib_id = BuildIdHex(dir + "/libfr_attr.so");
  ASSERT_GT(lib_id.size(), 2u);
  const std::string lib_dbg =
      debug_root + "/.build-id/" + lib_id.substr(0, 2) + "/" + lib_id.substr(2) + ".debug";
  fs::create_directories(fs::path(lib_dbg).parent_path());
  fs::create_directories(dir + "/.debug");
  MustRun({"/usr/bin/objcopy", "--only-keep-debug", dir + "/libfr_attr.so", lib_dbg});
  MustRun({"/usr/bin/strip", "--strip-all", dir + "/libfr_attr.so"});
  MustRun({"/usr/bin/objcopy", "--only-keep-debug", dir + "/fr_attr_main",
           dir + "/.debug/fr_attr_main.debug"});
  MustRun({"/usr/bin/strip", "--strip-all", dir + "/fr_attr_main"});
  MustRun({"/usr/bin/objcopy", "--add-gnu-debuglink=" + dir + "/.debug/fr_attr_main.debug",
           dir + "/fr_attr_main"});
  RecordIn(dir);
  ExpectFullAttribution({"FLIGHTREC_DEBUGINFO_PATH=" + debug_root}, dir);
}

TEST_F(AttributionTest, CompressedDebugInfoIsDecompressedOnceIntoTheCache) {
  const std::string dir = tmp_.path() + "/compressed";
  const std::string cache = tmp_.path() + "/cache";
  Install(dir, 1);
  for (const char* f : {"/fr_attr_main", "/libfr_attr.so"}) {
    MustRun({"/usr/bin/objcopy", "--compress-debug-sections=zlib", dir + f});
  }
  RecordIn(dir);
  const std::vector<std::string> env = {"FLIGHTREC_DEBUGINFO_PATH=" + tmp_.path() + "/none",
                                        "FLIGHTREC_CACHE_DIR=" + cache};
  ExpectFullAttribution(env, dir);
  // One decompressed copy per build-id, reused by the next query.
  const std::string copy = cache + "/debug/" + BuildIdHex(dir + "/libfr_attr.so") + ".debug";
  ASSERT_TRUE(fs::exists(copy));
  auto before = fs::last_write_time(copy);
  ExpectFullAttribution(env, dir);
  EXPECT_EQ(fs::last_write_time(copy), before);
  // A damaged cache entry is not trusted: it is rebuilt from the original.
  std::ofstream(copy, std::ios::trunc) << "not an ELF file";
  ExpectFullAttribution(env, dir);
  EXPECT_EQ(BuildIdHex(copy), BuildIdHex(dir + "/libfr_attr.so"));
}

TEST_F(AttributionTest, StrippedWithoutDebugFilesGivesOffsetsNotWrongNames) {
  const std::string dir = tmp_.path() + "/bare";
  Install(dir, 1);
  MustRun({"/usr/bin/strip", "--strip-all", dir + "/libfr_attr.so"});
  MustRun({"/usr/bin/strip", "--strip-all", dir + "/fr_attr_main"});
  RecordIn(dir);
  auto r = Report({"FLIGHTREC_DEBUGINFO_PATH=" + tmp_.path() + "/none"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  auto rows = Rows(r);
  // lib_hot is exported, so .dynsym still names it; the executable's
  // functions are not, so its samples are file offsets.
  EXPECT_NE(Find(rows, "lib_hot"), nullptr) << r.out;
  EXPECT_EQ(Find(rows, "main_inline_helper"), nullptr) << r.out;
  EXPECT_EQ(Find(rows, "attr::Worker"), nullptr) << r.out;
  const auto* off = Find(rows, dir + "/fr_attr_main+0x");
  ASSERT_NE(off, nullptr) << r.out;
  EXPECT_GT((*off)["self_pct"].get<double>(), 25.0);
}

TEST_F(AttributionTest, RebuiltBinaryIsReportedAsChangedNotMisattributed) {
  const std::string dir = tmp_.path() + "/rebuilt";
  Install(dir, 1);
  RecordIn(dir);
  // Replace the executable with a build of different code (new build-id).
  fs::remove(dir + "/fr_attr_main");
  fs::copy_file(BuildPath("tests/attribution/fr_attr_main_v2"), dir + "/fr_attr_main");
  ASSERT_NE(BuildIdHex(BuildPath("tests/attribution/fr_attr_main_v1")),
            BuildIdHex(dir + "/fr_attr_main"));
  auto r = Report();
  ASSERT_EQ(r.exit_code, 0) << r.err;
  auto j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["files_changed"], nlohmann::json::array({dir + "/fr_attr_main"}));
  for (const auto& row : j["rows"]) {
    const std::string key = row["key"];
    if (row.value("dso", "") != dir + "/fr_attr_main") continue;
    // Nothing from the new file's symbols: only offsets marked as changed.
    EXPECT_NE(key.find("(file changed)"), std::string::npos) << key;
  }
  EXPECT_EQ(Find(j["rows"], "variant_two_only"), nullptr);
  EXPECT_EQ(Find(j["rows"], "attr::Worker"), nullptr);
  EXPECT_NE(Find(j["rows"], "lib_inline_helper"), nullptr) << "the library did not change";
  auto text = RunCommand({Recorder(), "--store", store(), "report", "-1"});
  EXPECT_NE(text.out.find("changed since the record was made"), std::string::npos) << text.out;
}

TEST_F(AttributionTest, RebuiltBinaryWithoutABuildIdIsKnownByItsInode) {
  const std::string dir = tmp_.path() + "/nobuildid";
  Install(dir, 1);
  const std::string exe = dir + "/fr_attr_main";
  MustRun({"/usr/bin/objcopy", "--remove-section=.note.gnu.build-id", exe});
  ASSERT_EQ(BuildIdHex(exe), "");
  RecordIn(dir);
  // The same file: symbolized.
  auto r = Report();
  ASSERT_EQ(r.exit_code, 0) << r.err;
  auto j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["files_changed"], nlohmann::json::array()) << r.out;
  EXPECT_NE(Find(j["rows"], "attr::Worker"), nullptr) << r.out;
  // Rebuilt (another inode), still without a build-id: reported as changed,
  // never attributed to the new file's symbols.
  const std::string v2 = tmp_.path() + "/v2-nobuildid";
  fs::copy_file(BuildPath("tests/attribution/fr_attr_main_v2"), v2);
  MustRun({"/usr/bin/objcopy", "--remove-section=.note.gnu.build-id", v2});
  fs::remove(exe);
  fs::rename(v2, exe);
  r = Report();
  ASSERT_EQ(r.exit_code, 0) << r.err;
  j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["files_changed"], nlohmann::json::array({exe})) << r.out;
  EXPECT_EQ(Find(j["rows"], "variant_two_only"), nullptr);
  EXPECT_EQ(Find(j["rows"], "attr::Worker"), nullptr);
}

TEST_F(AttributionTest, RecordWhoseBinariesAreAllGoneSaysSoAndFails) {
  const std::string dir = tmp_.path() + "/gone";
  Install(dir, 1);
  RecordIn(dir);
  fs::remove_all(dir);
  auto r = RunCommand({Recorder(), "--store", store(), "report", "-1"});
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.err.find("none of the recorded programs"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("fr_attr_main"), std::string::npos) << r.err;
  // What can be shown still is: file offsets.
  EXPECT_NE(r.out.find(dir + "/fr_attr_main+0x"), std::string::npos) << r.out;
  // Every other query over the record says the same, after its output.
  const std::string out = tmp_.path() + "/gone.folded";
  for (std::vector<std::string> cmd : {std::vector<std::string>{"script", "-1"},
                                       {"script", "-1", "--json"},
                                       {"timeline", "-1"},
                                       {"export", "-1", "-f", "folded", "-o", out}}) {
    std::vector<std::string> argv = {Recorder(), "--store", store()};
    argv.insert(argv.end(), cmd.begin(), cmd.end());
    auto q = RunCommand(argv);
    EXPECT_NE(q.exit_code, 0) << cmd[0];
    EXPECT_NE(q.err.find("none of the recorded programs"), std::string::npos) << q.err;
  }
  EXPECT_NE(ReadFile(out).find("fr_attr_main+0x"), std::string::npos);
}

// A record names files by path; whoever can write there since can put a FIFO
// in the binary's place. Opening it for reading without O_NONBLOCK waits for
// a writer forever: `recorder report` hung. It must finish, with the FIFO
// reported as a missing file. Bounded: the command gets 120 s (a report of
// this record takes about a second), then is killed and the test fails.
TEST_F(AttributionTest, FifoInPlaceOfARecordedLibraryIsReportedMissingNotOpened) {
  const std::string dir = tmp_.path() + "/fifo";
  Install(dir, 1);
  RecordIn(dir);
  const std::string lib = dir + "/libfr_attr.so";
  fs::remove(lib);
  ASSERT_EQ(mkfifo(lib.c_str(), 0600), 0);

  const std::string out_path = tmp_.path() + "/report.json";
  pid_t pid = fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    int out = open(out_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    int devnull = open("/dev/null", O_RDWR | O_CLOEXEC);
    dup2(devnull, 0);
    dup2(out, 1);
    dup2(devnull, 2);
    const std::string rec = Recorder(), st = store();
    execl(rec.c_str(), rec.c_str(), "--store", st.c_str(), "report", "-1", "--json",
          static_cast<char*>(nullptr));
    _exit(127);
  }
  // Wait for the exit on a pidfd (readable once the child has exited).
  int pidfd = static_cast<int>(syscall(SYS_pidfd_open, pid, 0));
  ASSERT_GE(pidfd, 0);
  struct pollfd p = {pidfd, POLLIN, 0};
  const int ready = poll(&p, 1, 120'000);
  close(pidfd);
  if (ready != 1) kill(pid, SIGKILL);
  int status = 0;
  waitpid(pid, &status, 0);
  ASSERT_EQ(ready, 1) << "`recorder report` still running after 120 s: it opened the FIFO";
  ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << status;
  auto j = nlohmann::json::parse(ReadFile(out_path), nullptr, false);
  ASSERT_TRUE(j.is_object()) << ReadFile(out_path);
  EXPECT_EQ(j["files_missing"], nlohmann::json::array({lib})) << j.dump();
  // The executable is still there and still symbolized.
  EXPECT_NE(Find(j["rows"], "main_inline_helper"), nullptr) << j.dump();
}

}  // namespace
}  // namespace flightrec::testing
