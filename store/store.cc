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
#include <cstring>
#include <ctime>
#include <fstream>
#include <functional>
#include <map>
#include <set>

#include <fmt/format.h>

#include "common/checked_json.h"
#include "common/regular_file.h"
#include "common/units.h"
#include "store/reconcile.h"

namespace flightrec::store {
namespace {

constexpr const char* kTmpPrefix = ".tmp-";
constexpr const char* kSuffix = ".frec";
constexpr const char* kIndexName = "index.sqlite";
constexpr const char* kQuarantineDir = "quarantine";

// File names in a store are chosen by whoever planted them: control bytes
// are shown as \xNN so that a log line cannot drive a terminal.
std::string EscapeForLog(const std::string& s) {
  std::string out;
  for (unsigned char c : s) {
    if (c < 0x20 || c == 0x7f)
      out += fmt::format("\\x{:02x}", c);
    else
      out += static_cast<char>(c);
  }
  return out;
}

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
  if (!done_ && tmpfd_ >= 0) unlinkat(tmpfd_, tmp_name_.c_str(), 0);
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
  if (!options.read_only) s->MakePrivate();
  auto idx = Index::Open(index_path, options.read_only);
  if (!idx.ok()) return idx.status().Annotate(fmt::format("store {}", dir));
  s->index_ = std::move(*idx);
  if (!options.read_only && !options.checkpoint_index_on_close) s->index_->SkipCheckpointOnClose();
  // sqlite creates -wal and -shm with the index's mode; older stores may
  // have them (and the index) world-readable: fixed on every open.
  if (!options.read_only) s->MakePrivate();
  if (!options.read_only) {
    RETURN_IF_ERROR(s->OpenTmpDir());
    RETURN_IF_ERROR(s->Reconcile());
  }
  return s;
}

Store::~Store() = default;

void Store::MakePrivate() {
  // The index holds every user's crash metadata (exe, argv-derived reasons):
  // root's only (or the group's, for a group-readable store). Users read
  // their own records through per-file ACLs, never through the index.
  const mode_t want = options_.group_readable ? 0640 : 0600;
  // Never open() the index's files here: SQLite locks them with POSIX
  // record locks, and closing *any* descriptor of a file drops every lock
  // this process holds on it (fcntl(2); sqlite.org/howtocorrupt.html 2.2):
  // another Store of this process would lose its locks, and other processes
  // would then reset the WAL index under it (SIGBUS, vanished rows). So: an
  // O_EXCL create only when the file does not exist yet, and chmod by name
  // (the store directory is writable by its owner only: no planted links).
  struct stat ist {};
  if (fstatat(dirfd_.get(), kIndexName, &ist, AT_SYMLINK_NOFOLLOW) != 0 && errno == ENOENT) {
    int fd =
        openat(dirfd_.get(), kIndexName, O_RDWR | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, want);
    if (fd >= 0) close(fd);  // nobody in this process can hold a lock on a new file
  }
  for (const char* name : {"index.sqlite", "index.sqlite-wal", "index.sqlite-shm"}) {
    struct stat st {};
    if (fstatat(dirfd_.get(), name, &st, AT_SYMLINK_NOFOLLOW) != 0 || !S_ISREG(st.st_mode)) {
      continue;
    }
    if (st.st_uid == geteuid() && (st.st_mode & 0777 & ~want) != 0) {
      if (fchmodat(dirfd_.get(), name, st.st_mode & want, 0) != 0) {
        std::fprintf(stderr, "flightrec store: cannot make %s/%s private: %s\n", dir_.c_str(), name,
                     std::strerror(errno));
      }
    }
  }
  // Nobody but the owner (and the group, if asked) may add or remove files in
  // the store, and others (and the group, unless asked) may not list it: the
  // names are every user's record ids. Others keep the search bit (`recorder coredump install`
  // makes a root store 0711): a user opens the records granted to them by ACL, found through
  // by-uid/<uid>/.
  const mode_t closed = options_.group_readable ? 0026 : 0066;
  struct stat st {};
  if (fstat(dirfd_.get(), &st) == 0 && st.st_uid == geteuid() && (st.st_mode & closed) != 0) {
    (void)fchmod(dirfd_.get(), st.st_mode & 07777 & ~closed);
  }
}

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

