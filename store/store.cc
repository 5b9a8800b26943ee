#include "store/store.h"

#include <dirent.h>
#include <fcntl.h>
#include <pwd.h>
#include <stdio.h>
#include <sys/file.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/utsname.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <ctime>
#include <fstream>
#include <set>

#include <fmt/format.h>

#include "common/units.h"

namespace flightrec::store {
namespace {

constexpr const char* kTmpPrefix = ".tmp-";
constexpr const char* kSuffix = ".frec";
constexpr const char* kIndexName = "index.sqlite";

bool HasSuffix(const std::string& s, const std::string& suf) {
  return s.size() >= suf.size() && s.compare(s.size() - suf.size(), suf.size(), suf) == 0;
}

// mkdir -p for the parents (0755), the last component with `mode`.
Status MakeDirs(const std::string& dir, mode_t mode) {
  std::string cur;
  size_t pos = 0;
  while (pos != std::string::npos) {
    pos = dir.find('/', pos + 1);
    cur = dir.substr(0, pos);
    if (cur.empty()) continue;
    bool last = pos == std::string::npos;
    if (mkdir(cur.c_str(), last ? mode : 0755) != 0 && errno != EEXIST) {
      return ErrnoStatus(fmt::format("cannot create store directory {}", cur));
    }
  }
  return OkStatus();
}

std::string ReadFirstLine(const char* path) {
  std::ifstream in(path);
  std::string line;
  std::getline(in, line);
  return line;
}

}  // namespace

std::string DefaultStoreDir() {
  if (const char* env = std::getenv("FLIGHTREC_STORE"); env != nullptr && *env != '\0') return env;
  if (geteuid() == 0) return "/var/lib/flightrec";
  if (const char* x = std::getenv("XDG_STATE_HOME"); x != nullptr && *x == '/') {
    return std::string(x) + "/flightrec";
  }
  const char* home = std::getenv("HOME");
  std::string h = home != nullptr ? home : "";
  if (h.empty()) {
    if (struct passwd* pw = getpwuid(geteuid()); pw != nullptr) h = pw->pw_dir;
  }
  return h + "/.local/state/flightrec";
}

std::string NewRecordId(int64_t wall_ns) {
  time_t secs = static_cast<time_t>(wall_ns / 1000000000);
  struct tm tm {};
  gmtime_r(&secs, &tm);
  uint8_t rnd[3] = {};
  if (getrandom(rnd, sizeof(rnd), 0) != sizeof(rnd)) {
    uint64_t x = static_cast<uint64_t>(wall_ns) ^ (static_cast<uint64_t>(getpid()) << 20);
    std::memcpy(rnd, &x, sizeof(rnd));
  }
  return fmt::format("{:04}{:02}{:02}T{:02}{:02}{:02}Z-{:02x}{:02x}{:02x}", tm.tm_year + 1900,
                     tm.tm_mon + 1, tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec, rnd[0], rnd[1],
                     rnd[2]);
}

PendingRecord::~PendingRecord() {
  if (!done_ && dirfd_ >= 0) unlinkat(dirfd_, tmp_name_.c_str(), 0);
}

StatusOr<std::unique_ptr<Store>> Store::Open(const std::string& dir, const StoreOptions& options) {
  if (dir.empty()) return InvalidArgument("empty store directory");
  std::unique_ptr<Store> s(new Store());
  s->dir_ = dir;
  s->options_ = options;
  if (options.create && !options.read_only) {
    RETURN_IF_ERROR(MakeDirs(dir, options.group_readable ? 0750 : 0700));
  }
  s->dirfd_.reset(open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
  if (!s->dirfd_) {
    if (errno == ENOENT) {
      return NotFound(fmt::format("store {} does not exist (no records yet?)", dir));
    }
    if (errno == ELOOP || errno == ENOTDIR) {
      return InvalidArgument(
          fmt::format("store {} is not a directory (symlinks are refused)", dir));
    }
    return ErrnoStatus(fmt::format("cannot open store {}", dir));
  }
  std::string index_path = dir + "/" + kIndexName;
  if (options.read_only && faccessat(s->dirfd_.get(), kIndexName, F_OK, 0) != 0) {
    return NotFound(fmt::format("store {} has no index yet (no records)", dir));
  }
  auto idx = Index::Open(index_path, options.read_only);
  if (!idx.ok()) return idx.status().Annotate(fmt::format("store {}", dir));
  s->index_ = std::move(*idx);
  if (!options.read_only) RETURN_IF_ERROR(s->Recover());
  return s;
}

Store::~Store() = default;

Status Store::Unlink(const std::string& name) {
  if (unlinkat(dirfd_.get(), name.c_str(), 0) != 0 && errno != ENOENT) {
    return ErrnoStatus(fmt::format("removing {}/{}", dir_, name));
  }
  return OkStatus();
}

Status Store::Recover() {
  int dup_fd = fcntl(dirfd_.get(), F_DUPFD_CLOEXEC, 0);
  if (dup_fd < 0) return ErrnoStatus("dup of store directory fd");
  DIR* d = fdopendir(dup_fd);
  if (d == nullptr) {
    close(dup_fd);
    return ErrnoStatus(fmt::format("listing store {}", dir_));
  }
  std::set<std::string> files;
  std::vector<std::string> temps;
  while (struct dirent* e = readdir(d)) {
    std::string name = e->d_name;
    if (name.rfind(kTmpPrefix, 0) == 0)
      temps.push_back(name);
    else if (HasSuffix(name, kSuffix))
      files.insert(name);
  }
  closedir(d);

  for (const auto& t : temps) {
    ScopedFd fd(openat(dirfd_.get(), t.c_str(), O_RDONLY | O_NOFOLLOW | O_CLOEXEC));
    if (!fd) continue;  // another process removed or renamed it meanwhile
    // A live writer holds LOCK_EX for the whole life of its temporary; if we
    // get the lock, its writer is dead and the file is garbage.
    if (flock(fd.get(), LOCK_EX | LOCK_NB) == 0) {
      RETURN_IF_ERROR(Unlink(t));
      ++recovery_.temporaries_removed;
    }
  }

  ASSIGN_OR_RETURN(auto rows, index_->List({}));
  std::set<std::string> indexed;
  for (const auto& r : rows) {
    indexed.insert(r.file);
    if (files.count(r.file) == 0 && r.state != "missing") {
      // Re-check: a concurrent vacuum may have deleted file and row together.
      if (faccessat(dirfd_.get(), r.file.c_str(), F_OK, AT_SYMLINK_NOFOLLOW) != 0) {
        RETURN_IF_ERROR(index_->SetState(r.id, "missing"));
        ++recovery_.marked_missing;
      }
    }
  }
  for (const auto& f : files) {
    if (indexed.count(f) != 0) continue;
    ScopedFd fd(openat(dirfd_.get(), f.c_str(), O_RDONLY | O_NOFOLLOW | O_CLOEXEC));
    if (!fd) continue;
    auto reader = RecordReader::OpenFd(std::move(fd), dir_ + "/" + f);
    if (!reader.ok()) {
      ++recovery_.unreadable;
      continue;
    }
    RETURN_IF_ERROR(index_->Upsert(RowFromReader(**reader, f)));
    ++recovery_.reindexed;
  }
  return OkStatus();
}

StatusOr<std::unique_ptr<PendingRecord>> Store::BeginRecord(const std::string& kind) {
  if (options_.read_only) return InvalidArgument("store opened read-only");
  std::unique_ptr<PendingRecord> p(new PendingRecord());
  int64_t now = WallClockNs();
  p->dirfd_ = dirfd_.get();
  mode_t mode = options_.group_readable ? 0640 : 0600;
  ScopedFd fd;
  for (int attempt = 0; attempt < 16 && !fd; ++attempt) {
    p->id_ = NewRecordId(now);
    p->tmp_name_ = kTmpPrefix + p->id_;
    fd.reset(openat(dirfd_.get(), p->tmp_name_.c_str(),
                    O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, mode));
    if (!fd) {
      if (errno == EEXIST) continue;
      return ErrnoStatus(fmt::format("creating a record in {}", dir_));
    }
    if (flock(fd.get(), LOCK_EX) != 0) {
      Status st = ErrnoStatus("locking the temporary record");
      unlinkat(dirfd_.get(), p->tmp_name_.c_str(), 0);
      return st;
    }
    // Between O_EXCL and flock another process's recovery may have taken the
    // lock on our fresh file, judged it abandoned and unlinked it. Holding the
    // lock now, check that the name is still ours; if not, start over.
    struct stat mine {
    }, named{};
    if (fstat(fd.get(), &mine) != 0 ||
        fstatat(dirfd_.get(), p->tmp_name_.c_str(), &named, AT_SYMLINK_NOFOLLOW) != 0 ||
        mine.st_ino != named.st_ino || mine.st_dev != named.st_dev) {
      fd.reset();
    }
  }
  if (!fd) return Internal("could not create a temporary record file (16 attempts)");
  RecordHeader h;
  h.id = p->id_;
  h.kind = kind;
  h.created_ns = now;
  struct utsname u {};
  if (uname(&u) == 0) {
    h.host = u.nodename;
    h.kernel = u.release;
  }
  h.boot_id = ReadFirstLine("/proc/sys/kernel/random/boot_id");
  auto w = RecordWriter::Create(std::move(fd), dir_ + "/" + p->tmp_name_, h, options_.writer);
  if (!w.ok()) return w.status();  // ~PendingRecord removes the temporary
  p->writer_ = std::move(*w);
  return p;
}

StatusOr<RecordRow> Store::Commit(std::unique_ptr<PendingRecord> rec, const nlohmann::json& meta) {
  if (options_.apply_retention_on_commit) {
    auto v = Vacuum(options_.retention);
    if (!v.ok()) return v.status().Annotate("applying retention before commit");
  }
  RETURN_IF_ERROR(rec->writer().Finish(meta));
  std::string final_name = rec->id() + kSuffix;
  // RENAME_NOREPLACE: an id collision must fail, never replace a committed
  // record.
  if (renameat2(dirfd_.get(), rec->tmp_name_.c_str(), dirfd_.get(), final_name.c_str(),
                RENAME_NOREPLACE) != 0) {
    return ErrnoStatus(fmt::format("committing record {} in {}", rec->id(), dir_));
  }
  rec->done_ = true;
  // The rename is durable only once the directory is.
  if (fsync(dirfd_.get()) != 0) return ErrnoStatus(fmt::format("fsync of store {}", dir_));
  ScopedFd fd(openat(dirfd_.get(), final_name.c_str(), O_RDONLY | O_NOFOLLOW | O_CLOEXEC));
  if (!fd) return ErrnoStatus(fmt::format("reopening committed record {}", rec->id()));
  ASSIGN_OR_RETURN(auto reader, RecordReader::OpenFd(std::move(fd), dir_ + "/" + final_name));
  RecordRow row = RowFromReader(*reader, final_name);
  Status st = index_->Upsert(row);
  if (!st.ok()) {
    // The file is complete and durable: the next Store::Open re-indexes it.
    return st.Annotate(
        fmt::format("record {} was stored but not indexed (it will be on the "
                    "next open)",
                    row.id));
  }
  if (options_.apply_retention_on_commit) {
    auto v = Vacuum(options_.retention, false, row.id);
    if (!v.ok()) return v.status().Annotate("applying retention after commit");
  }
  return row;
}

StatusOr<std::unique_ptr<RecordReader>> Store::OpenRecord(const std::string& ref) {
  ASSIGN_OR_RETURN(RecordRow row, index_->Resolve(ref));
  ScopedFd fd(openat(dirfd_.get(), row.file.c_str(), O_RDONLY | O_NOFOLLOW | O_CLOEXEC));
  if (!fd) {
    if (errno == ENOENT) {
      return NotFound(fmt::format("record {}: its file {}/{} is missing", row.id, dir_, row.file));
    }
    return ErrnoStatus(fmt::format("record {}: cannot open {}/{}", row.id, dir_, row.file));
  }
  return RecordReader::OpenFd(std::move(fd), dir_ + "/" + row.file);
}

StatusOr<std::vector<std::string>> Store::Verify(const std::optional<std::string>& id) {
  std::vector<RecordRow> rows;
  if (id) {
    ASSIGN_OR_RETURN(RecordRow r, index_->Resolve(*id));
    rows.push_back(r);
  } else {
    ASSIGN_OR_RETURN(rows, index_->List({}));
  }
  std::vector<std::string> problems;
  for (const auto& row : rows) {
    ScopedFd fd(openat(dirfd_.get(), row.file.c_str(), O_RDONLY | O_NOFOLLOW | O_CLOEXEC));
    if (!fd) {
      problems.push_back(fmt::format("{}: file {} is missing", row.id, row.file));
      if (!options_.read_only) (void)index_->SetState(row.id, "missing");
      continue;
    }
    auto reader = RecordReader::OpenFd(std::move(fd), dir_ + "/" + row.file);
    Status st = reader.ok() ? (*reader)->Verify() : reader.status();
    if (st.ok()) {
      RecordRow from_file = RowFromReader(**reader, row.file);
      if (from_file.id != row.id) {
        st = Corrupt(fmt::format("{}: the file says it is record {}", row.file, from_file.id));
      } else if (from_file.checksum != row.checksum) {
        st = Corrupt(fmt::format("{}: section checksums differ from the index", row.file));
      }
    }
    if (!st.ok()) {
      problems.push_back(fmt::format("{}: {}", row.id, st.message()));
      if (!options_.read_only) (void)index_->SetState(row.id, "corrupt");
    } else if (row.state != "ok" && !options_.read_only) {
      (void)index_->SetState(row.id, "ok");
    }
  }
  return problems;
}

StatusOr<RetentionLimits> Store::EffectiveLimits(const RetentionLimits& in) const {
  RetentionLimits out = in;
  struct statvfs vfs {};
  if (fstatvfs(dirfd_.get(), &vfs) != 0) return ErrnoStatus(fmt::format("statvfs {}", dir_));
  const uint64_t fs_size = static_cast<uint64_t>(vfs.f_blocks) * vfs.f_frsize;
  constexpr uint64_t kCap = 4ull << 30;  // systemd-coredump's 4 GiB caps
  if (!out.max_use) out.max_use = std::min<uint64_t>(fs_size / 10, kCap);
  if (!out.keep_free) out.keep_free = std::min<uint64_t>(fs_size * 15 / 100, kCap);
  return out;
}

StatusOr<uint64_t> Store::TotalBytes() {
  ASSIGN_OR_RETURN(auto rows, index_->List({}));
  uint64_t total = 0;
  for (const auto& r : rows) {
    if (r.state != "missing") total += r.file_size;
  }
  return total;
}

StatusOr<VacuumReport> Store::Vacuum(const RetentionLimits& limits, bool dry_run,
                                     const std::string& keep_id) {
  ASSIGN_OR_RETURN(RetentionLimits lim, EffectiveLimits(limits));
  ListQuery q;  // oldest first
  ASSIGN_OR_RETURN(auto rows, index_->List(q));
  struct statvfs vfs {};
  if (fstatvfs(dirfd_.get(), &vfs) != 0) return ErrnoStatus(fmt::format("statvfs {}", dir_));
  uint64_t free_bytes = static_cast<uint64_t>(vfs.f_bavail) * vfs.f_frsize;
  uint64_t total = 0;
  uint64_t count = 0;
  for (const auto& r : rows) {
    if (r.state == "missing") continue;
    total += r.file_size;
    ++count;
  }
  const int64_t now = WallClockNs();
  VacuumReport rep;
  std::set<std::string> gone;
  auto remove = [&](const RecordRow& r, const char* why) -> Status {
    if (!dry_run) {
      RETURN_IF_ERROR(Unlink(r.file));
      RETURN_IF_ERROR(index_->Delete(r.id));
    }
    gone.insert(r.id);
    rep.removed.push_back(r.id);
    rep.reasons.push_back(why);
    rep.bytes_freed += r.file_size;
    total -= std::min(total, r.file_size);
    free_bytes += r.file_size;
    --count;
    return OkStatus();
  };
  // The documented order (docs/FORMAT.md, "Retention"): age, count, max_use,
  // keep_free; within each, oldest first.
  for (const auto& r : rows) {
    if (r.state == "missing" || r.id == keep_id || !lim.max_age_ns) continue;
    if (now - r.created_ns > *lim.max_age_ns) RETURN_IF_ERROR(remove(r, "age"));
  }
  for (const auto& r : rows) {
    if (!lim.max_count || count <= *lim.max_count) break;
    if (r.state == "missing" || r.id == keep_id || gone.count(r.id)) continue;
    RETURN_IF_ERROR(remove(r, "count"));
  }
  for (const auto& r : rows) {
    if (total <= *lim.max_use) break;
    if (r.state == "missing" || r.id == keep_id || gone.count(r.id)) continue;
    RETURN_IF_ERROR(remove(r, "max_use"));
  }
  for (const auto& r : rows) {
    if (free_bytes >= *lim.keep_free) break;
    if (r.state == "missing" || r.id == keep_id || gone.count(r.id)) continue;
    RETURN_IF_ERROR(remove(r, "keep_free"));
  }
  return rep;
}

}  // namespace flightrec::store
