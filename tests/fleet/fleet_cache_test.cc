// The fleet record cache against a hostile object store and a hostile cache
// directory (no gateway needed): a server on loopback that announces a small
// object and then streams far more, and a cache directory another user owns.
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <filesystem>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include <fmt/format.h>

#include "common/scoped_fd.h"
#include "recorder/fleet/digest_pg.h"
#include "recorder/fleet/fleet_glue.h"
#include "recorder/fleet/record_cache.h"
#include "tests/support/files.h"

namespace flightrec::fleet {
namespace {

using flightrec::testing::TempDir;

constexpr uint64_t kAnnounced = 20010;        // what HEAD says the object has
constexpr uint64_t kStreamed = 200ull << 20;  // what GET then sends, at most
constexpr uint64_t kSlack = 64 << 10;         // a cache file may not pass kAnnounced + this

// An S3 endpoint on 127.0.0.1 that answers HEAD with kAnnounced bytes and
// the object's SHA-256, and GET with kStreamed bytes: with a Content-Length
// that says so (`declare`), or delimited by closing the connection. While it
// streams it records the largest file it sees in `watch_dir`.
class HostileS3 {
 public:
  HostileS3(std::string sha256, bool declare, std::string watch_dir)
      : sha256_(std::move(sha256)), declare_(declare), watch_(std::move(watch_dir)) {
    listen_.reset(socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof(a);
    if (bind(listen_.get(), reinterpret_cast<sockaddr*>(&a), sizeof(a)) == 0 &&
        listen(listen_.get(), 8) == 0 &&
        getsockname(listen_.get(), reinterpret_cast<sockaddr*>(&a), &len) == 0) {
      port_ = ntohs(a.sin_port);
      thread_ = std::thread([this] { Serve(); });
    }
  }
  ~HostileS3() {
    stop_ = true;
    if (thread_.joinable()) thread_.join();
    for (auto& t : conversations_) t.join();
  }
  int port() const { return port_; }
  uint64_t sent() const { return sent_; }
  uint64_t largest_file_seen() const { return largest_; }

 private:
  void Serve() {
    while (!stop_) {
      pollfd p{listen_.get(), POLLIN, 0};
      if (poll(&p, 1, 100) <= 0) continue;
      // A thread per connection: curl may open a new one for the GET while
      // keeping the HEAD's.
      int c = accept4(listen_.get(), nullptr, nullptr, SOCK_CLOEXEC);
      if (c >= 0) {
        conversations_.emplace_back([this, c] {
          ScopedFd fd(c);
          Converse(fd.get());
        });
      }
    }
  }
  // Requests on one connection until it closes or a GET has been answered.
  void Converse(int fd) {
    std::string in;
    char buf[4096];
    while (!stop_) {
      size_t end;
      while ((end = in.find("\r\n\r\n")) == std::string::npos) {
        pollfd p{fd, POLLIN, 0};
        if (poll(&p, 1, 100) <= 0) {
          if (stop_) return;
          continue;
        }
        ssize_t n = read(fd, buf, sizeof buf);
        if (n <= 0) return;
        in.append(buf, static_cast<size_t>(n));
      }
      const bool head = in.rfind("HEAD ", 0) == 0;
      in.erase(0, end + 4);
      if (head) {
        Send(fd, fmt::format("HTTP/1.1 200 OK\r\nContent-Length: {}\r\nETag: \"e\"\r\n"
                             "x-amz-meta-sha256: {}\r\n\r\n",
                             kAnnounced, sha256_));
        continue;
      }
      Send(fd, declare_ ? fmt::format("HTTP/1.1 200 OK\r\nContent-Length: {}\r\n\r\n", kStreamed)
                        : std::string("HTTP/1.1 200 OK\r\nConnection: close\r\n\r\n"));
      const std::string chunk(64 << 10, 'x');
      while (!stop_ && sent_ < kStreamed && Send(fd, chunk)) {
        sent_ += chunk.size();
        Watch();
      }
      return;
    }
  }
  bool Send(int fd, const std::string& s) {
    for (size_t off = 0; off < s.size();) {
      ssize_t n = send(fd, s.data() + off, s.size() - off, MSG_NOSIGNAL);
      if (n <= 0) return false;
      off += static_cast<size_t>(n);
    }
    return true;
  }
  void Watch() {
    std::error_code ec;
    for (const auto& e : std::filesystem::directory_iterator(watch_, ec)) {
      struct stat st {};
      if (lstat(e.path().c_str(), &st) == 0) {
        largest_ = std::max<uint64_t>(largest_, static_cast<uint64_t>(st.st_size));
      }
    }
  }

  std::string sha256_;
  bool declare_;
  std::string watch_;
  ScopedFd listen_;
  int port_ = 0;
  std::thread thread_;
  std::vector<std::thread> conversations_;  // only Serve() adds, before the destructor joins
  std::atomic<bool> stop_{false};
  std::atomic<uint64_t> sent_{0};
  std::atomic<uint64_t> largest_{0};
};

// Fetches a record the index says has kAnnounced bytes from a HostileS3.
void FetchFromAServerThatStreamsTooMuch(bool declare) {
  TempDir tmp;
  const std::string cache_dir = tmp.path() + "/cache";
  const std::string object(kAnnounced, 'r');
  IndexRecord rec;
  rec.host_id = "host-a";
  rec.record_id = "20261125T101500Z-0a0b0c";
  rec.object_key = "host-a/2026/11/25/20261125T101500Z-0a0b0c.frec";
  rec.sha256 = Sha256Hex(object);
  rec.bytes = kAnnounced;
  auto cache = RecordCache::Open(cache_dir, 1ull << 30);
  ASSERT_TRUE(cache.ok()) << cache.status().ToString();
  HostileS3 server(rec.sha256, declare, cache_dir);
  ASSERT_NE(server.port(), 0);
  FleetConfig cfg;
  cfg.s3_endpoint = fmt::format("http://127.0.0.1:{}", server.port());
  cfg.s3_bucket = "b";
  cfg.s3_access_key = "ak";
  cfg.s3_secret_key = "sk";
  auto fetcher = S3ObjectFetcher::Create(cfg, cache->dir());
  ASSERT_TRUE(fetcher.ok()) << fetcher.status().ToString();

  auto got = cache->Get(rec, **fetcher);
  ASSERT_FALSE(got.ok());
  EXPECT_EQ(got.status().code(), StatusCode::kCorrupt) << got.status().ToString();
  EXPECT_NE(got.status().message().find(fmt::format("more than the {} bytes", kAnnounced)),
            std::string::npos)
      << got.status().message();
  EXPECT_NE(got.status().message().find(rec.object_key), std::string::npos);
  // Cut off at once: far less than the stream reached the server's socket,
  // and no file in the cache ever grew past the announced size.
  EXPECT_LT(server.sent(), 32ull << 20) << "the transfer was not aborted";
  EXPECT_LE(server.largest_file_seen(), kAnnounced + kSlack);
  for (const auto& e : std::filesystem::directory_iterator(cache_dir)) {
    ADD_FAILURE() << "left in the cache: " << e.path();
  }
}

TEST(FleetCacheTest, AFetchIsCutOffWhenTheServerStreamsMoreThanItAnnounced) {
  FetchFromAServerThatStreamsTooMuch(/*declare=*/false);
}

TEST(FleetCacheTest, AFetchIsRefusedWhenTheServerDeclaresMoreThanItAnnounced) {
  FetchFromAServerThatStreamsTooMuch(/*declare=*/true);
}

TEST(FleetCacheTest, ACacheDirectoryAnotherUserControlsIsRefused) {
  TempDir tmp;
  chmod(tmp.path().c_str(), 0755);
  const std::string dir = tmp.path() + "/cache";
  ASSERT_EQ(mkdir(dir.c_str(), 0777), 0);
  ASSERT_EQ(chmod(dir.c_str(), 0777), 0);
  ASSERT_EQ(chown(dir.c_str(), 65534, 65534), 0) << "needs root";
  auto cache = RecordCache::Open(dir, 1ull << 30);
  ASSERT_FALSE(cache.ok());
  EXPECT_EQ(cache.status().code(), StatusCode::kPermissionDenied);
  EXPECT_NE(cache.status().message().find("belongs to uid 65534"), std::string::npos)
      << cache.status().message();
  // Root's, but writable by everyone: as bad.
  ASSERT_EQ(chown(dir.c_str(), 0, 0), 0);
  cache = RecordCache::Open(dir, 1ull << 30);
  ASSERT_FALSE(cache.ok());
  EXPECT_NE(cache.status().message().find("writable by other users"), std::string::npos)
      << cache.status().message();
  // A directory above it that another user may write is refused too.
  ASSERT_EQ(chmod(dir.c_str(), 0700), 0);
  ASSERT_EQ(chmod(tmp.path().c_str(), 0777), 0);
  cache = RecordCache::Open(dir, 1ull << 30);
  ASSERT_FALSE(cache.ok());
  EXPECT_NE(cache.status().message().find(tmp.path() + " is writable by other users"),
            std::string::npos)
      << cache.status().message();
  ASSERT_EQ(chmod(tmp.path().c_str(), 0700), 0);
  EXPECT_TRUE(RecordCache::Open(dir, 1ull << 30).ok());
}

}  // namespace
}  // namespace flightrec::fleet
