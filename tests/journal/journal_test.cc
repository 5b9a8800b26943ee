// The journal entry of each stored crash (the core hook, run as the kernel
// runs it) and panic (recorderd's claim), read back with journalctl from a
// real systemd-journald: hostile names stay in their fields, MESSAGE is
// escaped, and a journald that stops reading delays no record.
//
// journald is private to this test binary: the binary moves into a mount
// namespace of its own with a tmpfs over /run, where journald binds its
// sockets itself (it is not socket-activated) and keeps a volatile journal.
// Product code logs to /run/systemd/journal/socket, so it and every program
// the test starts reach this journald and nothing of the host's.
#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <optional>
#include <sstream>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "journal/journal_entry.h"
#include "recorder/daemon/panic_record.h"
#include "recorder/module/panic_region_builder.h"
#include "store/store.h"
#include "tests/support/daemon.h"
#include "tests/support/files.h"
#include "tests/support/run.h"
#include "tests/support/wait.h"

namespace flightrec::testing {
namespace {

namespace fs = std::filesystem;
using namespace std::chrono_literals;
using journal::kRecordMessageId;

constexpr const char* kJournald = "/lib/systemd/systemd-journald";
constexpr const char* kJournalctl = "/usr/bin/journalctl";
constexpr const char* kSocket = "/run/systemd/journal/socket";

// A field's bytes from journalctl's JSON: a string, or an array of byte
// values for one that is not printable UTF-8; anything else (an array of
// values: the field given twice) is "<not one value>".
std::string Bytes(const nlohmann::json& v) {
  if (v.is_null()) return "<missing>";
  if (v.is_string()) return v.get<std::string>();
  std::string out;
  if (!v.is_array()) return "<not one value>";
  for (const auto& b : v) {
    if (!b.is_number_unsigned()) return "<not one value>";
    out.push_back(static_cast<char>(b.get<unsigned>()));
  }
  return out;
}

// A cgroup named like a systemd unit, in systemd's v1 hierarchy where the
// machine has one (legacy and hybrid) or else in the unified one; removed
// (once empty) when the object goes.
class UnitCgroup {
 public:
  explicit UnitCgroup(const std::string& unit) {
    const std::string root = fs::exists("/sys/fs/cgroup/systemd/cgroup.procs")
                                 ? "/sys/fs/cgroup/systemd"
                                 : "/sys/fs/cgroup";
    dir_ = root + "/" + unit;
    fs::create_directory(dir_);
  }
  ~UnitCgroup() { rmdir(dir_.c_str()); }
  bool Add(pid_t pid) { return bool(std::ofstream(dir_ + "/cgroup.procs") << pid << std::flush); }

 private:
  std::string dir_;
};

class JournalTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    // Single-threaded still (gtest runs no thread of its own), as
    // unshare(CLONE_NEWNS) requires.
    ASSERT_EQ(unshare(CLONE_NEWNS), 0) << strerror(errno);
    ASSERT_EQ(mount(nullptr, "/", nullptr, MS_REC | MS_PRIVATE, nullptr), 0) << strerror(errno);
    ASSERT_EQ(mount("tmpfs", "/run", "tmpfs", 0, "mode=0755"), 0) << strerror(errno);
    fs::create_directories("/run/systemd/journald.conf.d");
    // Volatile (/run/log/journal), forwarding nothing, no rate limit for the
    // test's bursts. (It reads the kernel log, as every reader of /dev/kmsg
    // may, from its own position: systemd 252 has no ReadKMSG=.)
    std::ofstream("/run/systemd/journald.conf.d/test.conf")
        << "[Journal]\nStorage=volatile\nForwardToSyslog=no\n"
           "ForwardToWall=no\nForwardToConsole=no\nForwardToKMsg=no\nRateLimitBurst=0\n"
           // Empty: the kernel's audit setting is left as it is (yes or no
           // would turn auditing on or off machine-wide).
           "Audit=\n";
    ASSERT_TRUE(fs::exists(kJournald)) << kJournald << " (Debian package systemd)";
    journald_ = fork();
    if (journald_ == 0) {
      // Gone with the test binary, however it ends: nothing else reaches
      // this journald's namespace to stop it.
      prctl(PR_SET_PDEATHSIG, SIGKILL);
      execl(kJournald, kJournald, nullptr);
      _exit(127);
    }
    ASSERT_TRUE(WaitFor([] { return fs::exists(kSocket); }, 10s, 20ms))
        << "journald made no " << kSocket;
  }
  static void TearDownTestSuite() {
    if (journald_ <= 0) return;
    kill(journald_, SIGCONT);
    kill(journald_, SIGTERM);
    WaitStatus(journald_);
  }

