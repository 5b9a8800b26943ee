// Issue 11 item 9: names from a crashed or recorded program (comm, exe path,
// argv) reach the terminal of whoever reads the store — root — through
// list, info, crash list, crash info, report, script and timeline. Real
// parts: a copy of /bin/sh named with escape sequences, in a directory named
// with more, recorded by `recorder record` and crashed into the store by the
// real recorder-coredump; then every human-readable output must be free of
// ESC, BEL, CR and injected lines, and must show the names escaped.
#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <regex>
#include <string>
#include <thread>
#include <vector>

#include "tests/support/run.h"

namespace fs = std::filesystem;
using flightrec::testing::BuildPath;
using flightrec::testing::RunCommand;
using flightrec::testing::RunResult;

namespace {

// A title change (OSC 0), clear screen (CSI 2J), and a newline followed by
// a fake line: what an attacker would put in a name.
const std::string kDir = "d\x1b]0;pwned\x07\x1b[2J";
const std::string kName = "\x1b[31mx\nFAKE\r";  // 11 bytes: the whole comm
const std::string kArg = "arg\x1b[1;1H\nFAKE-ARG";

std::string Recorder() { return BuildPath("recorder/cli/recorder"); }

// Output safe for a terminal: no control byte except the command's own
// newlines and tabs (script indents frames), and no line the names injected.
void ExpectSafe(const std::string& what, const RunResult& r) {
  for (const std::string* s : {&r.out, &r.err}) {
    for (unsigned char c : *s) {
      ASSERT_FALSE(c < 0x20 && c != '\n' && c != '\t')
          << what << ": raw control byte " << int(c) << " in\n"
          << *s;
      ASSERT_NE(c, 0x7f) << what;
    }
    for (const char* fake : {"\nFAKE", "\nFAKE-ARG"}) {
      EXPECT_EQ(s->find(fake), std::string::npos) << what << ": injected line in\n" << *s;
    }
  }
}

class TerminalEscapeCli : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_EQ(geteuid(), 0u) << "needs root (perf events for every process, the hook)";
    char tmpl[] = "/tmp/fr-escape-XXXXXX";
    ASSERT_NE(mkdtemp(tmpl), nullptr);
    tmp_ = tmpl;
    store_ = tmp_ + "/store";
    fs::create_directories(tmp_ + "/" + kDir);
    prog_ = tmp_ + "/" + kDir + "/" + kName;
    fs::copy_file("/bin/sh", prog_);
    chmod(prog_.c_str(), 0755);
  }
  void TearDown() override {
    if (!tmp_.empty()) fs::remove_all(tmp_);
  }
  RunResult Run(std::vector<std::string> args) {
    args.insert(args.begin(), {Recorder(), "--store", store_});
    return RunCommand(args);
  }
  std::string tmp_, store_, prog_;
};

TEST_F(TerminalEscapeCli, RecordedAndCrashedNamesAreEscapedInEveryTextOutput) {
  // 1. `recorder record` of the hostile program (busy for a moment so that
  // it is sampled): a record whose processes, samples and DSO carry the names.
  RunResult rec = Run({"record", "--always", "-F", "999", "--history", "2s", "--last", "2s", "--",
                       prog_, "-c", "i=0; while [ $i -lt 40000 ]; do i=$((i+1)); done", kArg});
  ASSERT_EQ(rec.exit_code, 0) << rec.err;
  ExpectSafe("record", rec);

  // 2. A crash of the hostile program (blocked in `read`, with the hostile
  // argument in its argv) stored by the real hook, as the kernel would run it.
  int in[2];
  ASSERT_EQ(pipe(in), 0);
  pid_t victim = fork();
  if (victim == 0) {
    dup2(in[0], 0);
    close(in[1]);
    execl(prog_.c_str(), prog_.c_str(), "-c", "read x", kArg.c_str(), nullptr);
    _exit(127);
  }
  close(in[0]);
  // Wait (bounded) until the child has exec'd: its comm is the hostile name.
  std::string comm;
  for (int i = 0; i < 500 && comm != kName.substr(0, 15) + "\n"; ++i) {
    std::ifstream f("/proc/" + std::to_string(victim) + "/comm");
    comm.assign(std::istreambuf_iterator<char>(f), {});
    if (comm != kName.substr(0, 15) + "\n")
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  ASSERT_EQ(comm, kName.substr(0, 15) + "\n");
  const std::string core = tmp_ + "/core-input";
  std::ofstream(core) << "not a core: the metadata is what this test is about";
  pid_t hook = fork();
  if (hook == 0) {
    int fd = open(core.c_str(), O_RDONLY);
    dup2(fd, 0);
    int devnull = open("/dev/null", O_WRONLY);
    dup2(devnull, 2);
    const std::string p = std::to_string(victim), t = std::to_string(time(nullptr));
    execl(BuildPath("coredump-hook/recorder-coredump").c_str(), "recorder-coredump", "--config",
          "/nonexistent", "--store", store_.c_str(), "--socket", "/nonexistent.sock", "--",
          p.c_str(), p.c_str(), p.c_str(), "11", t.c_str(), "-1", "0", "0", "1",
          kName.substr(0, 15).c_str(), nullptr);
    _exit(127);
  }
  int st = 0;
  waitpid(hook, &st, 0);
  close(in[1]);
  kill(victim, SIGKILL);
  waitpid(victim, nullptr, 0);
  ASSERT_TRUE(WIFEXITED(st) && WEXITSTATUS(st) == 0) << st;

  RunResult crashes = Run({"crash", "list", "--json"});
  ASSERT_EQ(crashes.exit_code, 0) << crashes.err;
  std::smatch m;
  ASSERT_TRUE(std::regex_search(crashes.out, m, std::regex("\"id\": \"([0-9TZ-]+[0-9a-f]+)\"")))
      << crashes.out << crashes.err;
  const std::string crash_id = m[1];
  // `recorder record` names its record on stderr.
  ASSERT_TRUE(std::regex_search(rec.err, m, std::regex("recorder record: ([0-9TZ]+-[0-9a-f]+):")))
      << rec.err;
  const std::string record_id = m[1];

  // 3. Every human-readable output about them.
  std::string all;
  for (const auto& args : std::vector<std::vector<std::string>>{
           {"list"},
           {"info", crash_id},
           {"info", record_id},
           {"crash", "list"},
           {"crash", "info", crash_id},
           {"crash", "info", crash_id, "--maps"},
           {"report", record_id},
           {"report", record_id, "--sort", "comm"},
           {"report", record_id, "--sort", "dso"},
           {"script", record_id},
           {"timeline", record_id},
           {"timeline", record_id, "--by", "comm"},
       }) {
    std::string what;
    for (const auto& a : args) what += a + " ";
    RunResult r = Run(args);
    ExpectSafe(what, r);
    all += r.out + r.err;
  }
  // The names were printed (escaped), so the checks above saw them.
  EXPECT_NE(all.find("\\x1b[31mx\\nFAKE\\r"), std::string::npos) << all;   // comm and exe
  EXPECT_NE(all.find("d\\x1b]0;pwned\\x07\\x1b[2J/"), std::string::npos);  // exe directory
  EXPECT_NE(all.find("arg\\x1b[1;1H\\nFAKE-ARG"), std::string::npos);      // argv (crash info)
}

}  // namespace
