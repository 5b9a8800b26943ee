// StreamCore (submit.h): the core from a pipe goes to the record and, by
// tee(2), to the unwinder's copy; from a file, or when tee cannot be used,
// by a copy. Either way both get the same bytes, and no more than the core
// size limit. The copy's target here collects what it gets through a real
// pipe (the unwinder child's side: its sandbox is tested by coredump_test).
#include <fcntl.h>
#include <signal.h>
#include <sys/mman.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <string>
#include <thread>

#include "common/scoped_fd.h"
#include "coredump-hook/context.h"
#include "coredump-hook/sandbox.h"
#include "coredump-hook/submit.h"
#include "store/store.h"
#include "tests/support/files.h"

namespace flightrec::coredump {
namespace {

std::string Pattern(size_t n) {
  std::string s(n, '\0');
  uint64_t x = 88172645463325252ull;
  for (size_t i = 0; i < n; ++i) {
    x ^= x << 13, x ^= x >> 7, x ^= x << 17;
    // Runs of zeros too, like a core's untouched pages.
    s[i] = (i / 4096) % 3 == 0 ? '\0' : static_cast<char>(x);
  }
  return s;
}

// Writes `data` into a pipe from a thread, as the kernel writes a core.
class CorePipe {
 public:
  explicit CorePipe(const std::string& data) {
    signal(SIGPIPE, SIG_IGN);  // past the hook's limit the writer gets EPIPE
    int p[2];
    EXPECT_EQ(pipe2(p, O_CLOEXEC), 0);
    read_.reset(p[0]);
    ScopedFd w(p[1]);
    writer_ = std::thread([this, &data, w = std::move(w)]() mutable {
      size_t off = 0;
      while (off < data.size()) {
        // Odd sizes: the hook's reads and tees must not depend on them.
        size_t n = std::min<size_t>(data.size() - off, 100'003);
        ssize_t r = write(w.get(), data.data() + off, n);
        if (r <= 0) break;  // the hook stopped reading (a size limit)
        off += static_cast<size_t>(r);
      }
      written_ = off;
    });
  }
  ~CorePipe() {
    read_.reset();
    writer_.join();
  }
  int fd() const { return read_.get(); }

 private:
  ScopedFd read_;
  std::thread writer_;
  std::atomic<size_t> written_{0};
};

// The unwinder's side: a pipe drained by a thread.
class Collector : public CoreCopyTarget {
 public:
  explicit Collector(bool allow_tee) : allow_tee_(allow_tee) {
    int p[2];
    EXPECT_EQ(pipe2(p, O_CLOEXEC), 0);
    read_.reset(p[0]);
    write_.reset(p[1]);
    reader_ = std::thread([this] {
      char buf[65536];
      for (;;) {
        ssize_t n = read(read_.get(), buf, sizeof(buf));
        if (n <= 0) break;
        got_.append(buf, static_cast<size_t>(n));
      }
    });
  }
  ~Collector() override {
    if (reader_.joinable()) Done();
  }
  ssize_t TeeFrom(int in_fd, size_t max) override {
    if (!allow_tee_) return -1;
    ssize_t n = TeePipe(in_fd, write_.get(), max, 15000);
    if (n > 0) teed_ += static_cast<uint64_t>(n);
    return n;
  }
  void Feed(const char* data, size_t n) override {
    fed_ += n;
    while (n > 0) {
      ssize_t w = write(write_.get(), data, n);
      if (w <= 0) return;
      data += w;
      n -= static_cast<size_t>(w);
    }
  }
  // All the copy got.
  const std::string& Done() {
    write_.reset();
    reader_.join();
    return got_;
  }
  uint64_t teed() const { return teed_; }
  uint64_t fed() const { return fed_; }