  // Entries with our MESSAGE_ID and `match` ("FIELD=value"), waiting
  // (bounded) for at least `want` of them: journald writes asynchronously.
  static std::vector<nlohmann::json> Entries(const std::string& match, size_t want = 1) {
    std::vector<nlohmann::json> found;
    WaitFor(
        [&] {
          found.clear();
          auto r = RunCommand({kJournalctl, "--directory=/run/log/journal", "--no-pager", "-o",
                               "json", fmt::format("MESSAGE_ID={}", kRecordMessageId), match});
          std::istringstream lines(r.out);
          for (std::string line; std::getline(lines, line);) {
            found.push_back(nlohmann::json::parse(line, nullptr, false));
          }
          return found.size() >= want;
        },
        10s, 50ms);
    return found;
  }

  // The hook, as the kernel runs it for a SIGSEGV of `pid` (an empty core on
  // stdin); its stderr. Killed if it is not done within `limit`.
  static std::string RunHook(const std::string& store, pid_t pid, std::chrono::seconds limit,
                             bool* finished) {
    TempDir tmp;
    const std::string err = tmp.path() + "/err";
    const std::string p = std::to_string(pid);
    std::vector<std::string> argv = {BuildPath("coredump-hook/recorder-coredump"),
                                     "--config",
                                     "/nonexistent",
                                     "--store",
                                     store,
                                     "--socket",
                                     tmp.path() + "/no.sock",
                                     "--",
                                     p,
                                     p,
                                     p,
                                     "11",
                                     std::to_string(time(nullptr)),
                                     "-1",
                                     "0",
                                     "0",
                                     "1",
                                     "comm"};
    pid_t child = fork();
    if (child == 0) {
      int in = open("/dev/null", O_RDONLY);
      int e = open(err.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
      dup2(in, 0);
      dup2(e, 2);
      ExecAs(std::nullopt, argv);
    }
    *finished = WaitFor([&] { return waitpid(child, nullptr, WNOHANG) == child; }, limit, 20ms);
    if (!*finished) {
      kill(child, SIGKILL);
      waitpid(child, nullptr, 0);
    }
    return ReadFile(err);
  }
  static std::string StoredId(const std::string& hook_err) {
    size_t at = hook_err.find("stored as ");
    return at == std::string::npos ? "" : hook_err.substr(at + 10, 23);
  }

  static inline pid_t journald_ = -1;
};

// A crash of a program whose path and name try to forge fields and drive a
// terminal: one entry, every field its own, the exact bytes kept, and
// MESSAGE escaped.
TEST_F(JournalTest, TheHookLogsEachStoredCrashWithHostileNamesKeptInTheirFields) {
  TempDir tmp;
  const std::string name = "fr\nFLIGHTREC_RECORD_ID=forged\n\x1b]0;pwn\x07";
  const std::string exe = tmp.path() + "/" + name;
  fs::copy_file("/bin/sleep", exe);
  chmod(exe.c_str(), 0755);
  pid_t sleeper = Spawn({exe, "60"});
  ASSERT_GT(sleeper, 0);
  const std::string unit = fmt::format("fr-journal-test-{}.service", getpid());
  UnitCgroup cgroup(unit);
  EXPECT_TRUE(cgroup.Add(sleeper));
  bool finished = false;
  std::string err = RunHook(tmp.path() + "/store", sleeper, 60s, &finished);
  kill(sleeper, SIGKILL);
  WaitStatus(sleeper);
  ASSERT_TRUE(finished) << err;
  const std::string id = StoredId(err);
  ASSERT_FALSE(id.empty()) << err;

  auto entries = Entries("FLIGHTREC_RECORD_ID=" + id);
  ASSERT_EQ(entries.size(), 1u) << "no journal entry for " << id << "; hook said: " << err;
  const nlohmann::json& j = entries[0];
  const std::string comm = name.substr(0, 15);  // TASK_COMM_LEN
  EXPECT_EQ(Bytes(j["MESSAGE"]), fmt::format("Process {} (fr\\nFLIGHTREC_RE) of user 0 crashed "
                                             "with SIGSEGV; history: recorder crash info {}",
                                             sleeper, id));
  EXPECT_EQ(Bytes(j["FLIGHTREC_EXE"]), exe);
  EXPECT_EQ(Bytes(j["FLIGHTREC_COMM"]), comm);
  EXPECT_EQ(Bytes(j["FLIGHTREC_KIND"]), "crash");
  EXPECT_EQ(Bytes(j["FLIGHTREC_SIGNAL"]), "11");
  EXPECT_EQ(Bytes(j["FLIGHTREC_SIGNAL_NAME"]), "SIGSEGV");
  EXPECT_EQ(Bytes(j["FLIGHTREC_PID"]), std::to_string(sleeper));
  EXPECT_EQ(Bytes(j["FLIGHTREC_UID"]), "0");
  EXPECT_EQ(Bytes(j["FLIGHTREC_UNIT"]), unit);
  EXPECT_EQ(Bytes(j["PRIORITY"]), "2");
  EXPECT_EQ(Bytes(j["SYSLOG_IDENTIFIER"]), "recorder-coredump");
  // Nothing the name held became a field of its own.
  EXPECT_TRUE(Entries("FLIGHTREC_RECORD_ID=forged", 0).empty());
  for (const auto& [k, v] : j.items()) {
    EXPECT_TRUE(k.starts_with("_") || k.starts_with("FLIGHTREC_") || k == "MESSAGE" ||
                k == "MESSAGE_ID" || k == "PRIORITY" || k == "SYSLOG_IDENTIFIER")
        << k;
  }
  for (unsigned char c : Bytes(j["MESSAGE"])) EXPECT_TRUE(c >= 0x20 && c != 0x7f) << int(c);
}

// A kernel panic from an earlier boot, stored by recorderd's claim: one
// entry naming the record, the crashed kernel's message (from its memory:
// hostile too) escaped in MESSAGE and exact in its own field.
TEST_F(JournalTest, RecorderdLogsEachStoredPanic) {
  TempDir tmp;
  recorder::module::testing::PanicRegionBuilder b(256 * 1024, 1);
  const std::string message = "Oops\nFLIGHTREC_KIND=forged\n\x1b[2J";
  b.SetMessage(message);
  b.header().panic_cpu = 0;
  b.header().panic_time_ns = 100'000'000'000;
  b.header().mono_to_real_ns = 1'700'000'000'000'000'000;
  b.cpu(0).flags |= FLIGHTREC_PANIC_CPU_PANICKING;
  recorder::module::KernelEnv env;
  env.release = "6.1.0-56-amd64";
  auto st = store::Store::Open(tmp.path() + "/store");
  ASSERT_TRUE(st.ok()) << st.status().message();
  auto claim = recorder::module::StoreHeldRegion(
      b.Build(), "at 0x30000000 (256 KiB)", [&] { return env; },
      [&](recorder::module::PanicDump& d) -> StatusOr<std::string> {
        ASSIGN_OR_RETURN(auto r, recorder::WritePanicRecord(**st, d));
        return r.row.id;
      },
      [] { return std::string(); });
  ASSERT_EQ(claim.outcome, recorder::module::PanicClaim::Outcome::kStored) << claim.message;

  auto entries = Entries("FLIGHTREC_RECORD_ID=" + claim.record_id);
  ASSERT_EQ(entries.size(), 1u) << "no journal entry for " << claim.record_id;
  const nlohmann::json& j = entries[0];
  EXPECT_EQ(Bytes(j["FLIGHTREC_KIND"]), "panic");
  EXPECT_EQ(Bytes(j["FLIGHTREC_PANIC_MESSAGE"]), message);
  EXPECT_EQ(Bytes(j["MESSAGE"]),
            "Kernel panic: Oops\\nFLIGHTREC_KIND=forged\\n\\x1b[2J; history: recorder crash info " +
                claim.record_id);
  EXPECT_EQ(j.count("FLIGHTREC_PID") + j.count("FLIGHTREC_SIGNAL"), 0u) << j.dump();
}

// A death without a core (kill -9 of an idle process) stored by recorderd's
// death watch logs its entry too, with the signal and the process.
TEST_F(JournalTest, RecorderdLogsEachStoredDeath) {
  TempDir tmp;
  Daemon d(tmp.path(), {"--deaths", "on"});
  ASSERT_TRUE(d.ready()) << d.Log();
  pid_t victim = Spawn({"/bin/sleep", "60"});
  ASSERT_GT(victim, 0);
  // The watch reads a process's metadata at its exec: wait until the
  // daemon could have (the sleeper is in its sideband once it slept).
  ASSERT_TRUE(WaitFor(
      [&] {
        return ReadFile(fmt::format("/proc/{}/stat", victim)).find(" S ") != std::string::npos;
      },
      10s, 10ms));
  kill(victim, SIGKILL);
  WaitStatus(victim);
  auto entries = Entries(fmt::format("FLIGHTREC_PID={}", victim));
  ASSERT_EQ(entries.size(), 1u) << "no journal entry for the death of " << victim << "\n"
                                << d.Log();
  const nlohmann::json& j = entries[0];
  EXPECT_EQ(Bytes(j["FLIGHTREC_KIND"]), "death");
  EXPECT_EQ(Bytes(j["FLIGHTREC_SIGNAL"]), "9");
  EXPECT_EQ(Bytes(j["FLIGHTREC_COMM"]), "sleep");
  const std::string id = Bytes(j["FLIGHTREC_RECORD_ID"]);
  auto info = d.Cli({"crash", "info", id, "--json"});
  EXPECT_EQ(info.exit_code, 0) << id << ": " << info.err;
  EXPECT_NE(Bytes(j["MESSAGE"]).find("history: recorder crash info " + id), std::string::npos)
      << j.dump();
}

// The catalog entry compiles (journalctl --update-catalog, into a private
// root) and explains our MESSAGE_ID.
TEST_F(JournalTest, TheCatalogExplainsTheMessageId) {
  TempDir root;
  fs::create_directories(root.path() + "/usr/lib/systemd/catalog");
  fs::copy_file(SourcePath("journal/flightrec.catalog"),
                root.path() + "/usr/lib/systemd/catalog/flightrec.catalog");
  auto update = RunCommand({kJournalctl, "--root=" + root.path(), "--update-catalog"});
  ASSERT_EQ(update.exit_code, 0) << update.err;
  auto list = RunCommand(
      {kJournalctl, "--root=" + root.path(), "--dump-catalog", std::string(kRecordMessageId)});
  ASSERT_EQ(list.exit_code, 0) << list.err;
  EXPECT_NE(list.out.find("Subject: flightrec stored a @FLIGHTREC_KIND@ record"), std::string::npos)
      << list.out;
  EXPECT_NE(list.out.find("recorder crash info @FLIGHTREC_RECORD_ID@"), std::string::npos);
}

// One send in flight at a time, yet an entry right after another is never
// refused: the first is no longer in flight once its caller returns.
TEST_F(JournalTest, ConsecutiveEntriesAreAllSent) {
  journal::JournalEntry e;
  e.record_id = "consecutive";
  e.comm = "consecutive";
  for (int i = 0; i < 500; ++i) {
    Status s = journal::LogRecordToJournal(e, 10s);
    ASSERT_TRUE(s.ok()) << "entry " << i << ": " << s.message();
  }
}

// A journald that stopped reading (SIGSTOP: its socket's queue fills at
// net.unix.max_dgram_qlen datagrams) holds no caller: a send gives up after
// its bound, the next fails at once instead of queueing a thread behind it,
// and the hook still stores the crash; once journald reads again, so do we.
TEST_F(JournalTest, AJournaldThatStopsReadingDelaysNoRecord) {
  ASSERT_EQ(kill(journald_, SIGSTOP), 0);
  struct Continue {
    ~Continue() { kill(journald_, SIGCONT); }
  } resume_journald;
  journal::JournalEntry e;
  e.record_id = "fill";
  e.comm = "fill";
  e.pid = getpid();
  e.uid = 0;
  e.signal = SIGSEGV;
  // Sends return as soon as journald's queue takes them; the one that finds
  // it full waits out its bound (1 s: far beyond a send's time on a loaded
  // machine, so only a full queue reaches it).
  Status last;
  for (int i = 0; i < 100'000 && last.ok(); ++i) last = journal::LogRecordToJournal(e, 1s);
  ASSERT_FALSE(last.ok()) << "the socket's queue never filled";
  EXPECT_NE(last.message().find("did not take the entry within 1000 ms"), std::string::npos)
      << last.message();
  // Refused at once: were it waited on, it would take its whole bound.
  Status again = journal::LogRecordToJournal(e, 60s);
  EXPECT_NE(again.message().find("an earlier entry is still waiting"), std::string::npos)
      << again.message();

  TempDir tmp;
  pid_t sleeper = Spawn({"/bin/sleep", "60"});
  bool finished = false;
  std::string err = RunHook(tmp.path() + "/store", sleeper, 60s, &finished);
  kill(sleeper, SIGKILL);
  WaitStatus(sleeper);
  ASSERT_TRUE(finished) << "the hook waited for journald: " << err;
  EXPECT_FALSE(StoredId(err).empty()) << err;
  EXPECT_NE(err.find("journald did not take the entry within 500 ms"), std::string::npos) << err;

  ASSERT_EQ(kill(journald_, SIGCONT), 0);
  EXPECT_TRUE(WaitFor([&] { return journal::LogRecordToJournal(e, 1s).ok(); }, 10s));
}

}  // namespace
}  // namespace flightrec::testing
