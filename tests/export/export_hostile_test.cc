// Exports run by root on what other users control (docs/SECURITY.md, "The
// CLI"): the names around the output file in a shared sticky directory, the
// names inside a record, the mappings of a recorded program. Real records of
// real programs, exported by the real CLI.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <functional>

#include "store/store.h"
#include "tests/support/files.h"
#include "tests/support/protoc.h"
#include "tests/support/recording.h"
#include "tests/support/records.h"
#include "tests/support/run.h"

namespace flightrec::testing {
namespace {

namespace fs = std::filesystem;

constexpr uid_t kNobody = 65534;

// Runs argv in a child that waits until prepare(child's pid) has run, so
// that names built from the pid can be planted first; the exit code.
int RunAfter(const std::vector<std::string>& argv, const std::function<void(pid_t)>& prepare) {
  int gate[2];
  if (pipe2(gate, O_CLOEXEC) != 0) return -1;
  pid_t pid = fork();
  if (pid == 0) {
    close(gate[1]);
    char c;
    while (read(gate[0], &c, 1) < 0 && errno == EINTR) {
    }
    ExecAs(std::nullopt, argv);
  }
  close(gate[0]);
  prepare(pid);
  close(gate[1]);  // end of file: the child goes on
  int st = WaitStatus(pid);
  return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

// python3 -c script args...: exit 0 when what it checks holds.
RunResult Python(const std::string& script, const std::vector<std::string>& args) {
  std::vector<std::string> argv = {"/usr/bin/python3", "-c", script};
  argv.insert(argv.end(), args.begin(), args.end());
  return RunCommand(argv);
}

class ExportOutputTest : public RecordedSuite<ExportOutputTest> {
 protected:
  static void SetUpTestSuite() { Record({BuildPath("tests/programs/fr_spin"), "1"}); }
  void SetUp() override {
    // A shared sticky directory like /tmp, and a file only root may read
    // or write, which the attacker wants overwritten.
    sticky_ = Out(::testing::UnitTest::GetInstance()->current_test_info()->name());
    ASSERT_EQ(mkdir(sticky_.c_str(), 0755), 0) << strerror(errno);
    ASSERT_EQ(chmod(sticky_.c_str(), 01777), 0);
    secret_ = sticky_ + ".secret";
    ASSERT_TRUE(WriteAs(secret_, "root only\n", 0, 0600));
  }
  static std::vector<std::string> Cli(std::vector<std::string> args) {
    args.insert(args.begin(), {BuildPath("recorder/cli/recorder"), "--store", daemon_->store(),
                               "--socket", daemon_->sock()});
    return args;
  }
  // A nobody-owned FIFO at `fifo` and nobody's symlink to it at `link`, in
  // the sticky directory; returns the user's reader (non-blocking) or -1.
  static int PlantUsersFifo(const std::string& fifo, const std::string& link) {
    if (mkfifo(fifo.c_str(), 0666) != 0 || chown(fifo.c_str(), kNobody, kNobody) != 0 ||
        symlink(fifo.c_str(), link.c_str()) != 0 || lchown(link.c_str(), kNobody, kNobody) != 0) {
      return -1;
    }
    return open(fifo.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC);
  }
  // A file with `text` owned by uid, mode `mode`.
  static bool WriteAs(const std::string& path, const std::string& text, uid_t uid, mode_t mode) {
    int fd = open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, mode);
    if (fd < 0) return false;
    bool ok = write(fd, text.data(), text.size()) == static_cast<ssize_t>(text.size()) &&
              fchown(fd, uid, uid) == 0 && fchmod(fd, mode) == 0;
    close(fd);
    return ok;
  }
  std::string sticky_, secret_;
};

// Before, `export` and `flamegraph` wrote OUT.tmp-<pid> through an ofstream
// (O_CREAT|O_TRUNC, following symlinks): a user who planted links at the
// names of coming pids had root truncate and overwrite the file they pointed
// to (with fs.protected_symlinks=0, as on these machines).
TEST_F(ExportOutputTest, ALinkPlantedAtThePredictableTemporaryNameIsNotWrittenThrough) {
  const std::vector<std::vector<std::string>> commands = {
      {"flamegraph", id_, "-o", sticky_ + "/graph.svg"},
      {"export", id_, "-f", "chrome", "-o", sticky_ + "/trace.json"},
      {"export", id_, "-f", "perf", "-o", sticky_ + "/perf.data"}};
  for (const auto& args : commands) {
    const std::string out = args.back();
    int rc = RunAfter(Cli(args), [&](pid_t pid) {
      const std::string tmp = out + ".tmp-" + std::to_string(pid);
      ASSERT_EQ(symlink(secret_.c_str(), tmp.c_str()), 0) << strerror(errno);
      ASSERT_EQ(lchown(tmp.c_str(), kNobody, kNobody), 0) << strerror(errno);
    });
    EXPECT_EQ(rc, 0) << args[0] << " " << args[2];
    EXPECT_TRUE(ReadFile(secret_) == "root only\n")
        << "root's export wrote through the link: " << out;
    struct stat st {};
    ASSERT_EQ(lstat(out.c_str(), &st), 0) << out;
    EXPECT_TRUE(S_ISREG(st.st_mode)) << out;
    EXPECT_EQ(st.st_uid, 0u) << out;
    EXPECT_GT(st.st_size, 100) << out;
  }
}

// A user's own file at the temporary name (0666, theirs) was opened and
// filled by root, then renamed to OUT: root's output in an inode the user
// owns and may rewrite. A user's file at OUT itself is replaced, never
// written into.
TEST_F(ExportOutputTest, AUsersFileAtTheTemporaryNameOrAtTheOutputNeverHoldsRootsOutput) {
  const std::string out = sticky_ + "/graph.svg";
  ASSERT_TRUE(WriteAs(out, "the user's\n", kNobody, 0666));
  int held = open(out.c_str(), O_RDONLY | O_CLOEXEC);
  ASSERT_GE(held, 0);
  std::string planted;
  int rc = RunAfter(Cli({"flamegraph", id_, "-o", out}), [&](pid_t pid) {
    planted = out + ".tmp-" + std::to_string(pid);
    ASSERT_TRUE(WriteAs(planted, "", kNobody, 0666));
  });
  EXPECT_EQ(rc, 0);
  struct stat got {
  }, mine{}, old{};
  ASSERT_EQ(lstat(out.c_str(), &got), 0);
  ASSERT_EQ(lstat(planted.c_str(), &mine), 0) << "the planted file was renamed to the output";
  ASSERT_EQ(fstat(held, &old), 0);
  EXPECT_EQ(mine.st_size, 0) << "root's output was written into the user's file";
  EXPECT_NE(got.st_ino, mine.st_ino);
  EXPECT_NE(got.st_ino, old.st_ino);
  EXPECT_EQ(got.st_uid, 0u);
  EXPECT_GT(got.st_size, 100);
  char buf[64] = {};
  EXPECT_EQ(pread(held, buf, sizeof(buf), 0), 11);
  EXPECT_STREQ(buf, "the user's\n");
  close(held);
}

// Existing FIFOs and devices are written in place (-o /dev/null), but before
// that held for another user's FIFO, or a link to one, in a sticky directory
// too: root's export (or core) went to the user reading it.
TEST_F(ExportOutputTest, AnotherUsersFifoInAStickyDirectoryIsRefused) {
  const std::string fifo = sticky_ + "/fifo";
  const std::string link = sticky_ + "/out.folded";
  // The user's reader; a pipe big enough that a writer never blocks.
  int reader = PlantUsersFifo(fifo, link);
  ASSERT_GE(reader, 0) << strerror(errno);
  ASSERT_GE(fcntl(reader, F_SETPIPE_SZ, 1 << 20), 1 << 20);
  for (const std::string& out : {fifo, link}) {
    auto r = RunCommand(Cli({"export", id_, "-f", "folded", "-o", out}));
    EXPECT_NE(r.exit_code, 0) << out;
    EXPECT_NE(r.err.find("another user's"), std::string::npos) << r.err;
    char c;
    EXPECT_LE(read(reader, &c, 1), 0) << "root's export went into the user's FIFO via " << out;
  }
  close(reader);
  struct stat st {};
  ASSERT_EQ(lstat(link.c_str(), &st), 0);
  EXPECT_TRUE(S_ISLNK(st.st_mode));
}

// The same for `crash core`, whose output is the crashed process's memory:
// before, a user's FIFO at the path root named, or a link to one, got it.
TEST_F(ExportOutputTest, ACoreIsNeverWrittenIntoAnotherUsersFifo) {
  const std::string store_dir = Out("crash-store");
  std::string id;
  {
    auto s = store::Store::Open(store_dir, store::testing::TestOptions());
    ASSERT_TRUE(s.ok()) << s.status().ToString();
    auto pending = (*s)->BeginRecord("crash");
    ASSERT_TRUE(pending.ok());
    ASSERT_TRUE((*pending)->writer().AddSection("core", "root's core\n").ok());
    auto crash = (*s)->Commit(std::move(*pending),
                              {{"crash", {{"pid", 1}, {"uid", 0}, {"exe", "/usr/sbin/x"}}}});
    ASSERT_TRUE(crash.ok()) << crash.status().ToString();
    id = crash->id;
  }
  const std::string fifo = sticky_ + "/core";
  const std::string link = sticky_ + "/core.link";
  int reader = PlantUsersFifo(fifo, link);
  ASSERT_GE(reader, 0) << strerror(errno);
  const std::string recorder = BuildPath("recorder/cli/recorder");
  for (const std::string& out : {fifo, link}) {
    auto r = RunCommand({recorder, "--store", store_dir, "crash", "core", id, "-o", out});
    EXPECT_NE(r.exit_code, 0) << out;
    char buf[64];
    EXPECT_LE(read(reader, buf, sizeof(buf)), 0) << "root's core went into the user's FIFO";
  }
  close(reader);
  // Where nobody planted anything, the core is written, readable by root only.
  const std::string core = sticky_ + "/mine";
  auto r = RunCommand({recorder, "--store", store_dir, "crash", "core", id, "-o", core});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(ReadFile(core), "root's core\n");
  struct stat st {};
  ASSERT_EQ(lstat(core.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600u);
}

// A program names its function and its thread with bytes that are not UTF-8
// (and a bidi override, and ESC): before, they went raw into the SVG (not
// XML), the Chrome JSON and the folded stacks (not UTF-8) and the Perfetto
// trace's strings. Now as `recorder report` shows them, in OTLP's too.
class OddNamesExportTest : public RecordedSuite<OddNamesExportTest> {
 protected:
  static void SetUpTestSuite() { Record({BuildPath("tests/programs/fr_odd_names"), "2"}); }
};

TEST_F(OddNamesExportTest, NamesThatAreNotUtf8AreEscapedInEveryExport) {
  const std::string symbol = "fr_odd_\\xff\\xfe_\\u202e_\\xc3";
  const std::string comm = "odd\\xff\\xfe\\x1b";
  auto r = daemon_->Cli({"flamegraph", id_, "-o", Out("odd.svg")});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  auto py = Python(
      "import sys, xml.etree.ElementTree as E\n"
      "t = ''.join(E.parse(sys.argv[1]).getroot().itertext())\n"
      "sys.exit(0 if sys.argv[2] in t and sys.argv[3] in t else 3)\n",
      {Out("odd.svg"), symbol, comm});
  EXPECT_EQ(py.exit_code, 0) << py.err;

  r = daemon_->Cli({"export", id_, "-f", "chrome", "-o", Out("odd.json")});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  py = Python(
      "import sys, json\n"
      "d = json.loads(open(sys.argv[1], 'rb').read().decode('utf-8', 'strict'))\n"
      "names = [e.get('name', '') for e in d['traceEvents']] + "
      "[e.get('args', {}).get('name', '') for e in d['traceEvents']]\n"
      "sys.exit(0 if any(sys.argv[2] in n for n in names) and sys.argv[3] in names else 3)\n",
      {Out("odd.json"), symbol, comm});
  EXPECT_EQ(py.exit_code, 0) << py.err;

  r = daemon_->Cli({"export", id_, "-f", "folded", "-o", Out("odd.folded")});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  py = Python("import sys\nopen(sys.argv[1], 'rb').read().decode('utf-8', 'strict')\n",
              {Out("odd.folded")});
  EXPECT_EQ(py.exit_code, 0) << py.err;
  std::string folded = ReadFile(Out("odd.folded"));
  EXPECT_NE(folded.find(comm + ";"), std::string::npos) << folded.substr(0, 300);
  EXPECT_NE(folded.find(symbol), std::string::npos) << folded.substr(0, 300);

  // Perfetto's strings (function names, thread names, slice names) are read
  // as UTF-8 by its viewers: the raw bytes must not be there at all.
  r = daemon_->Cli({"export", id_, "-f", "perfetto", "-o", Out("odd.pftrace")});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  std::string trace = ReadFile(Out("odd.pftrace"));
  EXPECT_EQ(trace.find("fr_odd_\xff"), std::string::npos);
  EXPECT_EQ(trace.find("odd\xff\xfe\x1b"), std::string::npos);
  EXPECT_NE(trace.find(symbol), std::string::npos);
  EXPECT_NE(trace.find(comm), std::string::npos);

  // OTLP's strings are proto3 `string`s, which must be UTF-8: protoc (like
  // Go's protobuf in an OTLP receiver) refuses the whole message otherwise.
  r = daemon_->Cli({"export", id_, "-f", "otlp", "-o", Out("odd.otlp")});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  auto decoded =
      ProtocDecodeWith(SourcePath("third_party/opentelemetry-proto"),
                       "opentelemetry/proto/profiles/v1development/profiles.proto",
                       "opentelemetry.proto.profiles.v1development.ProfilesData", Out("odd.otlp"));
  ASSERT_EQ(decoded.exit_code, 0) << decoded.err;
  EXPECT_EQ(decoded.err, "");
  const Node root = ParseText(decoded.out);
  const Node* dict = root.Name("dictionary");
  ASSERT_TRUE(dict);
  bool has_symbol = false, has_comm = false;
  std::string strings;
  for (const Node* str : dict->Named("string_table")) {
    has_symbol |= str->text.find(symbol) != std::string::npos;
    has_comm |= str->text == comm;
    strings += str->text + "\n";
  }
  EXPECT_TRUE(has_symbol && has_comm) << strings;
}

// One user's program runs code it mapped 4 GiB into a 5 GiB (sparse) file.
// perf.data maps each file into a 4 GiB window, which cannot express it:
// before, `export -f perf` of a record holding those samples failed (exit 2)
// for everyone, root included. Now those frames are unknown addresses, with
// a note, and perf reads the file. The file is sparse (one page written,
// one page touched), so nothing here allocates.
class BigMappingExportTest : public RecordedSuite<BigMappingExportTest> {
 protected:
  static void SetUpTestSuite() {
    ASSERT_NO_FATAL_FAILURE(StartDaemon());
    ASSERT_TRUE(RunToSuccess({BuildPath("tests/programs/fr_big_map"), Out("big"), "2"}, &pid_));
    ASSERT_NO_FATAL_FAILURE(DumpLast5s(*daemon_, pid_, {}, &id_));
  }
};

TEST_F(BigMappingExportTest, FramesPerfDataCannotPlaceAreLeftUnknownWithANote) {
  auto r = daemon_->Cli({"export", id_, "-f", "perf", "-o", Out("perf.data")});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.err.find("past 4 GiB into their file are written as unknown addresses"),
            std::string::npos)
      << r.err;
  auto perf = RunCommand({"/usr/bin/perf", "report", "-i", Out("perf.data"), "--stdio", "-n",
                          "--no-children", "--sort", "sym"},
                         {"HOME=" + dir_->path(), "PAGER=cat"});
  ASSERT_EQ(perf.exit_code, 0) << perf.err;
}

}  // namespace
}  // namespace flightrec::testing