  // Temporaries here are from a flightrec before tmp/ (or planted).
  for (const auto& t : temps) {
    // O_NONBLOCK: a FIFO planted under that name must not hang the open.
    ScopedFd fd(openat(dirfd_.get(), t.c_str(), O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC));
    if (!fd) continue;  // another process removed or renamed it meanwhile
    // A live writer holds LOCK_EX for the whole life of its temporary; if we
    // get the lock, its writer is dead and the file is garbage.
    if (flock(fd.get(), LOCK_EX | LOCK_NB) == 0) {
      RETURN_IF_ERROR(Unlink(t));
      ++recovery_.temporaries_removed;
    } else {
      live_temps_ = true;  // it may die without changing the directory
    }
  }

  ListQuery every;
  every.with_meta = false;
  ASSIGN_OR_RETURN(auto rows, index_->List(every));
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
    ScopedFd fd = OpenRegularFileAt(dirfd_.get(), f, O_NOFOLLOW);
    if (!fd) {
      // A FIFO, socket or device named like a record is moved aside
      // unopened (opening a FIFO would wait for a writer for good).
      if (errno == EINVAL) {
        ++recovery_.unreadable;
        Quarantine(f, Corrupt(fmt::format("{}/{}: not a regular file", dir_, f)));
      }
      continue;  // gone meanwhile, or a symlink: never followed
    }
    auto reader = RecordReader::OpenFd(std::move(fd), dir_ + "/" + f);
    if (!reader.ok()) {
      ++recovery_.unreadable;
      // A damaged or hostile file is moved aside (never deleted: it may be
      // evidence) so that it costs nothing on later opens; a newer format
      // (kUnsupported) or an I/O error stays where it is.
      if (reader.status().code() == StatusCode::kCorrupt) Quarantine(f, reader.status());
      continue;
    }
    // The index is keyed by the header's id: a file claiming another
    // record's id would replace that record's row (and point it here).
    if ((*reader)->header().id + kSuffix != f) {
      ++recovery_.unreadable;
      Quarantine(f, Corrupt(fmt::format("{}/{}: its header says it is record '{}'", dir_, f,
                                        (*reader)->header().id)));
      continue;
    }
    RETURN_IF_ERROR(index_->Upsert(RowFromReader(**reader, f)));
    ++recovery_.reindexed;
  }
  RecoverGrants(files);
  return OkStatus();
}

