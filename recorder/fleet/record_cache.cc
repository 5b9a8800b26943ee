#include "recorder/fleet/record_cache.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <ctime>
#include <filesystem>
#include <vector>

#include <fmt/format.h>

#include "common/private_dir.h"
#include "common/scoped_fd.h"
#include "recorder/fleet/digest_pg.h"

namespace flightrec::fleet {
namespace {

// The file's size and SHA-256 against the index's (ok), or why not.
Status Check(const std::string& path, const IndexRecord& rec) {
  struct stat st {};
  if (lstat(path.c_str(), &st) != 0) return ErrnoStatus("stat " + path);
  if (!S_ISREG(st.st_mode)) return Corrupt(path + " is not a regular file");
  if (static_cast<uint64_t>(st.st_size) != rec.bytes) {
    return Corrupt(fmt::format("{} bytes where the index says {}", st.st_size, rec.bytes));
  }
  ASSIGN_OR_RETURN(std::string sum, Sha256FileHex(path));
  if (sum != rec.sha256) {
    return Corrupt(fmt::format("SHA-256 {} where the index says {}", sum, rec.sha256));
  }
  return OkStatus();
}

// Marks a cached file as used now. The kernel's own timestamps tick by the
// jiffy, too coarse to order fetches and hits a few milliseconds apart.
void MarkUsed(const std::string& path) {
  struct timespec now[2];
  clock_gettime(CLOCK_REALTIME, &now[0]);
  now[1] = now[0];
  (void)utimensat(AT_FDCWD, path.c_str(), now, AT_SYMLINK_NOFOLLOW);
}

}  // namespace

StatusOr<RecordCache> RecordCache::Open(const std::string& dir, uint64_t max_bytes) {
  if (dir.empty()) return InvalidArgument("no cache directory ([Fleet] CacheDir=)");
  std::error_code ec;
  std::string abs = std::filesystem::absolute(dir, ec).lexically_normal().string();
  if (ec) return InvalidArgument("record cache " + dir + ": " + ec.message());
  RETURN_IF_ERROR(CheckPrivateDir(abs, "record cache"));
  return RecordCache(abs, max_bytes);
}

Status RecordCache::MakeRoom(uint64_t incoming) {
  if (incoming > max_bytes_) {
    return Status(StatusCode::kNoSpace,
                  fmt::format("{} bytes do not fit the record cache {} (at most {} bytes: "
                              "[Fleet] CacheMaxUse=)",
                              incoming, dir_, max_bytes_));
  }
  struct Entry {
    int64_t used_ns;
    uint64_t bytes;
    std::string path;
  };
  std::vector<Entry> cached;
  uint64_t total = 0;
  std::error_code ec;
  for (const auto& e : std::filesystem::directory_iterator(dir_, ec)) {
    struct stat st {};
    std::string p = e.path().string();
    if (lstat(p.c_str(), &st) != 0 || !S_ISREG(st.st_mode)) continue;
    total += static_cast<uint64_t>(st.st_size);
    if (e.path().extension() == ".frec" && e.path().filename().string()[0] != '.') {
      cached.push_back({st.st_mtim.tv_sec * 1'000'000'000LL + st.st_mtim.tv_nsec,
                        static_cast<uint64_t>(st.st_size), p});
    }
  }
  if (ec) return Internal("listing " + dir_ + ": " + ec.message());
  std::sort(cached.begin(), cached.end(),
            [](const Entry& a, const Entry& b) { return a.used_ns < b.used_ns; });
  for (const auto& c : cached) {
    if (total + incoming <= max_bytes_) break;
    if (unlink(c.path.c_str()) != 0 && errno != ENOENT) return ErrnoStatus("removing " + c.path);
    total -= std::min(total, c.bytes);
  }
  return OkStatus();
}

StatusOr<std::string> RecordCache::PathFor(const IndexRecord& rec) const {
  // The id is checked to be of the store's form (no '/', no ".."); the
  // checksum in the name keeps two hosts' records of one id apart.
  RETURN_IF_ERROR(RecordIdTimeS(rec.record_id).status());
  if (rec.sha256.size() != 64) return InvalidArgument("record without a SHA-256");
  return fmt::format("{}/{}-{}.frec", dir_, rec.record_id, rec.sha256.substr(0, 16));
}

StatusOr<std::string> RecordCache::Get(const IndexRecord& rec, ObjectFetcher& fetcher) {
  ASSIGN_OR_RETURN(std::string path, PathFor(rec));
  const std::string what = fmt::format("record {}/{}", rec.host_id, rec.record_id);
  if (Check(path, rec).ok()) {
    MarkUsed(path);
    return path;
  }
  // Missing, or damaged since: fetched again.
  if (unlink(path.c_str()) != 0 && errno != ENOENT) return ErrnoStatus("removing " + path);
  RETURN_IF_ERROR(MakeRoom(rec.bytes).Annotate("fetching " + what));
  std::string tmp = fmt::format("{}/.tmp-{}-XXXXXX", dir_, rec.record_id);
  ScopedFd fd(mkostemp(tmp.data(), O_CLOEXEC));
  if (!fd) return ErrnoStatus("creating a file in " + dir_);
  Status st = fetcher.Fetch(rec.object_key, fd.get(), rec.bytes);
  if (st.ok() && fsync(fd.get()) != 0) st = ErrnoStatus("fsync " + tmp);
  fd.reset();
  if (st.ok()) {
    st = Check(tmp, rec);
    if (!st.ok()) {
      st = Corrupt(
          fmt::format("{} from object storage (key {}): {}", what, rec.object_key, st.message()));
    }
  } else {
    st = st.Annotate(fmt::format("fetching {} (key {})", what, rec.object_key));
  }
  if (st.ok() && rename(tmp.c_str(), path.c_str()) != 0) st = ErrnoStatus("renaming " + tmp);
  if (!st.ok()) {
    unlink(tmp.c_str());
    return st;
  }
  MarkUsed(path);
  return path;
}

StatusOr<std::string> FetchRecord(FleetIndex& index, RecordCache& cache, ObjectFetcher& fetcher,
                                  const std::string& id) {
  ASSIGN_OR_RETURN(IndexRecord rec, index.GetRecord(id));
  return cache.Get(rec, fetcher);
}

}  // namespace flightrec::fleet
