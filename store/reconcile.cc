// When Store::Open walks the store directory (docs/FORMAT.md, "Commit and
// recovery").
//
// Recovery compares the directory with every index row: linear in the
// records (0.45 s at 100 000), and every CLI command and the hook open the
// store writable. So the index keeps a stamp (table `reconciled`): the
// store directory's and by-uid/'s directories' stat (dev, ino, mode, owner,
// links, size, mtime, ctime) as the last full walk, or the store's own
// changes since, left them. An open whose directories still match skips
// the walk; any other change to an entry (a file planted, removed or renamed
// by anyone else, a writer killed between its rename and its index row)
// changes an mtime, and the next open walks.
//
// Coarse timestamps: Linux 6.1 stamps a change with the clock of the last
// tick (multigrain ctime only came in 6.13), so a change by someone else in
// the same tick as the store's own would leave the same mtime and ctime, and
// the stamp taken after our change would hide it for good. Hence the marks:
// after each of its changes (and before a walk) the store sets each
// directory's mtime to a nonce, its current mtime minus 1 ns. Every later
// change to an entry sets the mtime to the current (coarse) time, which is
// at least the mtime we read, so never the nonce: a file planted right after
// our commit, in the same tick, is found by the next open. (Waiting out a
// tick cannot do this: a change later in the same tick is invisible to any
// stat.) What stays open is the interval between the check that the
// directory still matches the stamp and the mark, i.e. one rename or unlink
// of the store's own: a change by someone else inside it is found by the
// next full walk, which recorderd's start and `recorder verify` always do,
// and any open does when the last one is more than kFullEvery old.
//
// Temporaries live in tmp/, listed on every open: a writer that dies leaves
// its temporary without changing the store directory, so the stamp could not
// tell. A walk that finds a live writer's temporary in the store directory
// itself (written by a flightrec from before tmp/) stamps nothing.
//
// The stamp is written under flock(LOCK_EX) on the store directory, which
// the store's changes (commit, retention, grants, the walk) also hold: the
// check, the change, the mark and the stamp of one writer are not
// interleaved with another's. The lock is always taken before any sqlite
// transaction, never inside one, so the two cannot deadlock.
#include <dirent.h>
#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <vector>

#include <fmt/format.h>
#include <xxhash.h>

#include "common/units.h"
#include "store/reconcile.h"