void Store::Quarantine(const std::string& name, const Status& why) {
  std::string line;
  if (mkdirat(dirfd_.get(), kQuarantineDir, 0700) != 0 && errno != EEXIST) {
    line = fmt::format("cannot quarantine {}/{} ({}): mkdir {}: {}", dir_, name, why.message(),
                       kQuarantineDir, std::strerror(errno));
  } else {
    ScopedFd qfd(
        openat(dirfd_.get(), kQuarantineDir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
    std::string target = name;
    int rc = -1;
    for (int i = 1; qfd && i <= 100; ++i) {
      rc = renameat2(dirfd_.get(), name.c_str(), qfd.get(), target.c_str(), RENAME_NOREPLACE);
      if (rc == 0 || errno != EEXIST) break;
      target = fmt::format("{}.{}", name, i);
    }
    if (rc == 0) {
      line = fmt::format("quarantined {}/{} to {}/{}/{}: {}", dir_, name, dir_, kQuarantineDir,
                         target, why.message());
    } else {
      line = fmt::format("cannot quarantine {}/{} ({}): {}", dir_, name, why.message(),
                         std::strerror(errno));
    }
  }
  line = EscapeForLog(line);
  recovery_.quarantined.push_back(line);
  std::fprintf(stderr, "flightrec store: %s\n", line.c_str());
}

StatusOr<std::unique_ptr<PendingRecord>> Store::BeginRecord(const std::string& kind) {
  if (options_.read_only) return InvalidArgument("store opened read-only");
  std::unique_ptr<PendingRecord> p(new PendingRecord());
  int64_t now = WallClockNs();
  p->tmpfd_ = tmpfd_.get();
  mode_t mode = options_.group_readable ? 0640 : 0600;
  ScopedFd fd;
  for (int attempt = 0; attempt < 16 && !fd; ++attempt) {
    p->id_ = NewRecordId(now);
    p->tmp_name_ = kTmpPrefix + p->id_;
    fd.reset(openat(tmpfd_.get(), p->tmp_name_.c_str(),
                    O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, mode));
    if (!fd) {
      if (errno == EEXIST) continue;
      return ErrnoStatus(fmt::format("creating a record in {}", dir_));
    }
    if (flock(fd.get(), LOCK_EX) != 0) {
      Status st = ErrnoStatus("locking the temporary record");
      unlinkat(tmpfd_.get(), p->tmp_name_.c_str(), 0);
      return st;
    }
    // Between O_EXCL and flock another process's recovery may have taken the
    // lock on our fresh file, judged it abandoned and unlinked it. Holding the
    // lock now, check that the name is still ours; if not, start over.
    struct stat mine {
    }, named{};
    if (fstat(fd.get(), &mine) != 0 ||
        fstatat(tmpfd_.get(), p->tmp_name_.c_str(), &named, AT_SYMLINK_NOFOLLOW) != 0 ||
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
  auto w = RecordWriter::Create(std::move(fd), dir_ + "/tmp/" + p->tmp_name_, h, options_.writer);
  if (!w.ok()) return w.status();  // ~PendingRecord removes the temporary
  p->writer_ = std::move(*w);
  return p;
}

StatusOr<RecordRow> Store::Commit(std::unique_ptr<PendingRecord> rec, const nlohmann::json& meta_in,
                                  const CommitOptions& commit) {
  nlohmann::json meta = meta_in.is_object() ? meta_in : nlohmann::json::object();
  if (commit.owner_uid && !meta.contains("owner_uid")) meta["owner_uid"] = *commit.owner_uid;
  std::set<std::string> protect = commit.protect;
  protect.insert(rec->id());
  if (std::string h = json::Str(json::Object(meta, "crash"), "history"); !h.empty())
    protect.insert(h);
  if (options_.apply_retention_on_commit) {
    auto v = Vacuum(options_.retention, false, protect);
    if (!v.ok()) return v.status().Annotate("applying retention before commit");
    for (const auto& n : v->notes) meta["store_notes"].push_back(n);
  }
  RETURN_IF_ERROR(rec->writer().Finish(meta));
  std::string final_name = rec->id() + kSuffix;
  RecordRow row;
  {
    // The stamp of the last reconcile moves on with this rename only if
    // nobody else changed the directory since (store/reconcile.cc); a crash
    // before change.Commit() leaves the directory unlike the stamp, and the
    // next open walks it and indexes the file.
    DirChange change(*this);
    change.Before();
    // RENAME_NOREPLACE: an id collision must fail, never replace a committed
    // record.
    if (renameat2(tmpfd_.get(), rec->tmp_name_.c_str(), dirfd_.get(), final_name.c_str(),
                  RENAME_NOREPLACE) != 0) {
      return ErrnoStatus(fmt::format("committing record {} in {}", rec->id(), dir_));
    }
    change.Changed();
    rec->done_ = true;
    // The rename is durable only once the directory is.
    if (fsync(dirfd_.get()) != 0) return ErrnoStatus(fmt::format("fsync of store {}", dir_));
    ScopedFd fd = OpenRegularFileAt(dirfd_.get(), final_name, O_NOFOLLOW);
    if (!fd) return ErrnoStatus(fmt::format("reopening committed record {}", rec->id()));
    ASSIGN_OR_RETURN(auto reader, RecordReader::OpenFd(std::move(fd), dir_ + "/" + final_name));
    row = RowFromReader(*reader, final_name);
    Status st = index_->Upsert(row);
    if (!st.ok()) {
      // The file is complete and durable: the next Store::Open re-indexes it.
      return st.Annotate(
          fmt::format("record {} was stored but not indexed (it will be on the "
                      "next open)",
                      row.id));
    }
    change.Commit();
  }
  if (options_.apply_retention_on_commit) {
    auto v = Vacuum(options_.retention, false, protect);
    if (!v.ok()) return v.status().Annotate("applying retention after commit");
  }
  return row;
}

StatusOr<std::unique_ptr<RecordReader>> Store::OpenRecord(const std::string& ref) {
  ASSIGN_OR_RETURN(RecordRow row, index_->Resolve(ref));
  ScopedFd fd = OpenRegularFileAt(dirfd_.get(), row.file, O_NOFOLLOW);
  if (!fd) {
    if (errno == ENOENT) {
      return NotFound(fmt::format("record {}: its file {}/{} is missing", row.id, dir_, row.file));
    }
    if (errno == EINVAL) {
      return Corrupt(fmt::format("record {}: {}/{} is not a regular file", row.id, dir_, row.file));
    }
    return ErrnoStatus(fmt::format("record {}: cannot open {}/{}", row.id, dir_, row.file));
  }
  return RecordReader::OpenFd(std::move(fd), dir_ + "/" + row.file);
}

StatusOr<std::vector<std::string>> Store::Verify(const std::optional<std::string>& id) {
  ASSIGN_OR_RETURN(auto checks, Check(id));
  std::vector<std::string> problems;
  for (const auto& c : checks) {
    if (!c.error.empty()) problems.push_back(fmt::format("{}: {}", c.row.id, c.error));
  }
  return problems;
}

StatusOr<std::vector<Store::RecordCheck>> Store::Check(const std::optional<std::string>& id) {
  std::vector<RecordRow> rows;
  if (id) {
    ASSIGN_OR_RETURN(RecordRow r, index_->Resolve(*id));
    rows.push_back(r);
  } else {
    ASSIGN_OR_RETURN(rows, index_->List({}));
  }
  std::vector<RecordCheck> out;
  for (const auto& row : rows) {
    RecordCheck c{row, "", {}};
    ScopedFd fd = OpenRegularFileAt(dirfd_.get(), row.file, O_NOFOLLOW);
    if (!fd) {
      const bool other = errno == EINVAL;
      c.error = fmt::format("file {} is {}", row.file, other ? "not a regular file" : "missing");
      if (!options_.read_only && !other) (void)index_->SetState(row.id, "missing");
      out.push_back(std::move(c));
      continue;
    }
    auto reader = RecordReader::OpenFd(std::move(fd), dir_ + "/" + row.file);
    Status st = reader.status();
    if (reader.ok()) {
      // Every section, not only up to the first bad one: the report says
      // which parts of a damaged record are still good.
      for (const auto& sec : (*reader)->sections()) {
        Status ss = (*reader)->VerifySection(sec.name);
        c.sections.push_back({sec.name, sec.raw_size, sec.stored_size, ss.message()});
        if (st.ok() && !ss.ok()) st = ss;
      }
    }
    if (st.ok()) {
      RecordRow from_file = RowFromReader(**reader, row.file);
      if (from_file.id != row.id) {
        st = Corrupt(fmt::format("{}: the file says it is record {}", row.file, from_file.id));
      } else if (from_file.checksum != row.checksum) {
        st = Corrupt(fmt::format("{}: section checksums differ from the index", row.file));
      }
    }
    if (!st.ok()) {
      c.error = st.message();
      if (!options_.read_only) (void)index_->SetState(row.id, "corrupt");
    } else if (row.state != "ok" && !options_.read_only) {
      (void)index_->SetState(row.id, "ok");
    }
    out.push_back(std::move(c));
  }
  return out;
}

StatusOr<RetentionLimits> Store::EffectiveLimits(const RetentionLimits& in) const {
  RetentionLimits out = in;
  struct statvfs vfs {};
  if (fstatvfs(dirfd_.get(), &vfs) != 0) return ErrnoStatus(fmt::format("statvfs {}", dir_));
  const uint64_t fs_size = static_cast<uint64_t>(vfs.f_blocks) * vfs.f_frsize;
  constexpr uint64_t kCap = 4ull << 30;  // systemd-coredump's 4 GiB caps
  if (!out.max_use) out.max_use = std::min<uint64_t>(fs_size / 10, kCap);
  if (!out.keep_free) out.keep_free = std::min<uint64_t>(fs_size * 15 / 100, kCap);
  if (!out.max_unshipped_use) out.max_unshipped_use = *out.max_use;
  if (!out.max_unshipped_use_per_uid) out.max_unshipped_use_per_uid = *out.max_unshipped_use / 2;
  return out;
}

StatusOr<uint64_t> Store::TotalBytes() {
  ASSIGN_OR_RETURN(auto usage, index_->Usage());
  uint64_t total = 0;
  for (const auto& u : usage) total += u.bytes;
  return total;
}

// Fleet mode (recorder/fleet/shipper.h): while `fleet/journal` exists in the
// store, a record may be removed only once that journal confirms it was
// uploaded, so retention never deletes what the fleet has not got. nullopt:
// no journal, fleet mode off. The journal's lines are "<id> <sha256> ...";
// a torn last line (a crash mid-append) confirms nothing.
static StatusOr<std::optional<std::set<std::string>>> FleetConfirmed(int dirfd,
                                                                     const std::string& dir) {
  ScopedFd fd = OpenRegularFileAt(dirfd, "fleet/journal", O_NOFOLLOW);
  if (!fd) {
    if (errno == ENOENT) return std::optional<std::set<std::string>>();
    return ErrnoStatus(fmt::format("{}/fleet/journal", dir));
  }
  std::set<std::string> ids;
  std::string text, chunk(1 << 16, '\0');
  for (;;) {
    ssize_t n = read(fd.get(), chunk.data(), chunk.size());
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return ErrnoStatus(fmt::format("{}/fleet/journal", dir));
    if (n == 0) break;
    text.append(chunk.data(), static_cast<size_t>(n));
    size_t pos = 0, nl;
    while ((nl = text.find('\n', pos)) != std::string::npos) {
      ids.insert(text.substr(pos, std::min(text.find(' ', pos), nl) - pos));
      pos = nl + 1;
    }
    text.erase(0, pos);
  }
  return std::optional<std::set<std::string>>(std::move(ids));
}

namespace {

constexpr const char* kEvictedFile = "fleet/evicted";  // "<records> <bytes>\n"

// Fleet mode's bound on what the shipper has not confirmed yet: the oldest
// unshipped record of an owner over `max_unshipped_use_per_uid` goes first,
// then, while the total is over `max_unshipped_use`, the oldest of the owner
// with the most. Records in `protect` (the one being committed, its history)
// stay and count.
Status EvictUnshipped(const std::vector<RecordRow>& rows, const std::set<std::string>& shipped,
                      const std::set<std::string>& protect, const std::set<std::string>& gone,
                      const RetentionLimits& lim,
                      const std::function<Status(const RecordRow&, const char*)>& evict) {
  std::map<uint32_t, uint64_t> use;
  std::map<uint32_t, std::vector<const RecordRow*>> evictable;  // oldest first
  std::map<uint32_t, size_t> next;
  uint64_t total = 0;
  for (const auto& r : rows) {
    if (gone.count(r.id) || shipped.count(r.id)) continue;
    use[r.owner_uid] += r.file_size;
    total += r.file_size;
    if (!protect.count(r.id)) evictable[r.owner_uid].push_back(&r);
  }
  auto can_evict = [&](uint32_t uid) { return next[uid] < evictable[uid].size(); };
  auto evict_oldest = [&](uint32_t uid, const char* why) -> Status {
    const RecordRow& r = *evictable[uid][next[uid]++];
    RETURN_IF_ERROR(evict(r, why));
    use[uid] -= std::min(use[uid], r.file_size);
    total -= std::min(total, r.file_size);
    return OkStatus();
  };
  for (auto& [uid, bytes] : use) {
    while (bytes > *lim.max_unshipped_use_per_uid && can_evict(uid)) {
      RETURN_IF_ERROR(evict_oldest(uid, "unshipped_per_uid"));
    }
  }
  while (total > *lim.max_unshipped_use) {
    std::optional<uint32_t> heaviest;
    for (const auto& [uid, bytes] : use) {
      if (can_evict(uid) && (!heaviest || bytes > use[*heaviest])) heaviest = uid;
    }
    if (!heaviest) break;
    RETURN_IF_ERROR(evict_oldest(*heaviest, "unshipped"));
  }
  return OkStatus();
}

// Adds to the counts in fleet/evicted, under its lock (several writers may
// vacuum at once).
Status AddUnshippedEvictions(int dirfd, const std::string& dir, const UnshippedEvictions& add) {
  ScopedFd fd(openat(dirfd, kEvictedFile, O_RDWR | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0600));
  if (!fd || flock(fd.get(), LOCK_EX) != 0) return ErrnoStatus(dir + "/" + kEvictedFile);
  char buf[64] = {};
  unsigned long long records = 0, bytes = 0;
  if (pread(fd.get(), buf, sizeof(buf) - 1, 0) > 0) std::sscanf(buf, "%llu %llu", &records, &bytes);
  std::string line = fmt::format("{} {}\n", records + add.records, bytes + add.bytes);
  if (pwrite(fd.get(), line.data(), line.size(), 0) != static_cast<ssize_t>(line.size()) ||
      ftruncate(fd.get(), static_cast<off_t>(line.size())) != 0) {
    return ErrnoStatus(dir + "/" + kEvictedFile);
  }
  return OkStatus();
}

}  // namespace

StatusOr<UnshippedEvictions> ReadUnshippedEvictions(const std::string& store_dir) {
  const std::string path = store_dir + "/" + kEvictedFile;
  ScopedFd fd(open(path.c_str(), O_RDONLY | O_NOFOLLOW | O_CLOEXEC));
  if (!fd) {
    if (errno == ENOENT) return UnshippedEvictions{};
    return ErrnoStatus(path);
  }
  if (flock(fd.get(), LOCK_SH) != 0) return ErrnoStatus(path);
  char buf[64] = {};
  unsigned long long records = 0, bytes = 0;
  if (pread(fd.get(), buf, sizeof(buf) - 1, 0) > 0) std::sscanf(buf, "%llu %llu", &records, &bytes);
  return UnshippedEvictions{records, bytes};
}

Status Store::EvictUnshippedRecords(const std::vector<RecordRow>& rows,
                                    const std::set<std::string>& shipped,
                                    const std::set<std::string>& protect,
                                    const std::set<std::string>& gone, const RetentionLimits& lim,
                                    bool dry_run, const RemoveFn& remove) {
  UnshippedEvictions evicted;
  auto evict = [&](const RecordRow& r, const char* why) -> Status {
    RETURN_IF_ERROR(remove(r, why));
    const bool per_uid = std::strcmp(why, "unshipped_per_uid") == 0;
    std::string note = fmt::format(
        "retention: removed record {} of uid {} ({}) before the fleet confirmed it: unshipped "
        "records {} {} (the fleet endpoint is not taking them)",
        r.id, r.owner_uid, FormatBytes(r.file_size),
        per_uid ? fmt::format("of uid {} exceed", r.owner_uid) : std::string("exceed"),
        FormatBytes(per_uid ? *lim.max_unshipped_use_per_uid : *lim.max_unshipped_use));
    // Logged only: the notes of a vacuum end up in the meta of the record
    // being committed, which its crashed user may read, and this names
    // another user's record.
    if (!dry_run) std::fprintf(stderr, "flightrec store: %s\n", note.c_str());
    ++evicted.records;
    evicted.bytes += r.file_size;
    return OkStatus();
  };
  RETURN_IF_ERROR(EvictUnshipped(rows, shipped, protect, gone, lim, evict));
  if (dry_run || evicted.records == 0) return OkStatus();
  return AddUnshippedEvictions(dirfd_.get(), dir_, evicted);
}

StatusOr<VacuumReport> Store::Vacuum(const RetentionLimits& limits, bool dry_run,
                                     const std::string& keep_id) {
  std::set<std::string> protect;
  if (!keep_id.empty()) protect.insert(keep_id);
  return Vacuum(limits, dry_run, protect);
}

StatusOr<VacuumReport> Store::Vacuum(const RetentionLimits& limits, bool dry_run,
                                     const std::set<std::string>& protect) {
  ASSIGN_OR_RETURN(RetentionLimits lim, EffectiveLimits(limits));
  struct statvfs vfs {};
  if (fstatvfs(dirfd_.get(), &vfs) != 0) return ErrnoStatus(fmt::format("statvfs {}", dir_));
  uint64_t free_bytes = static_cast<uint64_t>(vfs.f_bavail) * vfs.f_frsize;
  // The totals first, from one aggregate query: on most commits no limit
  // is reached and no row needs reading (each commit used to read and parse
  // every row, so a store of 100 000 records cost ~1 s per commit).
  ASSIGN_OR_RETURN(auto usage, index_->Usage());
  uint64_t total = 0, count = 0;
  int64_t oldest = INT64_MAX;
  std::map<uint32_t, uint64_t> bytes_by_uid, count_by_uid;
  for (const auto& u : usage) {
    total += u.bytes;
    count += u.count;
    bytes_by_uid[u.owner_uid] += u.bytes;
    count_by_uid[u.owner_uid] += u.count;
    oldest = std::min(oldest, u.oldest_created_ns);
  }
  const int64_t now = WallClockNs();
  VacuumReport rep;
  // Fleet mode: unshipped records are at most every record.
  const bool fleet = faccessat(dirfd_.get(), "fleet/journal", F_OK, AT_SYMLINK_NOFOLLOW) == 0;
  const bool unshipped_over =
      fleet && (total > *lim.max_unshipped_use ||
                std::any_of(bytes_by_uid.begin(), bytes_by_uid.end(), [&](const auto& u) {
                  return u.second > *lim.max_unshipped_use_per_uid;
                }));
  const bool over = (lim.max_age_ns && count > 0 && now - oldest > *lim.max_age_ns) ||
                    (lim.max_count && count > *lim.max_count) || total > *lim.max_use ||
                    free_bytes < *lim.keep_free || unshipped_over;
  if (!over) return rep;
  ListQuery q;  // oldest first, without meta: retention needs sizes and owners
  q.with_meta = false;
  ASSIGN_OR_RETURN(auto all_rows, index_->List(q));
  std::vector<RecordRow> rows;
  for (auto& r : all_rows) {
    if (r.state != "missing") rows.push_back(std::move(r));
  }
  // Each owner's rows, oldest first, with a cursor past those already
  // removed or not removable: choosing a victim costs O(owners), not a walk
  // of every row (which made removing k records O(k * rows)).
  std::map<uint32_t, std::vector<size_t>> by_owner;
  for (size_t i = 0; i < rows.size(); ++i) by_owner[rows[i].owner_uid].push_back(i);
  std::map<uint32_t, size_t> cursor;
  std::set<std::string> gone;
  ASSIGN_OR_RETURN(auto shipped, FleetConfirmed(dirfd_.get(), dir_));
  auto removable = [&](const RecordRow& r) {
    return !protect.count(r.id) && !gone.count(r.id) && (!shipped || shipped->count(r.id));
  };
  // The removals move the reconcile stamp on (store/reconcile.cc) once all
  // are done; an error return leaves it behind, and the next open walks.
  std::optional<DirChange> change;
  if (!dry_run) change.emplace(*this);
  auto remove = [&](const RecordRow& r, const char* why) -> Status {
    if (!dry_run) {
      change->Before();
      RETURN_IF_ERROR(Unlink(r.file));
      RemoveGrants(r.file);
      change->Changed();
      RETURN_IF_ERROR(index_->Delete(r.id));
    }
    gone.insert(r.id);
    rep.removed.push_back(r.id);
    rep.reasons.push_back(why);
    rep.bytes_freed += r.file_size;
    total -= std::min(total, r.file_size);
    free_bytes += r.file_size;
    bytes_by_uid[r.owner_uid] -= std::min(bytes_by_uid[r.owner_uid], r.file_size);
    --count_by_uid[r.owner_uid];
    --count;
    return OkStatus();
  };
  // Like systemd-coredump's vacuum: space is reclaimed from the uid that
  // uses the most (by `usage`), its oldest removable record first, so one
  // user's crashes cannot push out another user's (or root's). Returns
  // nullptr when nothing removable is left.
  auto next_victim = [&](const std::map<uint32_t, uint64_t>& use_by) -> const RecordRow* {
    const RecordRow* best = nullptr;
    uint64_t best_use = 0;
    for (const auto& [uid, idx] : by_owner) {
      size_t& c = cursor[uid];
      // Not removable now is not removable later in this vacuum: skipping
      // for good keeps the walk linear overall.
      while (c < idx.size() && !removable(rows[idx[c]])) ++c;
      if (c == idx.size()) continue;
      uint64_t use = use_by.count(uid) ? use_by.at(uid) : 0;
      if (best == nullptr || use > best_use) best = &rows[idx[c]], best_use = use;
    }
    return best;
  };
  // The documented order (docs/FORMAT.md, "Retention"): age, count, max_use,
  // keep_free. Age removes every old record; the others take from the
  // heaviest user first.
  for (const auto& r : rows) {
    if (!removable(r) || !lim.max_age_ns) continue;
    if (now - r.created_ns > *lim.max_age_ns) RETURN_IF_ERROR(remove(r, "age"));
  }
  while (lim.max_count && count > *lim.max_count) {
    const RecordRow* v = next_victim(count_by_uid);
    if (v == nullptr) break;
    RETURN_IF_ERROR(remove(*v, "count"));
  }
  while (total > *lim.max_use) {
    const RecordRow* v = next_victim(bytes_by_uid);
    if (v == nullptr) break;
    RETURN_IF_ERROR(remove(*v, "max_use"));
  }
  if (shipped) {
    RETURN_IF_ERROR(EvictUnshippedRecords(rows, *shipped, protect, gone, lim, dry_run, remove));
  }
  if (free_bytes < *lim.keep_free) {
    uint64_t reclaimable = 0;
    for (const auto& r : rows) {
      if (removable(r)) reclaimable += r.file_size;
    }
    if (free_bytes + reclaimable < *lim.keep_free) {
      // The space is used by files that are not ours: deleting every record
      // would not meet keep-free, so delete none (systemd-coredump refuses
      // to store instead of wiping its directory).
      rep.refused = true;
      rep.notes.push_back(fmt::format(
          "retention: keep-free {} cannot be met: {} free on the filesystem of {}, and removing "
          "every removable record would free only {}; nothing was removed for keep-free",
          FormatBytes(*lim.keep_free), FormatBytes(free_bytes), dir_, FormatBytes(reclaimable)));
    } else {
      while (free_bytes < *lim.keep_free) {
        const RecordRow* v = next_victim(bytes_by_uid);
        if (v == nullptr) break;
        RETURN_IF_ERROR(remove(*v, "keep_free"));
      }
    }
  }
  if (change) change->Commit();
  return rep;
}

}  // namespace flightrec::store
