// Read-time symbolization with debug info from debuginfod: fr_spin is copied
// with its DWARF split off (objcopy --only-keep-debug, strip --strip-debug),
// a real `debuginfod -F` serves the split file from its own directory, and
// `recorder record` samples the stripped copy with the perf backend. Then
// `recorder script --json` (the command whose frames carry file:line) is run
// with $DEBUGINFOD_URLS naming that server, with --no-debuginfod, and with
// servers that refuse or never answer.
#include <arpa/inet.h>
#include <fcntl.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "common/scoped_fd.h"
#include "tests/support/files.h"
#include "tests/support/run.h"
#include "tests/support/wait.h"

namespace flightrec {
namespace {

using testing::BuildPath;
using testing::ReadFile;
using testing::RunCommand;
using testing::RunResult;
using testing::TempDir;

// A loopback TCP socket bound to a free port; listening if `listen_backlog`
// > 0. Unlistening, it holds a port where every connection is refused.
ScopedFd LoopbackSocket(int listen_backlog, int* port) {
  ScopedFd fd(socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof a;
  if (!fd.valid() || bind(fd.get(), reinterpret_cast<sockaddr*>(&a), sizeof a) != 0 ||
      getsockname(fd.get(), reinterpret_cast<sockaddr*>(&a), &len) != 0 ||
      (listen_backlog > 0 && listen(fd.get(), listen_backlog) != 0)) {
    return ScopedFd();
  }
  *port = ntohs(a.sin_port);
  return fd;
}

// The HTTP status of GET `path` on 127.0.0.1:port; -1 if none came.
int HttpStatus(int port, const std::string& path) {
  ScopedFd fd(socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  a.sin_port = htons(port);
  timeval tv{5, 0};
  setsockopt(fd.get(), SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  if (connect(fd.get(), reinterpret_cast<sockaddr*>(&a), sizeof a) != 0) return -1;
  std::string req = "GET " + path + " HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n";
  if (write(fd.get(), req.data(), req.size()) != static_cast<ssize_t>(req.size())) return -1;
  char buf[64] = {};
  ssize_t n = read(fd.get(), buf, sizeof buf - 1);
  int status = -1;
  return n > 0 && sscanf(buf, "HTTP/%*s %d", &status) == 1 ? status : -1;
}

// A real debuginfod serving the ELF files under `dir` on a free loopback
// port; stopped (SIGTERM, then waited for) when the object goes, whatever
// the test did.
class DebuginfodServer {
 public:
  DebuginfodServer(const std::string& dir, const std::string& db) {
    ScopedFd probe = LoopbackSocket(0, &port_);
    probe.reset();  // free again for the server (a race with other tests' ports is unlikely)
    pid_ = testing::Spawn({"/usr/bin/debuginfod", "-F", dir, "-d", db, "-p", std::to_string(port_)},
                          /*quiet=*/true);
  }
  ~DebuginfodServer() {
    if (pid_ <= 0) return;
    kill(pid_, SIGTERM);
    testing::WaitStatus(pid_);
  }
  int port() const { return port_; }
  std::string url() const { return "http://127.0.0.1:" + std::to_string(port_); }
  // Whether it serves `build_id`'s debuginfo within the time allowed (it
  // scans its directory in the background after starting).
  bool WaitUntilServing(const std::string& build_id) const {
    return testing::WaitFor(
        [&] { return HttpStatus(port_, "/buildid/" + build_id + "/debuginfo") == 200; },
        std::chrono::seconds(60));
  }

 private:
  int port_ = 0;
  pid_t pid_ = -1;
};

std::string BuildIdOf(const std::string& path) {
  RunResult r = RunCommand({"/usr/bin/readelf", "-n", path});
  std::istringstream in(r.out);
  std::string word, prev;
  while (in >> word) {
    if (prev == "ID:") return word;
    prev = word;
  }
  return "";
}

// Offset and size in the file of each section of the ELF file at `path`,
// by name (as `readelf -S -W` lists them).
std::map<std::string, std::pair<size_t, size_t>> SectionsOf(const std::string& path) {
  std::map<std::string, std::pair<size_t, size_t>> out;
  std::istringstream in(RunCommand({"/usr/bin/readelf", "-S", "-W", path}).out);
  std::string line;
  while (std::getline(in, line)) {
    size_t close = line.find("] ");
    if (line.find('[') == std::string::npos || close == std::string::npos) continue;
    std::istringstream fields(line.substr(close + 2));
    std::string name, type, addr, off, size;
    // The header line ("[Nr] Name Type Address Off Size") has no numbers.
    if (fields >> name >> type >> addr >> off >> size && name.starts_with('.')) {
      out[name] = {std::strtoul(off.c_str(), nullptr, 16), std::strtoul(size.c_str(), nullptr, 16)};
    }
  }
  return out;
}

class DebuginfodTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = new TempDir();
    for (const char* sub : {"/bin", "/debug", "/nodebug"})
      std::filesystem::create_directory(dir_->path() + sub);
    const std::string built = BuildPath("tests/programs/fr_spin");
    ASSERT_EQ(RunCommand({"/usr/bin/objcopy", "--only-keep-debug", built,
                          dir_->path() + "/debug/fr_spin.debug"})
                  .exit_code,
              0);
    ASSERT_EQ(RunCommand({"/usr/bin/strip", "--strip-debug", "-o", Exe(), built}).exit_code, 0);
    build_id_ = BuildIdOf(Exe());
    ASSERT_EQ(build_id_.size(), 40u);
    // A fixed amount of work: the sample count does not depend on the load.
    RunResult rec =
        RunCommand({BuildPath("recorder/cli/recorder"), "--store", Store(), "record", "-F", "499",
                    "--history", "10m", "--last", "10m", "--always", "--", Exe(), "400", "rounds"});
    ASSERT_EQ(rec.exit_code, 0) << rec.err;
  }
  static void TearDownTestSuite() {
    delete dir_;
    dir_ = nullptr;
  }
  static std::string Exe() { return dir_->path() + "/bin/fr_spin"; }
  static std::string Store() { return dir_->path() + "/store"; }

  // `recorder script -1 --json EXTRA...` with `env`, with no local debug
  // directory and a fresh debuginfod cache.
  // *cache_out: that cache.
  static RunResult Script(const std::vector<std::string>& extra, std::vector<std::string> env,
                          std::string* cache_out = nullptr) {
    static int runs = 0;
    std::string cache = dir_->path() + "/cache" + std::to_string(++runs);
    if (cache_out) *cache_out = cache;
    env.push_back("DEBUGINFOD_CACHE_PATH=" + cache);
    env.push_back("FLIGHTREC_DEBUGINFO_PATH=" + dir_->path() + "/nodebug");
    env.push_back("FLIGHTREC_CACHE_DIR=" + cache + "-flightrec");
    std::vector<std::string> argv = {
        BuildPath("recorder/cli/recorder"), "--store", Store(), "script", "-1", "--json"};
    argv.insert(argv.end(), extra.begin(), extra.end());
    return RunCommand(argv, env);
  }

  // Of fr_spin's frames in spin_a and spin_b: how many there are, and how
  // many name a line of fr_spin.c.
  static void CountSpinFrames(const std::string& script_out, size_t* frames, size_t* with_line) {
    *frames = *with_line = 0;
    std::istringstream in(script_out);
    std::string line;
    while (std::getline(in, line)) {
      auto j = nlohmann::json::parse(line);
      for (const auto& f : j["frames"]) {
        if (f["dso"] != Exe() || (f["function"] != "spin_a" && f["function"] != "spin_b")) continue;
        ++*frames;
        if (f.contains("file") && f["file"].get<std::string>().ends_with("/fr_spin.c") &&
            f["line"].get<int>() > 0) {
          ++*with_line;
        }
      }
    }
  }

  static size_t Count(const std::string& text, const std::string& what) {
    size_t n = 0;
    for (size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
    return n;
  }

  static inline TempDir* dir_ = nullptr;
  static inline std::string build_id_;
};

// The stripped copy alone names spin_a and spin_b (its .symtab stays) but no
// line; the server's debug file adds fr_spin.c:N to every one of them.
TEST_F(DebuginfodTest, FramesGainFileAndLineFromTheServer) {
  DebuginfodServer server(dir_->path() + "/debug", dir_->path() + "/debuginfod.sqlite");
  ASSERT_TRUE(server.WaitUntilServing(build_id_)) << "debuginfod never served " << build_id_;
  RunResult r = Script({}, {"DEBUGINFOD_URLS=" + server.url(), "DEBUGINFOD_TIMEOUT=30"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  size_t frames = 0, with_line = 0;
  CountSpinFrames(r.out, &frames, &with_line);
  ASSERT_GT(frames, 10u) << r.out.substr(0, 2000);
  EXPECT_EQ(with_line, frames) << r.out.substr(0, 2000);
  EXPECT_EQ(Count(r.err, "debuginfod"), 0u) << r.err;  // nothing to say: it worked

  RunResult off = Script({"--no-debuginfod"}, {"DEBUGINFOD_URLS=" + server.url()});
  ASSERT_EQ(off.exit_code, 0) << off.err;
  CountSpinFrames(off.out, &frames, &with_line);
  ASSERT_GT(frames, 10u);
  EXPECT_EQ(with_line, 0u) << "--no-debuginfod still fetched";
}

// On a terminal, a line on stderr says what is being fetched while it is,
// and is erased when done; piped, nothing is said (the tests above count
// every "debuginfod" on stderr).
TEST_F(DebuginfodTest, AProgressLineIsShownOnATerminalWhileFetching) {
  DebuginfodServer server(dir_->path() + "/debug", dir_->path() + "/debuginfod-tty.sqlite");
  ASSERT_TRUE(server.WaitUntilServing(build_id_)) << "debuginfod never served " << build_id_;
  // script(1) gives the command a terminal; stdout goes to /dev/null.
  RunResult r = RunCommand(
      {"/usr/bin/script", "-qec",
       BuildPath("recorder/cli/recorder") + " --store " + Store() + " report -1 >/dev/null",
       "/dev/null"},
      {"DEBUGINFOD_URLS=" + server.url(), "DEBUGINFOD_CACHE_PATH=" + dir_->path() + "/cache-tty",
       "FLIGHTREC_DEBUGINFO_PATH=" + dir_->path() + "/nodebug"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("fetching debug info for " + build_id_ + " from debuginfod"),
            std::string::npos)
      << r.out;
  EXPECT_TRUE(r.out.ends_with("\r\033[K")) << "erased when done: " << r.out;
}

// What a server sends is untrusted: a debug file of the right build-id
// whose DWARF is garbage, or whose units claim to run past the file, is read
// within its bytes. The command still succeeds, with the stripped file's own
// symbols.
TEST_F(DebuginfodTest, AServedDebugFileWithHostileDwarfCostsOnlyItsLines) {
  const std::string good = ReadFile(dir_->path() + "/debug/fr_spin.debug");
  const auto sections = SectionsOf(dir_->path() + "/debug/fr_spin.debug");
  ASSERT_TRUE(sections.count(".debug_info") && sections.count(".debug_line") &&
              sections.count(".debug_abbrev"));
  // Garbage over every DWARF section; unit lengths past the end of the file.
  std::string garbage = good, lengths = good;
  uint32_t x = 0x9e3779b9;
  for (const char* name : {".debug_info", ".debug_abbrev", ".debug_line"}) {
    auto [off, size] = sections.at(name);
    for (size_t i = off; i < off + size; ++i) {
      x = x * 1664525 + 1013904223;
      garbage[i] = static_cast<char>(x >> 24);
    }
  }
  for (const char* name : {".debug_info", ".debug_line"})
    lengths.replace(sections.at(name).first, 4, "\xf0\xff\xff\x7f", 4);
  int variant = 0;
  for (const std::string& hostile : {garbage, lengths}) {
    SCOPED_TRACE(variant == 0 ? "garbage DWARF" : "unit lengths past the end");
    std::string served = dir_->path() + "/hostile" + std::to_string(variant++);
    std::filesystem::create_directory(served);
    std::ofstream(served + "/fr_spin.debug", std::ios::binary) << hostile;
    DebuginfodServer server(served, served + ".sqlite");
    ASSERT_TRUE(server.WaitUntilServing(build_id_)) << "debuginfod never served " << build_id_;
    std::string cache;
    RunResult r = Script({}, {"DEBUGINFOD_URLS=" + server.url(), "DEBUGINFOD_TIMEOUT=30"}, &cache);
    ASSERT_EQ(r.exit_code, 0) << r.err;
    EXPECT_EQ(ReadFile(cache + "/" + build_id_ + "/debuginfo"), hostile) << "it was fetched";
    size_t frames = 0, with_line = 0;
    CountSpinFrames(r.out, &frames, &with_line);
    EXPECT_GT(frames, 10u) << "the stripped file's own symbols still name the frames";
  }
}

// A server that refuses connections: symbolized without it, said once.
TEST_F(DebuginfodTest, ARefusingServerIsSaidOnceAndCostsNothing) {
  int port = 0;
  ScopedFd closed = LoopbackSocket(0, &port);  // bound, not listening: refuses
  ASSERT_TRUE(closed.valid());
  auto start = std::chrono::steady_clock::now();
  RunResult r = Script(
      {}, {"DEBUGINFOD_URLS=http://127.0.0.1:" + std::to_string(port), "DEBUGINFOD_TIMEOUT=2"});
  auto took = std::chrono::steady_clock::now() - start;
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(Count(r.err, "debuginfod"), 1u) << r.err;
  EXPECT_LT(took, std::chrono::seconds(60));
  size_t frames = 0, with_line = 0;
  CountSpinFrames(r.out, &frames, &with_line);
  EXPECT_GT(frames, 10u);
  EXPECT_EQ(with_line, 0u);
}

// A server that accepts and never answers costs one timeout, once: one
// connection for the whole run (not one per file or frame, nor libdebuginfod's
// retries), and one line on stderr.
TEST_F(DebuginfodTest, AServerThatNeverAnswersCostsOneTimeoutOnce) {
  int port = 0;
  ScopedFd silent = LoopbackSocket(64, &port);  // connections queue, never answered
  ASSERT_TRUE(silent.valid());
  auto start = std::chrono::steady_clock::now();
  RunResult r = Script(
      {}, {"DEBUGINFOD_URLS=http://127.0.0.1:" + std::to_string(port), "DEBUGINFOD_TIMEOUT=2"});
  auto took = std::chrono::steady_clock::now() - start;
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(Count(r.err, "debuginfod"), 1u) << r.err;
  EXPECT_LT(took, std::chrono::seconds(60));
  fcntl(silent.get(), F_SETFL, O_NONBLOCK);
  int connections = 0;
  while (ScopedFd(accept(silent.get(), nullptr, nullptr)).valid()) ++connections;
  EXPECT_EQ(connections, 1);
}

// Only the CLI, run by a user for themselves, can fetch: recorderd and the
// core hook (root, working on everyone's records and crashes) do not even
// link libdebuginfod, so no setting or environment makes them fetch.
TEST(DebuginfodLinkTest, OnlyTheCliLinksTheClient) {
  auto links = [](const std::string& rel) {
    RunResult r = RunCommand({"/usr/bin/readelf", "-d", BuildPath(rel)});
    EXPECT_EQ(r.exit_code, 0) << rel << ": " << r.err;
    return r.out.find("libdebuginfod") != std::string::npos;
  };
  EXPECT_TRUE(links("recorder/cli/recorder"));
  EXPECT_FALSE(links("recorder/daemon/recorderd"));
  EXPECT_FALSE(links("coredump-hook/recorder-coredump"));
}

}  // namespace
}  // namespace flightrec