 private:
  bool allow_tee_;
  ScopedFd read_, write_;
  std::thread reader_;
  std::string got_;
  uint64_t teed_ = 0, fed_ = 0;
};

struct Stored {
  std::string core;
  Crash crash;
  Status io;
};

// StreamCore into a fresh record, committed and read back.
Stored StreamAndReadBack(int core_fd, CoreCopyTarget* copy, uint64_t max_core_bytes) {
  testing::TempDir dir;
  auto st = store::Store::Open(dir.path() + "/store");
  EXPECT_TRUE(st.ok()) << st.status().ToString();
  auto rec = (*st)->BeginRecord("crash");
  EXPECT_TRUE(rec.ok()) << rec.status().ToString();
  HookOptions o;
  o.max_core_bytes = max_core_bytes;
  Stored s;
  s.io = StreamCore(core_fd, o, rec->get(), copy, &s.crash);
  auto row = (*st)->Commit(std::move(*rec), nlohmann::json::object());
  EXPECT_TRUE(row.ok()) << row.status().ToString();
  auto reader = (*st)->OpenRecord(row->id);
  EXPECT_TRUE(reader.ok()) << reader.status().ToString();
  auto core = (*reader)->ReadSection("core");
  EXPECT_TRUE(core.ok()) << core.status().ToString();
  s.core = core.ok() ? *core : "";
  return s;
}

TEST(StreamCore, FromAPipeTheUnwindersCopyIsTeedAndEqualsTheStoredCore) {
  const std::string data = Pattern((5 << 20) + 12345);
  CorePipe in(data);
  Collector copy(/*allow_tee=*/true);
  Stored s = StreamAndReadBack(in.fd(), &copy, 32ull << 30);
  EXPECT_TRUE(s.io.ok()) << s.io.ToString();
  EXPECT_EQ(s.crash.core_size, data.size());
  EXPECT_FALSE(s.crash.truncated);
  EXPECT_TRUE(s.core == data) << "record's core: " << s.core.size() << " bytes";
  EXPECT_TRUE(copy.Done() == data) << "unwinder's copy: " << copy.Done().size() << " bytes";
  EXPECT_EQ(copy.teed(), data.size()) << "every byte by tee, none copied";
  EXPECT_EQ(copy.fed(), 0u);
}

TEST(StreamCore, FromAPipeBothStopAtTheSizeLimit) {
  const std::string data = Pattern((3 << 20) + 999);
  const uint64_t limit = (1 << 20) + 4097;  // not a multiple of any read or tee
  CorePipe in(data);
  Collector copy(/*allow_tee=*/true);
  Stored s = StreamAndReadBack(in.fd(), &copy, limit);
  EXPECT_EQ(s.crash.core_size, limit);
  EXPECT_TRUE(s.crash.truncated);
  EXPECT_TRUE(s.core == data.substr(0, limit)) << s.core.size();
  const std::string& got = copy.Done();
  EXPECT_TRUE(got == data.substr(0, limit)) << "the copy got " << got.size() << " bytes";
}

TEST(StreamCore, WhenTeeCannotBeUsedTheCopyIsFedTheSameBytes) {
  const std::string data = Pattern((2 << 20) + 77);
  CorePipe in(data);
  Collector copy(/*allow_tee=*/false);
  Stored s = StreamAndReadBack(in.fd(), &copy, 32ull << 30);
  EXPECT_TRUE(s.core == data);
  EXPECT_TRUE(copy.Done() == data);
  EXPECT_EQ(copy.fed(), data.size());
}

TEST(StreamCore, FromARegularFileTheCopyIsFedAndLimited) {
  const std::string data = Pattern((2 << 20) + 5);
  ScopedFd f(memfd_create("core", MFD_CLOEXEC));
  ASSERT_TRUE(f.valid());
  ASSERT_EQ(write(f.get(), data.data(), data.size()), static_cast<ssize_t>(data.size()));
  ASSERT_EQ(lseek(f.get(), 0, SEEK_SET), 0);
  Collector copy(/*allow_tee=*/true);
  const uint64_t limit = (1 << 20) + 3;
  Stored s = StreamAndReadBack(f.get(), &copy, limit);
  EXPECT_TRUE(s.crash.truncated);
  EXPECT_TRUE(s.core == data.substr(0, limit));
  EXPECT_TRUE(copy.Done() == data.substr(0, limit));
  EXPECT_EQ(copy.teed(), 0u) << "a file is never teed";
}

TEST(TeePipe, GivesUpWhenTheCopysReaderStops) {
  int in[2], out[2];
  ASSERT_EQ(pipe2(in, O_CLOEXEC), 0);
  ASSERT_EQ(pipe2(out, O_CLOEXEC | O_NONBLOCK), 0);
  ScopedFd in_r(in[0]), in_w(in[1]), out_r(out[0]), out_w(out[1]);
  // Fill the copy's pipe: nobody reads it.
  std::string chunk(65536, 'x');
  while (write(out_w.get(), chunk.data(), chunk.size()) > 0) {
  }
  ASSERT_EQ(write(in_w.get(), "core", 4), 4);
  auto t0 = std::chrono::steady_clock::now();
  errno = 0;
  EXPECT_EQ(TeePipe(in_r.get(), out_w.get(), 4, 100), -1);
  EXPECT_EQ(errno, ETIMEDOUT);
  EXPECT_GE(std::chrono::steady_clock::now() - t0, std::chrono::milliseconds(100));
  char buf[8];
  EXPECT_EQ(read(in_r.get(), buf, sizeof(buf)), 4) << "nothing of the core was consumed";
  // A closed reader: EPIPE at once, not the deadline.
  ASSERT_EQ(write(in_w.get(), "more", 4), 4);
  out_r.reset();
  EXPECT_EQ(TeePipe(in_r.get(), out_w.get(), 4, 60000), -1);
  EXPECT_EQ(errno, EPIPE);
  // The end of the core: 0.
  in_w.reset();
  ASSERT_EQ(read(in_r.get(), buf, sizeof(buf)), 4);
  int spare[2];
  ASSERT_EQ(pipe2(spare, O_CLOEXEC), 0);
  ScopedFd spare_r(spare[0]), spare_w(spare[1]);
  EXPECT_EQ(TeePipe(in_r.get(), spare_w.get(), 4, 1000), 0);
}

TEST(TeePipe, RefusesWhatIsNotAPipe) {
  ScopedFd f(memfd_create("core", MFD_CLOEXEC));
  ASSERT_EQ(write(f.get(), "core", 4), 4);
  ASSERT_EQ(lseek(f.get(), 0, SEEK_SET), 0);
  int out[2];
  ASSERT_EQ(pipe2(out, O_CLOEXEC), 0);
  ScopedFd out_r(out[0]), out_w(out[1]);
  EXPECT_EQ(TeePipe(f.get(), out_w.get(), 4, 1000), -1);
  EXPECT_EQ(errno, EINVAL);
}

}  // namespace
}  // namespace flightrec::coredump
