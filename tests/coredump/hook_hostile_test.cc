// Hostile settings, answers, names and paths: the hook loses no crash.
#include <fcntl.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <thread>

#include <fmt/format.h>

#include "common/scoped_fd.h"
#include "common/terminal_escape.h"
#include "tests/coredump/coredump_fixture.h"
#include "tests/support/unix_socket.h"

namespace flightrec::testing {
namespace {

namespace fs = std::filesystem;
using namespace std::chrono_literals;

// The hook's settings file with `changes` merged in, for the object's life
// (`coredump install` writes it afresh afterwards).
class ScopedHookConfig {
 public:
  ScopedHookConfig(const Daemon& d, const nlohmann::json& changes) : daemon_(d) {
    auto j = nlohmann::json::parse(ReadFile(kConfig), nullptr, false);
    ok_ = j.is_object();
    j.update(changes);
    std::ofstream(kConfig, std::ios::trunc) << j.dump();
  }
  ~ScopedHookConfig() { daemon_.Cli({"coredump", "install", "--hook", HookPath()}); }
  bool ok() const { return ok_; }

 private:
  static constexpr const char* kConfig = "/etc/flightrec/coredump.json";
  const Daemon& daemon_;
  bool ok_ = false;
};

TEST_F(CoredumpTest, OneUserCannotUseUpEveryonesCoreBudget) {
  // Cores are budgeted per uid (what a user cannot mint), not only per
  // executable (which a copy mints): nobody's sixth crash of six copies
  // keeps metadata only, and root's and daemon's next crashes still get
  // their cores.
  constexpr uid_t kNobody = 65534, kDaemon = 1;
  ScopedHookConfig config(*daemon_, {{"max_per_uid_per_hour", 4}});
  ASSERT_TRUE(config.ok());
  TempDir tmp;
  chmod(tmp.path().c_str(), 0755);
  for (int i = 0; i < 6; ++i) {
    SCOPED_TRACE(i);
    // Named to forge lines of the hook's count file for root if it kept
    // names raw.
    const std::string forged = fmt::format("\n{}\t0\tforged", time(nullptr));
    const std::string prog = fmt::format("{}/copy{}{}{}{}", tmp.path(), i, forged, forged, forged);
    auto crash = CrashCopy(prog, "segv", kNobody);
    ASSERT_FALSE(crash.is_null());
    EXPECT_EQ(crash["uid"], kNobody);
    EXPECT_EQ(crash["core_stored"].get<bool>(), i < 4) << crash.dump();
    EXPECT_EQ(crash["rate_limited"].get<bool>(), i >= 4) << crash.dump();
    if (i >= 4) {
      auto j = CrashInfo(daemon_->store(), crash["id"]);
      EXPECT_NE(j["crash"]["notes"].dump().find("uid 65534"), std::string::npos)
          << j["crash"]["notes"].dump();
    }
  }
  for (uid_t uid : {uid_t{0}, kDaemon}) {
    SCOPED_TRACE(uid);
    auto crash = CrashCopy(fmt::format("{}/other{}", tmp.path(), uid), "segv", uid);
    ASSERT_FALSE(crash.is_null());
    EXPECT_TRUE(crash["core_stored"].get<bool>()) << crash.dump();
    EXPECT_FALSE(crash["rate_limited"].get<bool>()) << crash.dump();
  }
}

TEST_F(CoredumpTest, ProgramsNamedLikeTheHookOrTheCliAreRecorded) {
  // Only the hook's own crashes are left alone (by its executable), not
  // every program whose name starts like it.
  TempDir tmp;
  chmod(tmp.path().c_str(), 0755);
  for (const std::string name : {"recorder", "recorder-coredump", "recorderd"}) {
    SCOPED_TRACE(name);
    auto crash = CrashCopy(tmp.path() + "/" + name);
    ASSERT_FALSE(crash.is_null());
    EXPECT_EQ(crash["comm"], name.substr(0, 15));
    EXPECT_TRUE(crash["core_stored"].get<bool>()) << crash.dump();
  }
}

// fr_crash copied into a directory deeper than PATH_MAX, made and removed
// through directory fds (no path to it is short enough for a system call):
// /proc/PID/exe cannot name it (readlink fails with ENAMETOOLONG).
class DeepCopy {
 public:
  explicit DeepCopy(const std::string& parent) {
    fds_.push_back(open(parent.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
    for (int depth = 0; depth < 24 && fds_.back() >= 0; ++depth) {  // 24 * 201 bytes > 4096
      if (mkdirat(fds_.back(), kComponent.c_str(), 0755) != 0) return;
      fds_.push_back(openat(fds_.back(), kComponent.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
    }
    if (fds_.size() != 25 || fds_.back() < 0) return;
    ScopedFd out(openat(fds_.back(), "fr_crash", O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0755));
    const std::string bytes = ReadFile(BuildPath("tests/programs/fr_crash"));
    ok_ = out && write(out.get(), bytes.data(), bytes.size()) == static_cast<ssize_t>(bytes.size());
  }
  // Removed from the bottom up, by directory fds.
  ~DeepCopy() {
    if (fds_.back() >= 0) unlinkat(fds_.back(), "fr_crash", 0);
    for (size_t k = fds_.size() - 1; k > 0; --k) {
      close(fds_[k]);
      unlinkat(fds_[k - 1], kComponent.c_str(), AT_REMOVEDIR);
    }
    close(fds_[0]);
  }
  DeepCopy(const DeepCopy&) = delete;
  DeepCopy& operator=(const DeepCopy&) = delete;
  bool ok() const { return ok_; }
  // Runs ./fr_crash MODE 0 there as uid; its pid once it died from SIGSEGV,
  // else -1.
  pid_t Crash(const std::string& mode, uid_t uid = 0) const {
    Launch l("./fr_crash", {"fr_crash", mode, "0"});
    l.cwd_fd = fds_.back();
    l.uid = uid;
    pid_t pid = Start(l);
    int st = WaitStatus(pid);
    return WIFSIGNALED(st) && WTERMSIG(st) == SIGSEGV ? pid : -1;
  }

 private:
  inline static const std::string kComponent = std::string(200, 'd');
  std::vector<int> fds_;
  bool ok_ = false;
};

TEST_F(CoredumpTest, AProgramMountedOverTheHooksPathIsRecorded) {
  // In a mount namespace of its own (a user namespace gives nobody one), a
  // program bind-mounted over the hook's path has the hook's path as its
  // /proc/PID/exe: only the file itself (device and inode) tells them apart.
  TempDir tmp;
  chmod(tmp.path().c_str(), 0755);
  const std::string prog = tmp.path() + "/fr_crash";
  fs::copy_file(BuildPath("tests/programs/fr_crash"), prog);
  const std::string hook = HookPath();
  for (uid_t uid : {uid_t{65534}, uid_t{0}}) {
    SCOPED_TRACE(uid);
    // unshare and sh exec in turn: the program crashes with the pid Start gives.
    Launch l("/usr/bin/unshare", {"unshare", uid == 0 ? "-m" : "-Urm", "/bin/sh", "-c",
                                  "mount --bind \"$0\" \"$1\" && exec \"$1\" segv 0", prog, hook});
    l.uid = uid;
    pid_t pid = Start(l);
    int st = WaitStatus(pid);
    ASSERT_TRUE(WIFSIGNALED(st) && WTERMSIG(st) == SIGSEGV) << "status " << st;
    auto crash = WaitForCrash(pid);
    ASSERT_FALSE(crash.is_null()) << "the crash was taken for the hook's own\n" << daemon_->Log();
    EXPECT_EQ(crash["exe"], hook);
    EXPECT_EQ(crash["uid"], uid);
    EXPECT_TRUE(crash["core_stored"].get<bool>()) << crash.dump();
  }
}

TEST_F(CoredumpTest, AnExecutableDeeperThanPathMaxKeepsItsMetadata) {
  // /proc/PID/exe cannot name a file deeper than PATH_MAX (readlink fails
  // with ENAMETOOLONG), yet the process is alive and its metadata readable.
  TempDir tmp;
  chmod(tmp.path().c_str(), 0755);
  DeepCopy deep(tmp.path());
  ASSERT_TRUE(deep.ok()) << strerror(errno);
  pid_t pid = deep.Crash("segv");
  ASSERT_GT(pid, 0);
  auto crash = WaitForCrash(pid);
  ASSERT_FALSE(crash.is_null()) << daemon_->Log();
  EXPECT_TRUE(crash["core_stored"].get<bool>()) << crash.dump();
  auto j = CrashInfo(daemon_->store(), crash["id"]);
  ASSERT_FALSE(j.is_null());
  const std::string notes = j["crash"]["notes"].dump();
  EXPECT_TRUE(j["metadata"].value("verified", false)) << j["metadata"].dump() << notes;
  EXPECT_EQ(notes.find("has exited"), std::string::npos) << notes;
  EXPECT_NE(notes.find("longer than PATH_MAX"), std::string::npos) << notes;
  EXPECT_EQ(j["metadata"]["cmdline"], "fr_crash segv 0") << j["metadata"].dump();
  EXPECT_FALSE(j["metadata"]["build_id"].get<std::string>().empty()) << j["metadata"].dump();
  EXPECT_EQ(j["crash"]["comm"], "fr_crash");
  EXPECT_FALSE(j["backtrace"]["threads"].empty()) << j["backtrace"].dump() << notes;
}

TEST_F(CoredumpTest, ACrashedProgramsNameNeverReachesGdbAsAnOption) {
  // With no path for its executable, the hook once stored the comm as the
  // executable, and `crash debug` handed it to gdb before the core: a user
  // named their program `-ex=!touch pwn`, and gdb, run by root, ran the
  // shell command. The executable stays unrecorded, and gdb gets only paths
  // after `--`.
  constexpr uid_t kNobody = 65534;
  const std::string comm = "-ex=!touch pwn";
  TempDir tmp, cwd;
  chmod(tmp.path().c_str(), 0755);
  DeepCopy deep(tmp.path());
  ASSERT_TRUE(deep.ok()) << strerror(errno);
  pid_t pid = deep.Crash("comm=" + comm, kNobody);
  ASSERT_GT(pid, 0);
  auto crash = WaitForCrash(pid);
  ASSERT_FALSE(crash.is_null()) << daemon_->Log();
  EXPECT_EQ(crash["comm"], comm);
  EXPECT_EQ(crash.value("exe", ""), "") << crash.dump();
  const std::string rec = BuildPath("recorder/cli/recorder");
  // Root debugs it the way a script would, from a directory of its own.
  auto r = RunCommand({"/usr/bin/env", "-C", cwd.path(), rec, "--store", daemon_->store(), "crash",
                       "debug", crash["id"], "-A", "-batch -nx -ex 'info threads'"});
  EXPECT_FALSE(fs::exists(cwd.path() + "/pwn")) << r.out << r.err;
  EXPECT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_NE(r.err.find("no executable path recorded"), std::string::npos) << r.err;
  // gdb still read the core: the crashed thread is listed.
  EXPECT_NE(r.out.find(fmt::format("LWP {}", pid)), std::string::npos) << r.out << r.err;
  // The list and the summary say the path is unknown and name the comm as
  // such.
  auto list = daemon_->Cli({"crash", "list", "--pid", std::to_string(pid)});
  EXPECT_NE(list.out.find("(not recorded; comm -ex=!touch pwn)"), std::string::npos) << list.out;
  auto info = daemon_->Cli({"crash", "info", crash["id"]});
  EXPECT_NE(info.out.find("Executable: (not recorded; comm -ex=!touch pwn)"), std::string::npos)
      << info.out;
}

TEST_F(CoredumpTest, ExecutablesWithoutAPathShareOneBudgetWhateverTheirNames) {
  // Without a path, the budget per executable was keyed by the comm, which
  // the user sets: every new name got a new budget. Now they share one.
  constexpr uid_t kNobody = 65534;
  ScopedHookConfig config(*daemon_, {{"max_per_exe_per_hour", 1}});
  ASSERT_TRUE(config.ok());
  TempDir tmp;
  chmod(tmp.path().c_str(), 0755);
  DeepCopy deep(tmp.path());
  ASSERT_TRUE(deep.ok()) << strerror(errno);
  for (const std::string name : {"first", "second"}) {
    SCOPED_TRACE(name);
    pid_t pid = deep.Crash("comm=" + name, kNobody);
    ASSERT_GT(pid, 0);
    auto crash = WaitForCrash(pid);
    ASSERT_FALSE(crash.is_null()) << daemon_->Log();
    EXPECT_EQ(crash["rate_limited"].get<bool>(), name == "second") << crash.dump();
  }
}

// Lowercase hex of `s` (what the hook stores as `key_hex`).
std::string Hex(const std::string& s) {
  std::string out;
  for (unsigned char c : s) out += fmt::format("{:02x}", c);
  return out;
}

TEST_F(CoredumpTest, NamesPathsAndArgvThatAreNotUtf8AreStoredExactly) {
  // A program's name, path, argv and cwd are bytes. JSON strings are UTF-8
  // and nlohmann's dump() throws on anything else: the root hook died on
  // such a crash (losing it) when it sent recorderd the history request, and
  // again when it wrote the metadata and the record's table of contents.
  TempDir tmp;
  chmod(tmp.path().c_str(), 0755);
  const std::string dir = tmp.path() + "/d\xff\x80ir";
  ASSERT_TRUE(fs::create_directory(dir));
  chmod(dir.c_str(), 0755);
  const std::string name =
      "\xff\xfe\x80"
      "crash";
  const std::string prog = dir + "/" + name;
  fs::copy_file(BuildPath("tests/programs/fr_crash"), prog);
  const std::string bad_arg = "arg\xff\xc0\xed\xa0\x80";  // stray, overlong lead, surrogate
  Launch l(prog, {prog, "segv", "0", bad_arg});
  l.cwd = dir;
  pid_t pid = Start(l);
  int st = WaitStatus(pid);
  ASSERT_TRUE(WIFSIGNALED(st) && WTERMSIG(st) == SIGSEGV) << st;
  nlohmann::json crash = WaitForCrash(pid);
  ASSERT_FALSE(crash.is_null()) << "crash lost\n" << daemon_->Log();
  EXPECT_TRUE(crash["core_stored"].get<bool>()) << crash.dump();
  auto info = CrashInfo(daemon_->store(), crash["id"]);
  ASSERT_TRUE(info.is_object());
  // Readable UTF-8 (U+FFFD for each bad byte), and the exact bytes in hex.
  const std::string canon = fs::canonical(prog).string();
  EXPECT_EQ(info["crash"]["comm"],
            "\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd"
            "crash");
  EXPECT_EQ(info["crash"]["comm_hex"], Hex(name));
  EXPECT_EQ(info["crash"]["exe_hex"], Hex(canon));
  EXPECT_EQ(info["metadata"]["comm_hex"], Hex(name));
  EXPECT_EQ(info["metadata"]["exe_hex"], Hex(canon));
  EXPECT_EQ(info["metadata"]["cwd_hex"], Hex(fs::canonical(dir).string()));
  EXPECT_EQ(info["metadata"]["cmdline_hex"], Hex(prog + " segv 0 " + bad_arg));
  // recorderd got the request (its reason quotes the name) and stored the
  // history.
  EXPECT_FALSE(info["crash"]["history"].get<std::string>().empty()) << info["crash"].dump();
  EXPECT_TRUE(info["history_error"].is_null()) << info.dump();
  // The CLI shows the exact bytes, escaped for the terminal.
  auto text = daemon_->Cli({"crash", "info", crash["id"]});
  ASSERT_EQ(text.exit_code, 0) << text.err;
  const std::string esc_dir = EscapeForTerminal(fs::canonical(dir).string());
  EXPECT_NE(text.out.find("Executable: " + esc_dir + "/\\xff\\xfe\\x80crash\n"), std::string::npos)
      << text.out;
  EXPECT_NE(text.out.find("CWD: " + esc_dir + "\n"), std::string::npos) << text.out;
  EXPECT_NE(text.out.find("segv 0 arg\\xff\\xc0\\xed\\xa0\\x80\n"), std::string::npos) << text.out;
  auto list = daemon_->Cli({"crash", "list", "--pid", std::to_string(pid)});
  ASSERT_EQ(list.exit_code, 0) << list.err;
  EXPECT_NE(list.out.find("\\xff\\xfe\\x80crash"), std::string::npos) << list.out;
  EXPECT_EQ(list.out.find("\xff"), std::string::npos) << list.out;
}

// `payload` as one frame of recorderd's control protocol: a 4-byte
// big-endian length (payloads here are under 64 KiB), then the bytes.
std::string Frame(const std::string& payload) {
  std::string frame(4, '\0');
  frame[2] = static_cast<char>(payload.size() >> 8);
  frame[3] = static_cast<char>(payload.size() & 0xff);
  return frame + payload;
}

TEST_F(CoredumpTest, RecorderdSurvivesARequestThatIsNotUtf8) {
  // Any local client may send recorderd bytes that are not UTF-8 (the
  // hook's reason quotes a program's name): refused, and it goes on.
  const std::string sock = dir_->path() + "/control.sock";
  ScopedFd s(ConnectUnix(sock));
  ASSERT_TRUE(s) << sock;
  const std::string frame = Frame(
      "{\"v\":1,\"id\":1,\"method\":\"dump\",\"params\":{\"last_ns\":1000000,"
      "\"reason\":\"history of \xff\xfe\x80 (1) killed by SIGSEGV\"}}");
  ASSERT_EQ(write(s.get(), frame.data(), frame.size()), static_cast<ssize_t>(frame.size()));
  // An answer comes (bounded by the daemon's own idle timeout).
  char buf[4096];
  ssize_t n = read(s.get(), buf, sizeof(buf));
  EXPECT_GT(n, 4);
  auto r = daemon_->Cli({"status", "--json"});
  EXPECT_EQ(r.exit_code, 0) << r.err << daemon_->Log();
}

// A socket at `path` that answers one request with `answer` (a frame's
// JSON), as whatever listens at the hook's socket path might.
class OneAnswerServer {
 public:
  OneAnswerServer(const std::string& path, std::string answer) {
    fd_.reset(ListenUnix(path, 4));
    ok_ = static_cast<bool>(fd_);
    thread_ = std::thread([this, answer] {
      ScopedFd c(accept4(fd_.get(), nullptr, nullptr, SOCK_CLOEXEC));
      if (!c) return;
      char buf[65536];
      (void)!read(c.get(), buf, sizeof(buf));  // the request (not looked at)
      const std::string frame = Frame(answer);
      (void)!write(c.get(), frame.data(), frame.size());
    });
  }
  ~OneAnswerServer() {
    shutdown(fd_.get(), SHUT_RDWR);  // ends an accept() nobody connected to
    thread_.join();
  }
  bool ok() const { return ok_; }

 private:
  ScopedFd fd_;
  bool ok_ = false;
  std::thread thread_;
};

TEST_F(CoredumpTest, AMistypedConfigOrAMisshapenDaemonAnswerLosesNoCrash) {
  // nlohmann's value() throws on a value of another type, and an uncaught
  // throw aborts the root hook: every later crash would be lost to one
  // hand-edited setting, or to one answer of the wrong shape on the socket.
  TempDir tmp;
  const std::string store = tmp.path() + "/store";
  Sleeper sleeper;
  const std::string input = tmp.path() + "/core";
  std::ofstream(input) << "not a core";
  const std::string config = tmp.path() + "/coredump.json";
  std::ofstream(config) << R"({"max_core_bytes": "1G", "history_ns": [5], "socket": 7,
                              "max_per_hour": 1.5, "store": {"x": 1}})";
  HookRun r = RunHookOn(store, tmp.path() + "/no.sock", sleeper.pid(), input, {"--config", config});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_FALSE(r.id().empty()) << r.err;
  EXPECT_NE(r.err.find("ignoring \"max_core_bytes\""), std::string::npos) << r.err;
  for (const std::string answer : {
           R"({"v":1,"id":1,"ok":true,"result":{"id":5,"file":["x"]}})",
           R"({"v":1,"id":1,"ok":"yes","error":{"code":5,"message":[]}})",
           R"({"v":1,"id":1,"ok":false,"error":"no"})",
           R"({"v":1,"id":1,"ok":true,"result":[1]})",
       }) {
    SCOPED_TRACE(answer);
    const std::string sock = tmp.path() + "/fake.sock";
    unlink(sock.c_str());
    OneAnswerServer server(sock, answer);
    ASSERT_TRUE(server.ok());
    HookRun h = RunHookOn(store, sock, sleeper.pid(), input);
    EXPECT_EQ(h.exit_code, 0) << h.err;
    EXPECT_FALSE(h.id().empty()) << h.err;
    EXPECT_NE(h.err.find("no history"), std::string::npos) << h.err;
  }
}

TEST_F(CoredumpTest, TheHookStoresOnlyInADirectoryNoOtherUserControls) {
  // The root hook creates, indexes, opens and deletes files in its store:
  // in a directory a user owns or may write (a store configured under a
  // user's home or a shared directory), that user could plant records and
  // symlinks for it. Such a store is refused with a log line.
  TempDir tmp;
  chmod(tmp.path().c_str(), 0755);
  Sleeper sleeper;
  const std::string input = tmp.path() + "/core";
  std::ofstream(input) << "not a core";
  const std::string users = tmp.path() + "/users";  // nobody's directory
  ASSERT_TRUE(fs::create_directory(users));
  ASSERT_EQ(chown(users.c_str(), 65534, 65534), 0);
  const std::string shared = tmp.path() + "/shared";  // everyone's, not sticky
  ASSERT_TRUE(fs::create_directory(shared));
  chmod(shared.c_str(), 0777);
  for (const std::string& store : {users, users + "/store", shared + "/store"}) {
    SCOPED_TRACE(store);
    HookRun r = RunHookOn(store, tmp.path() + "/no.sock", sleeper.pid(), input);
    EXPECT_EQ(r.exit_code, 1) << r.err;
    EXPECT_NE(r.err.find("crash not stored: store " + store), std::string::npos) << r.err;
    EXPECT_FALSE(fs::exists(store + "/index.sqlite"));
  }
  // A symlink to a good store is refused too.
  const std::string good = tmp.path() + "/good";
  HookRun ok = RunHookOn(good, tmp.path() + "/no.sock", sleeper.pid(), input);
  EXPECT_EQ(ok.exit_code, 0) << ok.err;
  EXPECT_FALSE(ok.id().empty()) << ok.err;
  fs::create_directory_symlink(good, tmp.path() + "/link");
  HookRun link = RunHookOn(tmp.path() + "/link", tmp.path() + "/no.sock", sleeper.pid(), input);
  EXPECT_EQ(link.exit_code, 1) << link.err;
  EXPECT_NE(link.err.find("symlinks are refused"), std::string::npos) << link.err;
}

}  // namespace
}  // namespace flightrec::testing