namespace flightrec::store {
namespace {

constexpr const char* kTmpDir = "tmp";
constexpr const char* kByUid = "by-uid";
// A change by someone else in the same instant as one of the store's own is
// found by the next full walk; an open does one when the last is older.
constexpr int64_t kFullEvery = 3600LL * 1000000000LL;
// The lock is held for one change (or one walk, < 1 s at 100 000 records).
constexpr int kLockWaitMs = 10000;

int64_t Ns(const struct timespec& t) { return t.tv_sec * 1000000000LL + t.tv_nsec; }

std::string StatString(const struct stat& st) {
  return fmt::format("{}:{}:{:o}:{}:{}:{}:{}:{}", st.st_dev, st.st_ino, st.st_mode, st.st_uid,
                     st.st_nlink, st.st_size, Ns(st.st_mtim), Ns(st.st_ctim));
}

// ListDir, with nothing for a directory that cannot be listed: the walk
// then finds nothing to remove there.
std::vector<std::string> Names(int fd) {
  auto names = ListDir(fd, "a store directory");
  return names.ok() ? std::move(*names) : std::vector<std::string>{};
}

// Sets the mtime of `name` in `parent` (a directory the store made) to 1 ns
// before its current one: no later change to its entries can give it that.
void Mark(int parent, const char* name) {
  struct stat st {};
  if (fstatat(parent, name, &st, AT_SYMLINK_NOFOLLOW) != 0 || !S_ISDIR(st.st_mode) ||
      st.st_uid != geteuid()) {
    return;
  }
  int64_t nonce = Ns(st.st_mtim) - 1;
  struct timespec times[2] = {{0, UTIME_OMIT}, {nonce / 1000000000LL, nonce % 1000000000LL}};
  if (nonce < 0) times[1] = {0, 0};
  (void)utimensat(parent, name, times, AT_SYMLINK_NOFOLLOW);
}

}  // namespace

StatusOr<std::vector<std::string>> ListDir(int fd, const std::string& display) {
  int dup_fd = fcntl(fd, F_DUPFD_CLOEXEC, 0);
  if (dup_fd < 0) return ErrnoStatus("dup of " + display);
  DIR* d = fdopendir(dup_fd);
  if (d == nullptr) {
    close(dup_fd);
    return ErrnoStatus("listing " + display);
  }
  // fdopendir shares the file offset with fd's other duplicates.
  rewinddir(d);
  std::vector<std::string> names;
  while (struct dirent* e = readdir(d)) {
    std::string n = e->d_name;
    if (n != "." && n != "..") names.push_back(std::move(n));
  }
  closedir(d);
  std::sort(names.begin(), names.end());
  return names;
}

bool Store::LockDir() {
  for (int waited = 0;; ++waited) {
    if (flock(dirfd_.get(), LOCK_EX | LOCK_NB) == 0) return locked_ = true;
    if (errno != EWOULDBLOCK && errno != EINTR) return false;
    if (waited >= kLockWaitMs) return false;
    struct timespec ms = {0, 1000000};
    nanosleep(&ms, nullptr);
  }
}

void Store::UnlockDir() {
  flock(dirfd_.get(), LOCK_UN);
  locked_ = false;
}

StatusOr<std::string> Store::DirStamp() {
  struct stat st {};
  if (fstat(dirfd_.get(), &st) != 0) return ErrnoStatus(fmt::format("stat of {}", dir_));
  std::string out = StatString(st);
  // by-uid/ and each by-uid/<uid>/ (their number is the number of users
  // granted something, not of records), folded into one hash.
  std::string grants;
  ScopedFd byuid(openat(dirfd_.get(), kByUid, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
  if (byuid && fstat(byuid.get(), &st) == 0) {
    grants = StatString(st);
    for (const auto& n : Names(byuid.get())) {
      if (fstatat(byuid.get(), n.c_str(), &st, AT_SYMLINK_NOFOLLOW) == 0) {
        grants += fmt::format("|{}={}", n, StatString(st));
      }
    }
  } else {
    grants = "none";
  }
  return fmt::format("{} by-uid:{:016x}", out, XXH3_64bits(grants.data(), grants.size()));
}

void Store::MarkDirs() {
  Mark(dirfd_.get(), ".");
  ScopedFd byuid(openat(dirfd_.get(), kByUid, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
  if (!byuid) return;
  Mark(dirfd_.get(), kByUid);
  for (const auto& n : Names(byuid.get())) Mark(byuid.get(), n.c_str());
}

Status Store::OpenTmpDir() {
  // tmp/ belongs to whoever owns the store directory: root opening a user's
  // store (`recorder list` as root on a store `recorder record` made) must
  // neither be refused nor leave a root-owned tmp/ the user cannot write.
  struct stat store_st {};
  if (fstat(dirfd_.get(), &store_st) != 0) return ErrnoStatus(fmt::format("stat of {}", dir_));
  const bool made = mkdirat(dirfd_.get(), kTmpDir, 0700) == 0;
  if (!made && errno != EEXIST) return ErrnoStatus(fmt::format("creating {}/{}", dir_, kTmpDir));
  tmpfd_.reset(openat(dirfd_.get(), kTmpDir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
  if (!tmpfd_) return ErrnoStatus(fmt::format("opening {}/{}", dir_, kTmpDir));
  // Through the fd, not the name: the directory's owner could swap the name.
  if (made && store_st.st_uid != geteuid() &&
      fchown(tmpfd_.get(), store_st.st_uid, store_st.st_gid) != 0) {
    return ErrnoStatus(fmt::format("giving {}/{} to the store's owner", dir_, kTmpDir));
  }
  struct stat st {};
  if (fstat(tmpfd_.get(), &st) != 0) return ErrnoStatus(fmt::format("stat of {}/tmp", dir_));
  if (st.st_uid != store_st.st_uid || (st.st_mode & 0077) != 0) {
    tmpfd_.reset();
    return InvalidArgument(fmt::format(
        "{}/{} is not owned by the store's owner or is open to others (refused)", dir_, kTmpDir));
  }
  return OkStatus();
}

Status Store::Reconcile() {
  // Dead writers' temporaries: tmp/ holds only the writes in progress.
  for (const auto& t : Names(tmpfd_.get())) {
    ScopedFd fd(openat(tmpfd_.get(), t.c_str(), O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC));
    struct stat st {};
    if (!fd || fstat(fd.get(), &st) != 0 || !S_ISREG(st.st_mode)) continue;
    // A live writer holds LOCK_EX for the whole life of its temporary.
    if (flock(fd.get(), LOCK_EX | LOCK_NB) == 0) {
      if (unlinkat(tmpfd_.get(), t.c_str(), 0) == 0) ++recovery_.temporaries_removed;
    }
  }
  const bool locked = LockDir();
  struct Unlock {
    Store* s;
    bool on;
    ~Unlock() {
      if (on) s->UnlockDir();
    }
  } unlock{this, locked};
  const int64_t now = WallClockNs();
  // The stamp is only a hint: one that cannot be read or written (a full
  // disk) means a walk now or at the next open, never a failed open. A stale
  // stamp left behind cannot match: MarkDirs below moved every mtime on.
  if (locked && !options_.full_recovery) {
    auto stored = index_->GetReconciled();
    auto current = DirStamp();
    if (stored.ok() && current.ok() && *stored && (*stored)->stamp == *current &&
        now >= (*stored)->full_ns && now - (*stored)->full_ns < kFullEvery) {
      return OkStatus();
    }
  }
  // The walk. Marked first: a change during the walk (ours, like a
  // quarantine, or anyone's) makes the stamp differ afterwards, and then
  // nothing is stamped (the next open walks again).
  recovery_.walked = true;
  MarkDirs();
  ASSIGN_OR_RETURN(std::string before, DirStamp());
  live_temps_ = false;
  RETURN_IF_ERROR(Recover());
  ASSIGN_OR_RETURN(std::string after, DirStamp());
  if (locked) {
    (void)index_->SetReconciled(after == before && !live_temps_
                                    ? std::optional(Index::Reconciled{before, now})
                                    : std::nullopt);
  }
  return OkStatus();
}

}  // namespace flightrec::store
