// recorderd under hostile local clients (issue 11, items 2, 6 and 10): a real
// daemon, real sockets, real uids (a forked child drops to nobody), real
// RLIMIT_NOFILE. Every test reproduces an attack that killed, starved or
// bloated the daemon before its fix.
#include <grp.h>
#include <gtest/gtest.h>
#include <poll.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <nlohmann/json.hpp>
#include <optional>
#include <sstream>
#include <thread>

#include "common/units.h"
#include "recorder/ipc/ipc.h"
#include "tests/support/daemon.h"
#include "tests/support/files.h"
#include "tests/support/proc.h"
#include "tests/support/run.h"
#include "tests/support/unix_socket.h"
#include "tests/support/wait.h"

namespace flightrec {
namespace {

using testing::BuildPath;
using testing::ConnectUnix;
using testing::CpuTicks;
using testing::Daemon;
using namespace std::chrono_literals;

constexpr uid_t kNobody = 65534;
constexpr gid_t kNogroup = 65534;

// Sends `payload` as one frame on a new connection and returns the daemon's
// one answer, or nullopt if none came within the timeout.
std::optional<nlohmann::json> RawCall(const std::string& sock, const std::string& payload,
                                      std::chrono::milliseconds timeout = 10s) {
  int fd = ConnectUnix(sock);
  if (fd < 0) return std::nullopt;
  std::string out = recorder::ipc::Frame(payload);
  int64_t deadline = MonotonicNs() + timeout.count() * 1'000'000;
  size_t sent = 0;
  std::string in;
  size_t want = 4;
  while (in.size() < want) {
    int left = static_cast<int>((deadline - MonotonicNs()) / 1'000'000);
    if (left <= 0) break;
    pollfd p{fd, static_cast<short>(POLLIN | (sent < out.size() ? POLLOUT : 0)), 0};
    if (poll(&p, 1, left) <= 0) continue;
    if ((p.revents & POLLOUT) && sent < out.size()) {
      ssize_t n = send(fd, out.data() + sent, out.size() - sent, MSG_NOSIGNAL | MSG_DONTWAIT);
      if (n > 0) sent += static_cast<size_t>(n);
    }
    if (p.revents & (POLLIN | POLLHUP | POLLERR)) {
      char buf[65536];
      ssize_t n = recv(fd, buf, std::min(sizeof(buf), want - in.size()), MSG_DONTWAIT);
      if (n <= 0 && !(n < 0 && errno == EAGAIN)) break;
      if (n > 0) in.append(buf, static_cast<size_t>(n));
      if (want == 4 && in.size() == 4) {
        uint32_t len = (uint32_t{static_cast<uint8_t>(in[0])} << 24) |
                       (uint32_t{static_cast<uint8_t>(in[1])} << 16) |
                       (uint32_t{static_cast<uint8_t>(in[2])} << 8) |
                       uint32_t{static_cast<uint8_t>(in[3])};
        want = 4 + len;
      }
    }
  }
  close(fd);
  if (in.size() < 4 || in.size() != want) return std::nullopt;
  auto j = nlohmann::json::parse(in.substr(4), nullptr, false);
  if (j.is_discarded()) return std::nullopt;
  return j;
}

std::string ErrorCode(const std::optional<nlohmann::json>& r) {
  if (!r || !r->is_object() || !r->contains("error")) return "";
  return (*r)["error"].value("code", "");
}

// Runs `fn` in a forked child as uid nobody (gid nogroup) and returns its
// exit status (0 = what the child checked held).
int AsNobody(const std::function<int()>& fn) {
  pid_t child = fork();
  if (child == 0) {
    if (setgroups(0, nullptr) != 0 || setgid(kNogroup) != 0 || setuid(kNobody) != 0) _exit(100);
    _exit(fn());
  }
  int st = 0;
  waitpid(child, &st, 0);
  return WIFEXITED(st) ? WEXITSTATUS(st) : 200 + (WIFSIGNALED(st) ? WTERMSIG(st) : 0);
}

bool Alive(pid_t pid) {
  int st;
  return waitpid(pid, &st, WNOHANG) == 0;
}

uint64_t VmRssKb(pid_t pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/status");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("VmRSS:", 0) == 0) return std::stoull(line.substr(6));
  }
  return 0;
}

size_t OpenFds(pid_t pid) {
  size_t n = 0;
  for ([[maybe_unused]] const auto& e :
       std::filesystem::directory_iterator("/proc/" + std::to_string(pid) + "/fd"))
    ++n;
  return n;
}

// The socket file (and its directory) open to everyone, so that a refusal
// comes from the daemon's SO_PEERCRED policy, not from file permissions.
void OpenSocketToAll(const flightrec::testing::TempDir& dir, const Daemon& d) {
  chmod(dir.path().c_str(), 0755);
  chmod(d.sock().c_str(), 0666);
}

std::string NestedIdRequest(size_t depth) {
  return "{\"v\":1,\"id\":" + std::string(depth, '[') + std::string(depth, ']') +
         ",\"method\":\"status\"}";
}

// Item 2: ~400 KB of nested arrays in `id` overflowed the daemon's stack,
// even from a uid the policy refuses.
TEST(RecorderdLimitsTest, NestedJsonIdIsRefusedAndTheDaemonSurvives) {
  flightrec::testing::TempDir dir;
  Daemon d(dir.path());
  ASSERT_TRUE(d.ready()) << d.Log();
  OpenSocketToAll(dir, d);
  const std::string nested = NestedIdRequest(200'000);

  int rc = AsNobody([&] {
    auto r = RawCall(d.sock(), nested);
    return ErrorCode(r) == "permission_denied" ? 0 : 5;
  });
  EXPECT_EQ(rc, 0) << "refused uid's nested id: child exit " << rc;
  ASSERT_TRUE(Alive(d.pid())) << "recorderd died on a refused peer's nested id\n" << d.Log();

  auto r = RawCall(d.sock(), nested);
  EXPECT_EQ(ErrorCode(r), "invalid_request") << (r ? r->dump() : "no answer");
  ASSERT_TRUE(Alive(d.pid())) << "recorderd died on root's nested id\n" << d.Log();

  // Depth within the limit is not the problem: `id` must be a scalar.
  r = RawCall(d.sock(), "{\"v\":1,\"id\":[1],\"method\":\"status\"}");
  EXPECT_EQ(ErrorCode(r), "invalid_request");
  r = RawCall(d.sock(), "{\"v\":1,\"id\":{\"a\":1},\"method\":\"status\"}");
  EXPECT_EQ(ErrorCode(r), "invalid_request");
  r = RawCall(d.sock(),
              "{\"v\":1,\"id\":\"" + std::string(100'000, 'x') + "\",\"method\":\"status\"}");
  EXPECT_EQ(ErrorCode(r), "invalid_request") << "a 100 KB id string is echoed back";
  // Deep params are refused before they are parsed too.
  r = RawCall(d.sock(), "{\"v\":1,\"id\":1,\"method\":\"status\",\"params\":{\"x\":" +
                            std::string(1000, '[') + std::string(1000, ']') + "}}");
  EXPECT_EQ(ErrorCode(r), "invalid_request");
  // Brackets inside strings are data, not nesting.
  r = RawCall(d.sock(), "{\"v\":1,\"id\":\"" + std::string(200, '[') +
                            "\",\"method\":\"status\",\"params\":{\"s\":\"]]]\\\"[[[\"}}");
  ASSERT_TRUE(r) << "no answer";
  EXPECT_TRUE(r->value("ok", false)) << r->dump();
  EXPECT_EQ((*r)["id"], std::string(200, '['));
  // Scalar ids come back as they were sent.
  r = RawCall(d.sock(), "{\"v\":1,\"id\":null,\"method\":\"status\"}");
  ASSERT_TRUE(r);
  EXPECT_TRUE(r->value("ok", false)) << r->dump();

  auto s = d.Cli({"status", "--json"});
  EXPECT_EQ(s.exit_code, 0) << s.err;
}

// Item 10: 256 connections declaring 1 MiB frames raised the RSS by 230 MB,
// and a refused peer's frame was read and parsed before its refusal.
TEST(RecorderdLimitsTest, DeclaredFramesCostNoMemoryUntilTheirBytesArrive) {
  flightrec::testing::TempDir dir;
  Daemon d(dir.path());
  ASSERT_TRUE(d.ready()) << d.Log();
  OpenSocketToAll(dir, d);
  uint64_t before = VmRssKb(d.pid());
  const char header[4] = {0, 0x10, 0, 0};  // 1 MiB declared, nothing follows
  std::vector<int> fds;
  for (int i = 0; i < 200; ++i) {
    int fd = ConnectUnix(d.sock());
    ASSERT_GE(fd, 0);
    ASSERT_EQ(send(fd, header, 4, MSG_NOSIGNAL), 4);
    fds.push_back(fd);
  }
  // The daemon has read every header once it answers a request sent after
  // them on its single io thread; then watch its RSS for a while.
  ASSERT_EQ(d.Cli({"status", "--json"}).exit_code, 0);
  uint64_t peak = 0;
  int64_t until = MonotonicNs() + 500'000'000;
  while (MonotonicNs() < until) {
    peak = std::max(peak, VmRssKb(d.pid()));
    std::this_thread::sleep_for(20ms);  // sampling interval of the measurement
  }
  for (int fd : fds) close(fd);
  EXPECT_LT(peak, before + 32 * 1024) << "RSS " << before << " kB -> " << peak << " kB";

  // A refused uid's bytes are never kept: 20 connections each send a whole
  // 1 MiB frame (the daemon drops it as it arrives) and stay open.
  int rc = AsNobody([&] {
    std::vector<int> mine;
    std::string frame = std::string(header, 4) + std::string(1 << 20, '[');
    for (int i = 0; i < 20; ++i) {
      int fd = ConnectUnix(d.sock());
      if (fd < 0) return 6;
      if (send(fd, frame.data(), frame.size(), MSG_NOSIGNAL) != static_cast<ssize_t>(frame.size()))
        return 7;
      mine.push_back(fd);
    }
    auto r = RawCall(d.sock(), "{\"v\":1,\"id\":1,\"method\":\"status\"}");
    return ErrorCode(r) == "permission_denied" ? 0 : 5;
  });
  EXPECT_EQ(rc, 0);
  EXPECT_TRUE(Alive(d.pid()));
  EXPECT_LT(VmRssKb(d.pid()), before + 32 * 1024);
  EXPECT_EQ(d.Cli({"status", "--json"}).exit_code, 0);
}

// Item 10 (and 6): one uid holding every connection slot kept everyone else,
// root's coredump hook included, from being served until its idle timeout.
TEST(RecorderdLimitsTest, OneUidCannotHoldEveryConnection) {
  for (bool member : {false, true}) {
    SCOPED_TRACE(member ? "nobody in the socket's group" : "nobody refused by the policy");
    flightrec::testing::TempDir dir;
    std::vector<std::string> extra;
    if (member) extra = {"--group", "nogroup"};
    Daemon d(dir.path(), extra);
    ASSERT_TRUE(d.ready()) << d.Log();
    OpenSocketToAll(dir, d);
    int ready[2], done[2];
    ASSERT_EQ(pipe(ready), 0);
    ASSERT_EQ(pipe(done), 0);
    pid_t child = fork();
    if (child == 0) {
      if (setgroups(0, nullptr) != 0 || setgid(kNogroup) != 0 || setuid(kNobody) != 0) _exit(100);
      std::vector<int> held;
      for (int i = 0; i < 300; ++i) {
        int fd = ConnectUnix(d.sock());
        if (fd >= 0) held.push_back(fd);
      }
      char c = 1;
      (void)!write(ready[1], &c, 1);
      (void)!read(done[0], &c, 1);  // hold them until the parent has checked
      _exit(0);
    }
    char c;
    ASSERT_EQ(read(ready[0], &c, 1), 1);
    auto r = d.Cli({"status", "--json"});
    EXPECT_EQ(r.exit_code, 0) << "root not served while nobody holds 300 connections: " << r.err;
    if (r.exit_code == 0) {
      auto j = nlohmann::json::parse(r.out);
      EXPECT_LE(j["socket"]["connections"].get<size_t>(), 40u) << j["socket"].dump();
    }
    (void)!write(done[1], &c, 1);
    int st;
    waitpid(child, &st, 0);
    for (int fd : {ready[0], ready[1], done[0], done[1]}) close(fd);
  }
}

// Item 10: 7 990 uprobe triggers exhausted the daemon's descriptors, after
// which `status` outgrew the answer limit and SIGTERM took seconds.
TEST(RecorderdLimitsTest, TriggerFloodHitsPerUidAndTotalLimits) {
  flightrec::testing::TempDir dir;
  Daemon d(dir.path(),
           {"--group", "nogroup", "--max-triggers", "6", "--max-triggers-per-uid", "4"});
  ASSERT_TRUE(d.ready()) << d.Log();
  chmod(dir.path().c_str(), 0755);
  std::string spec = BuildPath("tests/programs/fr_spin") + ":spin_b";
  nlohmann::json add = {{"uprobe", spec}};
  auto c = recorder::ipc::Client::Connect(d.sock(), 5s);
  ASSERT_TRUE(c.ok()) << c.status().message();
  for (int i = 0; i < 4; ++i) {
    auto r = (*c)->Call("trigger_add", add, 10s);
    ASSERT_TRUE(r.ok()) << i << ": " << r.status().message();
  }
  auto over = (*c)->Call("trigger_add", add, 10s);
  ASSERT_FALSE(over.ok());
  EXPECT_EQ(over.status().code(), StatusCode::kResourceExhausted) << over.status().message();
  EXPECT_NE(over.status().message().find("per uid"), std::string::npos) << over.status().message();

  // Another uid (a member of the socket's group) has its own share, up to the total.
  int rc = AsNobody([&] {
    auto cc = recorder::ipc::Client::Connect(d.sock(), 5s);
    if (!cc.ok()) return 4;
    for (int i = 0; i < 2; ++i) {
      if (!(*cc)->Call("trigger_add", {{"uprobe", spec}}, 10s).ok()) return 10 + i;
    }
    auto r = (*cc)->Call("trigger_add", {{"uprobe", spec}}, 10s);
    if (r.ok() || r.status().code() != StatusCode::kResourceExhausted) return 5;
    return r.status().message().find("in total") != std::string::npos ? 0 : 6;
  });
  EXPECT_EQ(rc, 0);

  // The raw answer names the limit with its own code.
  auto raw = RawCall(
      d.sock(),
      nlohmann::json{{"v", 1}, {"id", 7}, {"method", "trigger_add"}, {"params", add}}.dump());
  EXPECT_EQ(ErrorCode(raw), "limit_exceeded") << (raw ? raw->dump() : "no answer");

  auto s = (*c)->Call("status", nlohmann::json::object(), 10s);
  ASSERT_TRUE(s.ok()) << s.status().message();
  EXPECT_EQ((*s)["triggers"].size(), 6u);
  EXPECT_EQ((*s)["limits"]["max_triggers"], 6);
  c->reset();
  EXPECT_TRUE(d.StopWithin(5s)) << "SIGTERM did not stop recorderd within 5 s";
}

// A trigger belongs to the uid that added it: a `--group` member removed
// root's triggers (and anyone's) by id.
TEST(RecorderdLimitsTest, OnlyATriggersOwnerOrRootRemovesIt) {
  flightrec::testing::TempDir dir;
  Daemon d(dir.path(), {"--group", "nogroup"});
  ASSERT_TRUE(d.ready()) << d.Log();
  chmod(dir.path().c_str(), 0755);
  const std::string spec = BuildPath("tests/programs/fr_spin") + ":spin_b";
  auto c = recorder::ipc::Client::Connect(d.sock(), 5s);
  ASSERT_TRUE(c.ok()) << c.status().message();
  auto roots = (*c)->Call("trigger_add", {{"uprobe", spec}}, 10s);
  ASSERT_TRUE(roots.ok()) << roots.status().message();
  const uint64_t root_id = (*roots)["id"];
  // nobody may not remove root's trigger, but adds and removes its own.
  uint64_t kept_id = 0;
  int pipefd[2];
  ASSERT_EQ(pipe(pipefd), 0);
  int rc = AsNobody([&] {
    auto cc = recorder::ipc::Client::Connect(d.sock(), 5s);
    if (!cc.ok()) return 4;
    auto r = (*cc)->Call("trigger_remove", {{"id", root_id}}, 10s);
    if (r.ok()) return 5;
    if (r.status().code() != StatusCode::kPermissionDenied) return 6;
    auto mine = (*cc)->Call("trigger_add", {{"uprobe", spec}}, 10s);
    if (!mine.ok()) return 7;
    if (!(*cc)->Call("trigger_remove", {{"id", (*mine)["id"]}}, 10s).ok()) return 8;
    auto kept = (*cc)->Call("trigger_add", {{"uprobe", spec}}, 10s);
    if (!kept.ok()) return 9;
    const uint64_t id = (*kept)["id"];
    return write(pipefd[1], &id, sizeof(id)) == sizeof(id) ? 0 : 10;
  });
  close(pipefd[1]);
  ASSERT_EQ(rc, 0);
  ASSERT_EQ(read(pipefd[0], &kept_id, sizeof(kept_id)), static_cast<ssize_t>(sizeof(kept_id)));
  close(pipefd[0]);
  auto l = (*c)->Call("trigger_list", nlohmann::json::object(), 10s);
  ASSERT_TRUE(l.ok()) << l.status().message();
  ASSERT_EQ(l->size(), 2u) << l->dump();
  EXPECT_EQ((*l)[0]["id"], root_id);
  EXPECT_EQ((*l)[0]["owner_uid"], 0);
  EXPECT_EQ((*l)[1]["owner_uid"], kNobody);
  // Root removes anyone's.
  auto removed = (*c)->Call("trigger_remove", {{"id", kept_id}}, 10s);
  EXPECT_TRUE(removed.ok()) << removed.status().message();
  auto raw =
      RawCall(d.sock(),
              nlohmann::json{
                  {"v", 1}, {"id", 1}, {"method", "trigger_remove"}, {"params", {{"id", root_id}}}}
                  .dump());
  EXPECT_TRUE(raw && (*raw)["ok"] == true) << (raw ? raw->dump() : "no answer");
  c->reset();
  EXPECT_TRUE(d.StopWithin(10s));
}

// trigger_add opened and parsed the named file as root: it answered file
// offsets for binaries in directories closed to the asker and "not an ELF
// file" for /etc/shadow. A file is resolved with the asker's credentials.
TEST(RecorderdLimitsTest, TriggerTargetsAreResolvedAsTheAskingUser) {
  flightrec::testing::TempDir dir;
  Daemon d(dir.path(), {"--group", "nogroup"});
  ASSERT_TRUE(d.ready()) << d.Log();
  chmod(dir.path().c_str(), 0755);
  const std::string closed = dir.path() + "/closed";
  ASSERT_EQ(mkdir(closed.c_str(), 0700), 0);
  std::filesystem::copy_file(BuildPath("tests/programs/fr_spin"), closed + "/fr_spin");
  ASSERT_EQ(chmod((closed + "/fr_spin").c_str(), 0755), 0);
  const std::string hidden = closed + "/fr_spin:spin_b";
  // A private copy: a uprobe fires in every process running the file.
  const std::string spin = dir.path() + "/fr_spin";
  std::filesystem::copy_file(BuildPath("tests/programs/fr_spin"), spin);
  ASSERT_EQ(chmod(spin.c_str(), 0755), 0);
  const std::string open_spec = spin + ":spin_b";
  int rc = AsNobody([&] {
    auto cc = recorder::ipc::Client::Connect(d.sock(), 5s);
    if (!cc.ok()) return 4;
    for (const std::string& spec : {hidden, closed + "/fr_spin:0x1000"}) {
      auto r = (*cc)->Call("trigger_add", {{"uprobe", spec}}, 10s);
      if (r.ok()) return 5;  // answered a file offset of a file nobody cannot read
      if (r.status().code() != StatusCode::kPermissionDenied &&
          r.status().code() != StatusCode::kNotFound) {
        return 6;
      }
    }
    auto shadow = (*cc)->Call("trigger_add", {{"uprobe", "/etc/shadow:f"}}, 10s);
    if (shadow.ok() || shadow.status().message().find("ELF") != std::string::npos) return 7;
    if (shadow.status().code() != StatusCode::kPermissionDenied &&
        shadow.status().code() != StatusCode::kNotFound) {
      return 8;
    }
    // What nobody can read is resolved as before.
    auto mine = (*cc)->Call("trigger_add", {{"uprobe", open_spec}}, 10s);
    if (!mine.ok() || (*mine)["file_offset"].get<uint64_t>() == 0) return 9;
    auto not_elf = (*cc)->Call("trigger_add", {{"uprobe", "/etc/passwd:f"}}, 10s);
    return not_elf.status().code() == StatusCode::kInvalidArgument ? 0 : 10;
  });
  EXPECT_EQ(rc, 0);
  // Root still resolves any file.
  auto c = recorder::ipc::Client::Connect(d.sock(), 5s);
  ASSERT_TRUE(c.ok()) << c.status().message();
  auto roots = (*c)->Call("trigger_add", {{"uprobe", hidden}}, 10s);
  ASSERT_TRUE(roots.ok()) << roots.status().message();
  EXPECT_GT((*roots)["file_offset"].get<uint64_t>(), 0u);
  auto l = (*c)->Call("trigger_list", nlohmann::json::object(), 10s);
  ASSERT_TRUE(l.ok());
  ASSERT_EQ(l->size(), 2u) << l->dump();
  // nobody's trigger, placed through the file its resolver opened, fires:
  // spin_b runs 3 times.
  pid_t p = testing::Spawn({spin, "3", "rounds"});
  ASSERT_EQ(testing::WaitStatus(p), 0);
  nlohmann::json listed;
  EXPECT_TRUE(testing::WaitFor(
      [&] {
        auto now = (*c)->Call("trigger_list", nlohmann::json::object(), 10s);
        if (!now.ok() || now->size() != 2) return false;
        listed = (*now)[0];
        return listed["fired"].get<uint64_t>() >= 3;
      },
      20s, 50ms))
      << listed.dump();
  EXPECT_EQ(listed["owner_uid"], kNobody);
  c->reset();
  EXPECT_TRUE(d.StopWithin(10s));
}

// Item 10: `status` listed every trigger with every record, and outgrew the
// 1 MiB answer limit. It lists at most 64 and counts the rest.
TEST(RecorderdLimitsTest, StatusListsABoundedNumberOfTriggers) {
  constexpr int kTriggers = 70;
  long cpus = sysconf(_SC_NPROCESSORS_ONLN);
  rlimit lim{};
  ASSERT_EQ(getrlimit(RLIMIT_NOFILE, &lim), 0);
  rlim_t need = static_cast<rlim_t>(kTriggers * cpus + 512);
  // Root may raise the hard limit too (up to fs.nr_open), so nothing here is skipped.
  if (lim.rlim_max != RLIM_INFINITY && lim.rlim_max < need) lim.rlim_max = need;
  lim.rlim_cur = std::max<rlim_t>(lim.rlim_cur, need);
  ASSERT_EQ(setrlimit(RLIMIT_NOFILE, &lim), 0);  // recorderd inherits it
  flightrec::testing::TempDir dir;
  Daemon d(dir.path(), {"--max-triggers", "1000", "--max-triggers-per-uid", "1000"});
  ASSERT_TRUE(d.ready()) << d.Log();
  std::string spec = BuildPath("tests/programs/fr_spin") + ":spin_b";
  auto c = recorder::ipc::Client::Connect(d.sock(), 5s);
  ASSERT_TRUE(c.ok());
  for (int i = 0; i < kTriggers; ++i) {
    auto r = (*c)->Call("trigger_add", {{"uprobe", spec}}, 10s);
    ASSERT_TRUE(r.ok()) << i << ": " << r.status().message();
  }
  auto s = (*c)->Call("status", nlohmann::json::object(), 10s);
  ASSERT_TRUE(s.ok()) << s.status().message();
  EXPECT_EQ((*s)["triggers"].size(), 64u);
  EXPECT_EQ((*s)["triggers_total"], kTriggers);
  auto l = (*c)->Call("trigger_list", nlohmann::json::object(), 10s);
  ASSERT_TRUE(l.ok()) << l.status().message();
  EXPECT_EQ(l->size(), 64u);
  // A spec longer than a path and a symbol is refused.
  auto big = (*c)->Call("trigger_add", {{"uprobe", std::string(100'000, 'x') + ":f"}}, 10s);
  EXPECT_EQ(big.status().code(), StatusCode::kInvalidArgument) << big.status().message();
  c->reset();
  // The kernel releases each uprobe event in ~80 ms, one at a time.
  EXPECT_TRUE(d.StopWithin(60s));
}

// Item 10: at EMFILE recorderd spun on accept() at a full core, and did not
// come back. Here its RLIMIT_NOFILE is lowered under it (prlimit) until
// connections alone exhaust it.
TEST(RecorderdLimitsTest, OutOfDescriptorsBacksOffAndRecovers) {
  flightrec::testing::TempDir dir;
  Daemon d(dir.path());
  ASSERT_TRUE(d.ready()) << d.Log();
  rlimit lim{};
  lim.rlim_cur = lim.rlim_max = OpenFds(d.pid()) + 6;
  ASSERT_EQ(prlimit(d.pid(), RLIMIT_NOFILE, &lim, nullptr), 0) << strerror(errno);

  // A trigger would now leave no descriptors for the daemon's own work.
  std::string spec = BuildPath("tests/programs/fr_spin") + ":spin_b";
  auto t = d.Cli({"trigger", "add", "--uprobe", spec});
  EXPECT_NE(t.exit_code, 0);
  EXPECT_NE(t.err.find("descriptors"), std::string::npos) << t.err;

  std::vector<int> fds;
  for (int i = 0; i < 40; ++i) {
    int fd = ConnectUnix(d.sock());
    ASSERT_GE(fd, 0) << "connect " << i;
    fds.push_back(fd);
  }
  // Connections wait in the backlog while the daemon has no descriptors:
  // over 1.5 s it must not burn CPU on them.
  uint64_t t0 = CpuTicks(d.pid());
  int64_t m0 = MonotonicNs();
  while (MonotonicNs() - m0 < 1'500'000'000) std::this_thread::sleep_for(50ms);
  uint64_t ticks = CpuTicks(d.pid()) - t0;
  long hz = sysconf(_SC_CLK_TCK);
  EXPECT_LT(ticks, static_cast<uint64_t>(hz) * 3 / 10)
      << "recorderd used " << ticks << " ticks in 1.5 s with connections pending at EMFILE";
  EXPECT_TRUE(Alive(d.pid()));
  for (int fd : fds) close(fd);
  // Once they are gone it serves again (bounded wait).
  bool served = false;
  auto deadline = std::chrono::steady_clock::now() + 20s;
  while (!served && std::chrono::steady_clock::now() < deadline) {
    served = d.Cli({"status", "--json"}).exit_code == 0;
    if (!served) std::this_thread::sleep_for(100ms);
  }
  EXPECT_TRUE(served) << d.Log();
  EXPECT_TRUE(d.StopWithin(5s)) << "SIGTERM did not stop recorderd within 5 s";
}

// Item 6: the coredump hook's history dumps shared one 60/hour budget, so one
// user's crashes used up root's. Budgets are per uid (the crashed process's,
// `for_uid`, which only root may name) under a global ceiling, of which
// non-root uids together may not take root's share.
TEST(RecorderdLimitsTest, DumpBudgetsArePerUidUnderAGlobalCeiling) {
  flightrec::testing::TempDir dir;
  Daemon d(dir.path(), {"--group", "nogroup", "--max-dumps-per-hour", "6",
                        "--max-dumps-per-uid-per-hour", "2"});
  ASSERT_TRUE(d.ready()) << d.Log();
  chmod(dir.path().c_str(), 0755);
  auto c = recorder::ipc::Client::Connect(d.sock(), 5s);
  ASSERT_TRUE(c.ok());
  auto dump = [&](int for_uid) {
    return (*c)->Call("dump", {{"last_ns", 100'000'000}, {"for_uid", for_uid}}, 20s);
  };
  for (int i = 0; i < 2; ++i) ASSERT_TRUE(dump(1000).ok()) << i;  // total 2
  auto over = dump(1000);
  ASSERT_FALSE(over.ok());
  EXPECT_EQ(over.status().code(), StatusCode::kResourceExhausted);
  EXPECT_NE(over.status().message().find("uid 1000"), std::string::npos) << over.status().message();
  auto r = dump(0);  // root's crash still gets its history; total 3
  EXPECT_TRUE(r.ok()) << r.status().message();

  // A non-root peer cannot spend someone else's budget: its for_uid is
  // ignored and its own uid is charged.
  int rc = AsNobody([&] {
    auto cc = recorder::ipc::Client::Connect(d.sock(), 5s);
    if (!cc.ok()) return 4;
    nlohmann::json p = {{"last_ns", 100'000'000}, {"for_uid", 0}};
    for (int i = 0; i < 2; ++i) {
      if (!(*cc)->Call("dump", p, 20s).ok()) return 10 + i;  // total 5
    }
    auto third = (*cc)->Call("dump", p, 20s);
    if (third.ok() || third.status().code() != StatusCode::kResourceExhausted) return 5;
    return third.status().message().find("uid 65534") != std::string::npos ? 0 : 6;
  });
  EXPECT_EQ(rc, 0);

  // Non-root uids together have used 4: the ceiling (6) less root's share
  // (2). A fresh uid is refused, root is not.
  r = dump(2000);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kResourceExhausted);
  EXPECT_NE(r.status().message().find("all users but root"), std::string::npos)
      << r.status().message();
  r = dump(0);  // root's second: total 6, the ceiling
  EXPECT_TRUE(r.ok()) << r.status().message();
  auto s = (*c)->Call("status", nlohmann::json::object(), 10s);
  ASSERT_TRUE(s.ok());
  EXPECT_EQ((*s)["dumps"], 6);
  auto raw =
      RawCall(d.sock(), "{\"v\":1,\"id\":1,\"method\":\"dump\",\"params\":{\"for_uid\":3000}}");
  EXPECT_EQ(ErrorCode(raw), "limit_exceeded") << (raw ? raw->dump() : "no answer");
  EXPECT_NE(raw->dump().find("all users"), std::string::npos) << raw->dump();
  EXPECT_FALSE(dump(0).ok());  // root's own budget is spent too
  s = (*c)->Call("status", nlohmann::json::object(), 10s);
  ASSERT_TRUE(s.ok());
  EXPECT_EQ((*s)["dumps"], 6) << "the ceiling of 6 dumps per hour did not hold";
  // for_uid must be a uid.
  raw = RawCall(d.sock(), "{\"v\":1,\"id\":1,\"method\":\"dump\",\"params\":{\"for_uid\":\"x\"}}");
  EXPECT_EQ(ErrorCode(raw), "invalid_argument") << (raw ? raw->dump() : "no answer");
}

}  // namespace
}  // namespace flightrec
