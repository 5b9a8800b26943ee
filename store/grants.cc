// Per-user read grants: an ACL on the record file plus a link in
// <store>/by-uid/<uid>/, so that a user finds exactly the records granted to
// them in a store they may not list (docs/FORMAT.md, "Who may read what").
#include <acl/libacl.h>  // acl_get_perm
#include <dirent.h>
#include <fcntl.h>
#include <sys/acl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstring>

#include <fmt/format.h>

#include "store/store.h"

#include "common/regular_file.h"
#include "store/reconcile.h"

namespace flightrec::store {
namespace {

constexpr const char* kByUid = "by-uid";
constexpr const char* kLinkPrefix = "../../";

bool IsRecordFileName(const std::string& n) {
  return n.size() > 5 && n.size() < 256 && n[0] != '.' && n.find('/') == std::string::npos &&
         n.compare(n.size() - 5, 5, ".frec") == 0;
}

bool IsUidName(const std::string& n) {
  return !n.empty() && n.size() <= 10 &&
         std::all_of(n.begin(), n.end(), [](char c) { return c >= '0' && c <= '9'; });
}

// True if `name` in `dirfd` is exactly the link GrantReader makes for it.
bool IsOurLink(int dirfd, const std::string& name) {
  char buf[512];
  ssize_t n = readlinkat(dirfd, name.c_str(), buf, sizeof(buf));  // EINVAL: not a symlink
  return n > 0 && static_cast<size_t>(n) < sizeof(buf) &&
         std::string(buf, static_cast<size_t>(n)) == kLinkPrefix + name;
}

// Opens (creating if asked) a directory the store made: never a symlink,
// owned by us, and not writable by anyone else. Anything else is refused.
StatusOr<ScopedFd> OpenOwnDir(int parent, const std::string& name, mode_t mode, bool create,
                              const std::string& display) {
  if (create && mkdirat(parent, name.c_str(), mode) != 0 && errno != EEXIST) {
    return ErrnoStatus("creating " + display);
  }
  ScopedFd fd(openat(parent, name.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
  if (!fd) {
    if (errno == ELOOP || errno == ENOTDIR) {
      return InvalidArgument(display + " is not a directory the store made (refused)");
    }
    return ErrnoStatus("opening " + display);
  }
  struct stat st {};
  if (fstat(fd.get(), &st) != 0) return ErrnoStatus("stat of " + display);
  if (st.st_uid != geteuid() || (st.st_mode & 0022) != 0) {
    return InvalidArgument(display + " is not owned by the store's owner or is writable by " +
                           "others (refused)");
  }
  return fd;
}

// Adds (or sets) a named-user entry `uid` with read (and, for a directory,
// search) permission to the ACL of `fd`, keeping every other entry: a history
// dump may be granted to more than one user.
Status AddUserRead(int fd, uid_t uid, bool dir, const std::string& display) {
  acl_t acl = acl_get_fd(fd);
  if (acl == nullptr) return ErrnoStatus("reading the ACL of " + display);
  auto fail = [&](const char* what) {
    Status st = ErrnoStatus(fmt::format("{} for the ACL of {}", what, display));
    acl_free(acl);
    return st;
  };
  acl_entry_t e;
  bool found = false;
  for (int w = ACL_FIRST_ENTRY; acl_get_entry(acl, w, &e) == 1; w = ACL_NEXT_ENTRY) {
    acl_tag_t tag;
    if (acl_get_tag_type(e, &tag) != 0 || tag != ACL_USER) continue;
    auto* q = static_cast<uid_t*>(acl_get_qualifier(e));
    if (q == nullptr) continue;
    found = *q == uid;
    acl_free(q);
    if (found) break;
  }
  if (!found) {
    if (acl_create_entry(&acl, &e) != 0) return fail("acl_create_entry");
    if (acl_set_tag_type(e, ACL_USER) != 0 || acl_set_qualifier(e, &uid) != 0) {
      return fail("acl_set_qualifier");
    }
  }
  acl_permset_t ps;
  if (acl_get_permset(e, &ps) != 0 || acl_clear_perms(ps) != 0 || acl_add_perm(ps, ACL_READ) != 0 ||
      (dir && acl_add_perm(ps, ACL_EXECUTE) != 0) || acl_set_permset(e, ps) != 0) {
    return fail("setting permissions");
  }
  if (acl_calc_mask(&acl) != 0) return fail("acl_calc_mask");
  if (acl_set_fd(fd, acl) != 0) return fail("acl_set_fd");
  acl_free(acl);
  return OkStatus();
}

}  // namespace

Status Store::GrantReader(const std::string& ref, uid_t uid) {
  if (options_.read_only) return InvalidArgument("store opened read-only");
  std::string file = ref;
  if (!IsRecordFileName(ref)) {
    ASSIGN_OR_RETURN(RecordRow row, index_->Resolve(ref));
    file = row.file;
  }
  if (!IsRecordFileName(file)) return InvalidArgument(fmt::format("bad record file name {}", file));
  const std::string display = dir_ + "/" + file;
  ScopedFd rf = OpenRegularFileAt(dirfd_.get(), file, O_NOFOLLOW);
  if (!rf && errno == EINVAL) return InvalidArgument(display + " is not a regular file (refused)");
  if (!rf) return ErrnoStatus("opening " + display + " to grant access");
  RETURN_IF_ERROR(AddUserRead(rf.get(), uid, false, display));
  // The link changes by-uid/: the reconcile stamp moves on with it
  // (store/reconcile.cc), or the next open would walk the store.
  DirChange change(*this);
  change.Before();
  RETURN_IF_ERROR(LinkGrant(file, uid));
  change.Changed();
  change.Commit();
  return OkStatus();
}

Status Store::LinkGrant(const std::string& file, uid_t uid) {
  struct stat dst {};
  // The user reaches the file and their by-uid directory through the store,
  // which others may search but not list (0711).
  if (fstat(dirfd_.get(), &dst) == 0 && dst.st_uid == geteuid() && (dst.st_mode & 0011) != 0011) {
    if (fchmod(dirfd_.get(), (dst.st_mode & 07777) | 0011) != 0) {
      return ErrnoStatus("making " + dir_ + " searchable");
    }
  }
  const std::string byuid_display = dir_ + "/" + kByUid;
  ASSIGN_OR_RETURN(ScopedFd byuid, OpenOwnDir(dirfd_.get(), kByUid, 0711, true, byuid_display));
  if (fstat(byuid.get(), &dst) == 0 && (dst.st_mode & 07777) != 0711) {
    if (fchmod(byuid.get(), 0711) != 0) return ErrnoStatus("chmod of " + byuid_display);
  }
  const std::string u = std::to_string(uid);
  const std::string udisplay = byuid_display + "/" + u;
  ASSIGN_OR_RETURN(ScopedFd udir, OpenOwnDir(byuid.get(), u, 0700, true, udisplay));
  if (fstat(udir.get(), &dst) != 0 || (dst.st_mode & 0007) != 0) {
    return InvalidArgument(udisplay + " is open to others (refused)");
  }
  // 0700 plus `u:<uid>:r-x`: the user lists their own links, nobody else's.
  RETURN_IF_ERROR(AddUserRead(udir.get(), uid, true, udisplay));
  const std::string target = kLinkPrefix + file;
  if (symlinkat(target.c_str(), udir.get(), file.c_str()) != 0) {
    if (errno != EEXIST) return ErrnoStatus(fmt::format("linking {}/{}", udisplay, file));
    if (!IsOurLink(udir.get(), file)) {
      return InvalidArgument(
          fmt::format("{}/{} exists and is not the store's link (refused)", udisplay, file));
    }
  }
  return OkStatus();
}

void Store::RemoveGrants(const std::string& file) {
  ScopedFd byuid(openat(dirfd_.get(), kByUid, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
  if (!byuid) return;  // nothing was ever granted
  auto uids = ListDir(byuid.get(), dir_ + "/" + kByUid);
  if (!uids.ok()) return;
  for (const auto& u : *uids) {
    if (!IsUidName(u)) continue;
    ScopedFd udir(openat(byuid.get(), u.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
    if (udir && IsOurLink(udir.get(), file)) unlinkat(udir.get(), file.c_str(), 0);
  }
}

// Named users with read access in the ACL of `fd` (the grants the hook made
// before by-uid/ existed).
static std::vector<uid_t> NamedReaders(int fd) {
  std::vector<uid_t> out;
  acl_t acl = acl_get_fd(fd);
  if (acl == nullptr) return out;
  acl_entry_t e;
  for (int w = ACL_FIRST_ENTRY; acl_get_entry(acl, w, &e) == 1; w = ACL_NEXT_ENTRY) {
    acl_tag_t tag;
    acl_permset_t ps;
    if (acl_get_tag_type(e, &tag) != 0 || tag != ACL_USER || acl_get_permset(e, &ps) != 0 ||
        acl_get_perm(ps, ACL_READ) != 1) {
      continue;
    }
    if (auto* q = static_cast<uid_t*>(acl_get_qualifier(e)); q != nullptr) {
      out.push_back(*q);
      acl_free(q);
    }
  }
  acl_free(acl);
  return out;
}

void Store::RecoverGrants(const std::set<std::string>& files) {
  ScopedFd byuid(openat(dirfd_.get(), kByUid, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
  if (!byuid && errno == ENOENT) {
    // A store from before by-uid/: its users were granted records by ACL
    // only, and found them by listing the store, which they no longer may.
    // Link what their ACLs grant, once (by-uid/ then exists, even if empty).
    for (const auto& f : files) {
      if (!IsRecordFileName(f)) continue;
      ScopedFd fd = OpenRegularFileAt(dirfd_.get(), f, O_NOFOLLOW);
      if (!fd) continue;
      for (uid_t uid : NamedReaders(fd.get())) {
        if (Status st = LinkGrant(f, uid); !st.ok()) {
          std::fprintf(stderr, "flightrec store: linking %s for uid %u: %s\n", f.c_str(),
                       static_cast<unsigned>(uid), st.message().c_str());
        }
      }
    }
    if (mkdirat(dirfd_.get(), kByUid, 0711) == 0 || errno == EEXIST) {
      byuid.reset(openat(dirfd_.get(), kByUid, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
      if (byuid) (void)fchmod(byuid.get(), 0711);
    }
    return;
  }
  if (!byuid) return;
  auto uids = ListDir(byuid.get(), dir_ + "/" + kByUid);
  if (!uids.ok()) return;
  for (const auto& u : *uids) {
    if (!IsUidName(u)) continue;
    ScopedFd udir(openat(byuid.get(), u.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
    if (!udir) continue;
    auto names = ListDir(udir.get(), dir_ + "/" + kByUid + "/" + u);
    if (!names.ok()) continue;
    for (const auto& n : *names) {
      struct stat st {};
      if (fstatat(udir.get(), n.c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0) continue;
      if (!S_ISLNK(st.st_mode)) {
        // Not something the store makes: left for a human to look at.
        std::string line =
            fmt::format("{}/{}/{}/{} is not a link the store made; left alone", dir_, kByUid, u, n);
        for (auto& c : line) {
          if (static_cast<unsigned char>(c) < 0x20 || c == 0x7f) c = '?';
        }
        std::fprintf(stderr, "flightrec store: %s\n", line.c_str());
        ++recovery_.foreign_in_by_uid;
        continue;
      }
      struct stat target {};
      bool live = IsRecordFileName(n) && IsOurLink(udir.get(), n) &&
                  fstatat(dirfd_.get(), n.c_str(), &target, AT_SYMLINK_NOFOLLOW) == 0 &&
                  S_ISREG(target.st_mode);
      if (!live && unlinkat(udir.get(), n.c_str(), 0) == 0) ++recovery_.links_removed;
    }
  }
}

StatusOr<std::vector<std::string>> GrantedRecordFiles(const std::string& store_dir, uid_t uid) {
  // O_PATH: the store is searchable, not readable, by the users who call this.
  ScopedFd sfd(open(store_dir.c_str(), O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
  if (!sfd) return ErrnoStatus("cannot open the store " + store_dir);
  ScopedFd byuid(openat(sfd.get(), kByUid, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
  ScopedFd udir;
  if (byuid) {
    udir.reset(openat(byuid.get(), std::to_string(uid).c_str(),
                      O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
  }
  std::vector<std::string> out;
  if (udir) {
    ASSIGN_OR_RETURN(auto names, ListDir(udir.get(), store_dir + "/by-uid"));
    for (auto& n : names) {
      if (IsRecordFileName(n) && IsOurLink(udir.get(), n)) out.push_back(std::move(n));
    }
    return out;
  }
  if (errno != ENOENT)
    return ErrnoStatus("cannot open " + store_dir + "/by-uid/" + std::to_string(uid));
  // Nothing granted to this uid. A store the caller may list (their own, or
  // one made before by-uid/ existed) is listed whole: the caller keeps what it
  // can open. A store closed to the caller (0711) simply has nothing of theirs.
  ScopedFd rfd(openat(sfd.get(), ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  if (!rfd) {
    if (errno == EACCES) return out;
    return ErrnoStatus("cannot read the store " + store_dir);
  }
  ASSIGN_OR_RETURN(auto names, ListDir(rfd.get(), store_dir));
  for (auto& n : names) {
    if (IsRecordFileName(n)) out.push_back(std::move(n));
  }
  return out;
}

StatusOr<std::unique_ptr<RecordReader>> OpenGrantedRecord(const std::string& store_dir,
                                                          const std::string& file) {
  if (!IsRecordFileName(file)) return InvalidArgument(fmt::format("bad record file name {}", file));
  ScopedFd sfd(open(store_dir.c_str(), O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
  if (!sfd) return ErrnoStatus("cannot open the store " + store_dir);
  ScopedFd fd = OpenRegularFileAt(sfd.get(), file, O_NOFOLLOW);
  if (!fd) return ErrnoStatus(fmt::format("cannot open {}/{}", store_dir, file));
  return RecordReader::OpenFd(std::move(fd), store_dir + "/" + file);
}

}  // namespace flightrec::store
