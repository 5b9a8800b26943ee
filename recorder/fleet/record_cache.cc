#include "recorder/fleet/record_cache.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <filesystem>

#include <fmt/format.h>

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

}  // namespace

StatusOr<RecordCache> RecordCache::Open(const std::string& dir) {
  if (dir.empty()) return InvalidArgument("no cache directory ([Fleet] CacheDir=)");
  if (mkdir(dir.c_str(), 0700) != 0 && errno != EEXIST) {
    return ErrnoStatus("creating the record cache " + dir);
  }
  struct stat st {};
  if (lstat(dir.c_str(), &st) != 0 || !S_ISDIR(st.st_mode)) {
    return InvalidArgument("record cache " + dir + " is not a directory");
  }
  return RecordCache(dir);
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
  if (Check(path, rec).ok()) return path;
  // Missing, or damaged since: fetched again.
  if (unlink(path.c_str()) != 0 && errno != ENOENT) return ErrnoStatus("removing " + path);
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
  return path;
}

StatusOr<std::string> FetchRecord(FleetIndex& index, RecordCache& cache, ObjectFetcher& fetcher,
                                  const std::string& id) {
  ASSIGN_OR_RETURN(IndexRecord rec, index.GetRecord(id));
  return cache.Get(rec, fetcher);
}

}  // namespace flightrec::fleet
