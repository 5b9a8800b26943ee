// Issue 11, item 5: records written for a user (the coredump hook's history
// of a crash of uid != 0, or a dump asked by a non-root member of the
// daemon's group) carry no raw kernel address: /proc/kallsyms hides them from
// that user, and one address defeats KASLR. A real recorderd samples a
// process that spends its time in read(2) (software cpu-clock samples carry
// kernel call chains), then every stored byte of each record is scanned for
// kernel-half values: in binary (little-endian u64 and LEB128 varints), in
// text (hex and decimal), in the decoded events, and in what `recorder
// script`, `report` and `info` print. The root record must show some (so the
// scan can fail); the users' records none, while `report` still names the
// kernel functions.
#include <fcntl.h>
#include <grp.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <regex>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "recorder/ipc/ipc.h"
#include "recorder/model/event_codec.h"
#include "store/store.h"
#include "tests/support/daemon.h"
#include "tests/support/files.h"
#include "tests/support/records.h"
#include "tests/support/run.h"

namespace flightrec {
namespace {

using testing::BuildPath;
using testing::Daemon;
using namespace std::chrono_literals;

constexpr uid_t kUser = 65534;   // nobody
constexpr gid_t kGroup = 65534;  // nogroup: the daemon's --group here

// The x86-64 kernel half as the issue states it: the direct map and vmalloc
// space (0xffff8...) up to the kernel text and modules (0xffffffff...).
bool KernelValue(uint64_t v) { return v >= 0xffff800000000000ull; }

uint64_t CpuNs(pid_t pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/schedstat");
  uint64_t ns = 0;
  in >> ns;
  return ns;
}

// Every place in `bytes` where a kernel-half value appears, described. The
// events section is LEB128, where zig-zag deltas between user addresses
// read as 0xffff... in little-endian, and a kernel-half value is a 10-byte
// varint (9 continuation bytes: no shorter varint, whole or in part, makes
// one); so it is scanned as varints at every offset, and decoded.
void ScanBytes(const std::string& where, const std::string& bytes, std::vector<std::string>* found,
               bool le_u64 = true) {
  const auto* p = reinterpret_cast<const unsigned char*>(bytes.data());
  const size_t n = bytes.size();
  auto add = [&](const std::string& what, size_t at, uint64_t v) {
    if (found->size() < 20) {
      std::ostringstream os;
      os << where << ": " << what << " at byte " << at << ": 0x" << std::hex << v;
      found->push_back(os.str());
    } else if (found->size() == 20) {
      found->push_back("...");
    }
  };
  for (size_t i = 0; le_u64 && i + 8 <= n; ++i) {  // little-endian u64, any alignment
    uint64_t v;
    std::memcpy(&v, p + i, 8);
    if (KernelValue(v)) add("u64", i, v);
  }
  for (size_t i = 0; i < n; ++i) {  // LEB128 (the events section's varints)
    uint64_t v = 0;
    size_t k = 0;
    for (; k < 10 && i + k < n; ++k) {
      v |= static_cast<uint64_t>(p[i + k] & 0x7f) << (7 * k);
      if ((p[i + k] & 0x80) == 0) break;
    }
    if (k < 10 && i + k < n && (p[i + k] & 0x80) == 0 && KernelValue(v)) add("varint", i, v);
  }
  // Text: 0xffff8..., ffffffff... in hex, and the same values in decimal
  // (JSON numbers): 2^64 * 0.99998 and up are all 20 digits starting 18446.
  static const std::regex hex("ffff[89a-f][0-9a-f]{11}", std::regex::icase);
  static const std::regex dec("1844[0-9]{16}");
  for (const auto* re : {&hex, &dec}) {
    for (auto it = std::sregex_iterator(bytes.begin(), bytes.end(), *re);
         it != std::sregex_iterator(); ++it) {
      uint64_t v = 0;
      if (re == &hex) {
        v = std::stoull(it->str(), nullptr, 16);
      } else {
        v = std::stoull(it->str());
      }
      if (KernelValue(v)) add("text " + it->str(), static_cast<size_t>(it->position()), v);
    }
  }
}

// Decodes the events section and checks every value an event carries.
void ScanEvents(const std::string& events, std::vector<std::string>* found) {
  recorder::EventDecoder dec(events);
  for (;;) {
    recorder::Event e;
    auto more = dec.Next(&e);
    ASSERT_TRUE(more.ok()) << more.status().message();
    if (!*more) break;
    std::vector<uint64_t> values;
    if (auto* s = std::get_if<recorder::Sample>(&e)) {
      values.push_back(s->ip);
      values.insert(values.end(), s->kernel_chain.begin(), s->kernel_chain.end());
      values.insert(values.end(), s->user_chain.begin(), s->user_chain.end());
      values.insert(values.end(), s->user_stack.regs.begin(), s->user_stack.regs.end());
    } else if (auto* m = std::get_if<recorder::MmapEvent>(&e)) {
      values = {m->start, m->start + m->len, m->pgoff};
    }
    for (uint64_t v : values) {
      if (KernelValue(v) && found->size() < 20) {
        std::ostringstream os;
        os << "decoded event: 0x" << std::hex << v;
        found->push_back(os.str());
      }
    }
  }
}

struct Scanned {
  std::vector<std::string> found;               // kernel-half values, where
  std::string report;                           // `recorder report` text
  std::map<std::string, int> kernel_functions;  // from `script --json`
  int kernel_frames = 0;
};

// This process's [vdso] mapping, byte for byte (from /proc/self/maps).
std::string OwnVdso() {
  std::ifstream maps("/proc/self/maps");
  std::string line;
  while (std::getline(maps, line)) {
    if (line.size() < 6 || line.compare(line.size() - 6, 6, "[vdso]") != 0) continue;
    const uintptr_t lo = std::stoull(line.substr(0, line.find('-')), nullptr, 16);
    const uintptr_t hi = std::stoull(line.substr(line.find('-') + 1), nullptr, 16);
    return std::string(reinterpret_cast<const char*>(lo), hi - lo);
  }
  return {};
}

Scanned ScanRecord(const Daemon& d, const std::string& id) {
  Scanned r;
  auto store = store::Store::Open(d.store(), store::testing::TestOptions());
  EXPECT_TRUE(store.ok()) << store.status().message();
  if (!store.ok()) return r;
  auto reader = (*store)->OpenRecord(id);
  EXPECT_TRUE(reader.ok()) << reader.status().message();
  if (!reader.ok()) return r;
  ScanBytes("meta", (*reader)->meta().dump(), &r.found);
  for (const auto& sec : (*reader)->sections()) {
    auto bytes = (*reader)->ReadSection(sec.name);
    EXPECT_TRUE(bytes.ok()) << bytes.status().message();
    if (!bytes.ok()) continue;
    // The vdso section is the kernel's vDSO image, the same bytes every
    // process has mapped readable: code, whose byte patterns look like kernel
    // addresses.  It is exempt only while it is exactly that image.
    if (sec.name == "vdso" && *bytes == OwnVdso()) continue;
    ScanBytes("section " + sec.name, *bytes, &r.found, sec.name != "events");
    if (sec.name == "events") ScanEvents(*bytes, &r.found);
  }
  for (std::vector<std::string> cmd : {std::vector<std::string>{"script", "--json", id},
                                       {"script", id},
                                       {"script", "--live", id},
                                       {"report", id},
                                       {"report", "--json", id},
                                       {"info", id},
                                       {"info", "--json", id}}) {
    auto out = d.Cli(cmd);
    EXPECT_EQ(out.exit_code, 0) << cmd[0] << ": " << out.err;
    std::string name = "recorder";
    for (const auto& c : cmd) name += " " + c;
    ScanBytes(name, out.out, &r.found);
    if (cmd[0] == "report" && cmd.size() == 2) r.report = out.out;
    if (cmd[0] == "script" && cmd[1] == "--json") {
      std::istringstream lines(out.out);
      std::string line;
      while (std::getline(lines, line)) {
        auto j = nlohmann::json::parse(line);
        for (const auto& f : j["frames"]) {
          if (f["dso"] != "[kernel.kallsyms]") continue;
          ++r.kernel_frames;
          std::string fn = f["function"];
          if (!fn.empty()) ++r.kernel_functions[fn];
        }
      }
    }
  }
  return r;
}

// A process that lives in the kernel: read(2) of /dev/zero and getpid(2),
// until killed. Returns once it has used 300 ms of CPU (bounded wait).
pid_t StartSyscallLoop() {
  pid_t pid = fork();
  if (pid == 0) {
    int fd = open("/dev/zero", O_RDONLY);
    static char buf[1 << 16];
    for (;;) {
      (void)!read(fd, buf, sizeof(buf));
      (void)getpid();
    }
  }
  auto deadline = std::chrono::steady_clock::now() + 30s;
  while (CpuNs(pid) < 300'000'000 && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(10ms);  // polling a condition, bounded
  }
  EXPECT_GE(CpuNs(pid), 300'000'000u) << "the syscall loop did not run";
  return pid;
}

std::string DumpAsRoot(const Daemon& d, nlohmann::json params) {
  auto c = recorder::ipc::Client::Connect(d.sock(), 10s);
  EXPECT_TRUE(c.ok()) << c.status().message();
  if (!c.ok()) return "";
  auto r = (*c)->Call("dump", params, 60s);
  EXPECT_TRUE(r.ok()) << r.status().message() << "\n" << d.Log();
  if (!r.ok()) return "";
  return (*r)["id"].get<std::string>();
}

// The same request from uid nobody in the daemon's group; returns the id.
std::string DumpAsUser(const Daemon& d, const nlohmann::json& params) {
  int fds[2];
  EXPECT_EQ(pipe(fds), 0);
  pid_t child = fork();
  if (child == 0) {
    close(fds[0]);
    if (setgroups(0, nullptr) != 0 || setgid(kGroup) != 0 || setuid(kUser) != 0) _exit(3);
    auto c = recorder::ipc::Client::Connect(d.sock(), 10s);
    if (!c.ok()) _exit(4);
    auto r = (*c)->Call("dump", params, 60s);
    if (!r.ok()) {
      std::string e = "error: " + r.status().message();
      (void)!write(fds[1], e.data(), e.size());
      _exit(5);
    }
    std::string id = (*r)["id"].get<std::string>();
    (void)!write(fds[1], id.data(), id.size());
    _exit(0);
  }
  close(fds[1]);
  std::string out = testing::ReadAll(fds[0]);
  close(fds[0]);
  int st = 0;
  waitpid(child, &st, 0);
  EXPECT_TRUE(WIFEXITED(st) && WEXITSTATUS(st) == 0) << "dump as uid " << kUser << ": " << out;
  return WIFEXITED(st) && WEXITSTATUS(st) == 0 ? out : "";
}

std::string Join(const std::vector<std::string>& v) {
  std::string s;
  for (const auto& x : v) s += "  " + x + "\n";
  return s;
}

class KernelRedactionTest : public ::testing::Test {
 protected:
  void SetUp() override {
    // The socket must be reachable by uid nobody: its group and the folders.
    chmod(dir_.path().c_str(), 0755);
  }
  void TearDown() override {
    if (loop_ > 0) {
      kill(loop_, SIGKILL);
      waitpid(loop_, nullptr, 0);
    }
  }
  std::vector<std::string> DaemonArgs(const std::string& policy) {
    std::vector<std::string> a = {"--event", "cpu-clock", "--group", "nogroup"};
    if (!policy.empty()) a.push_back("--kernel-frames-for-users=" + policy);
    return a;
  }
  flightrec::testing::TempDir dir_;
  pid_t loop_ = -1;
};

TEST_F(KernelRedactionTest, RecordsForUsersNameKernelFramesButCarryNoKernelAddress) {
  Daemon d(dir_.path(), DaemonArgs(""));  // the default policy: symbolized
  ASSERT_TRUE(d.ready()) << d.Log();
  loop_ = StartSyscallLoop();
  // With the daemon's own attribution too (section live_attribution).
  nlohmann::json base = {{"last_ns", 2'000'000'000}, {"pids", {loop_}}, {"live_attribution", true}};

  // Root's own record keeps kernel addresses: the scan below finds them.
  std::string root_id = DumpAsRoot(d, base);
  ASSERT_FALSE(root_id.empty());
  Scanned root = ScanRecord(d, root_id);
  ASSERT_FALSE(root.found.empty()) << "the root record has no kernel address: the scan cannot fail";
  ASSERT_FALSE(root.kernel_functions.empty()) << "no kernel frames sampled";
  std::string top;
  int top_n = 0;
  for (const auto& [fn, n] : root.kernel_functions) {
    if (n > top_n) top = fn, top_n = n;
  }

  // The coredump hook's request for a crash of uid nobody (root asks, for_uid).
  nlohmann::json for_user = base;
  for_user["for_uid"] = kUser;
  // A non-root peer asking directly, even if it claims for_uid 0.
  nlohmann::json claims_root = base;
  claims_root["for_uid"] = 0;
  for (auto [what, id] :
       {std::pair{"root dump for_uid nobody", DumpAsRoot(d, for_user)},
        std::pair{"dump by uid nobody", DumpAsUser(d, base)},
        std::pair{"dump by uid nobody claiming for_uid 0", DumpAsUser(d, claims_root)}}) {
    SCOPED_TRACE(what);
    ASSERT_FALSE(id.empty());
    Scanned user = ScanRecord(d, id);
    EXPECT_TRUE(user.found.empty()) << "kernel addresses in " << id << ":\n" << Join(user.found);
    // Still useful: the kernel frames are there, by name.
    EXPECT_GT(user.kernel_frames, 0);
    int named = 0;
    for (const auto& [fn, n] : user.kernel_functions) named += n;
    EXPECT_GE(named, user.kernel_frames * 9 / 10) << "kernel frames lost their names";
    EXPECT_NE(user.report.find(top), std::string::npos) << "report does not name " << top << ":\n"
                                                        << user.report.substr(0, 4000);
  }
}

TEST_F(KernelRedactionTest, PolicyNoneLeavesNothingKernelSideInUsersRecords) {
  Daemon d(dir_.path(), DaemonArgs("none"));
  ASSERT_TRUE(d.ready()) << d.Log();
  loop_ = StartSyscallLoop();
  // With the daemon's own attribution too (section live_attribution).
  nlohmann::json base = {{"last_ns", 2'000'000'000}, {"pids", {loop_}}, {"live_attribution", true}};
  Scanned root = ScanRecord(d, DumpAsRoot(d, base));
  ASSERT_FALSE(root.found.empty()) << "the root record has no kernel address: the scan cannot fail";
  nlohmann::json for_user = base;
  for_user["for_uid"] = kUser;
  for (const std::string& id : {DumpAsRoot(d, for_user), DumpAsUser(d, base)}) {
    ASSERT_FALSE(id.empty());
    Scanned user = ScanRecord(d, id);
    EXPECT_TRUE(user.found.empty()) << "kernel addresses in " << id << ":\n" << Join(user.found);
    EXPECT_TRUE(user.kernel_functions.empty())
        << "policy none, yet a kernel function: " << user.kernel_functions.begin()->first;
  }
}

}  // namespace
}  // namespace flightrec
