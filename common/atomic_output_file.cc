#include "common/atomic_output_file.h"

#include <fcntl.h>
#include <linux/magic.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <unistd.h>

#include <cerrno>
#include <string_view>

#include <fmt/format.h>

namespace flightrec {
namespace {

bool IsFifoOrCharDevice(const struct stat& st) {
  return S_ISFIFO(st.st_mode) || S_ISCHR(st.st_mode);
}

// True when an entry owned by `owner` in a directory `dir` is one the kernel
// would not let us follow (protected_symlinks) or open (protected_fifos=2):
// the directory is sticky and world-writable, and neither we nor the
// directory's owner own the entry.
bool PlantedByAnotherUser(const struct stat& dir, uid_t owner) {
  const bool sticky_shared = (dir.st_mode & S_ISVTX) && (dir.st_mode & S_IWOTH);
  return sticky_shared && owner != geteuid() && owner != dir.st_uid;
}

// True for a name of one of this process's descriptors: an entry of
// /proc/self/fd (/dev/fd/N) or a link into /proc (/dev/stdout ->
// /proc/self/fd/1). What it names (a pipe, a tty, or the regular file a shell
// redirected stdout to) is written into; replacing it would replace
// /dev/stdout itself for every process.
bool IsDescriptorAlias(int dir_fd, const std::string& base) {
  struct statfs fs {};
  if (fstatfs(dir_fd, &fs) == 0 && fs.f_type == PROC_SUPER_MAGIC) return true;
  char link[16];
  const ssize_t n = readlinkat(dir_fd, base.c_str(), link, sizeof(link));
  return n >= 6 && std::string_view(link, 6) == "/proc/";
}

// "<base>.tmp-" and 8 random letters: a name that cannot be planted ahead.
std::string TempName(const std::string& base) {
  static constexpr char kChars[] = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789";
  unsigned char r[8] = {};
  if (getrandom(r, sizeof(r), 0) != sizeof(r)) {
    for (auto& c : r) c = static_cast<unsigned char>(::random());
  }
  std::string name = base + ".tmp-";
  for (unsigned char c : r) name += kChars[c % (sizeof(kChars) - 1)];
  return name;
}

}  // namespace

StatusOr<AtomicOutputFile> AtomicOutputFile::Open(const std::string& path, mode_t mode) {
  AtomicOutputFile f;
  f.path_ = path;
  const size_t slash = path.rfind('/');
  f.dir_ = slash == std::string::npos ? "." : slash == 0 ? "/" : path.substr(0, slash);
  f.base_ = slash == std::string::npos ? path : path.substr(slash + 1);
  if (f.base_.empty() || f.base_ == "." || f.base_ == "..") {
    return InvalidArgument(fmt::format("{} does not name a file", path));
  }
  f.dir_fd_.reset(open(f.dir_.c_str(), O_PATH | O_DIRECTORY | O_CLOEXEC));
  struct stat dir {};
  if (!f.dir_fd_ || fstat(f.dir_fd_.get(), &dir) != 0) {
    return ErrnoStatus(fmt::format("cannot write {}: directory {}", path, f.dir_));
  }
  struct stat st {};
  if (fstatat(f.dir_fd_.get(), f.base_.c_str(), &st, AT_SYMLINK_NOFOLLOW) == 0) {
    struct stat target {};
    const bool link = S_ISLNK(st.st_mode);
    const bool device = link ? fstatat(f.dir_fd_.get(), f.base_.c_str(), &target, 0) == 0 &&
                                   IsFifoOrCharDevice(target)
                             : IsFifoOrCharDevice(st);
    const bool alias = link && IsDescriptorAlias(f.dir_fd_.get(), f.base_);
    if (device || alias) {
      if (PlantedByAnotherUser(dir, st.st_uid)) {
        return Status(StatusCode::kPermissionDenied,
                      fmt::format("not writing into {}: it is another user's {} in a shared "
                                  "sticky directory",
                                  path, link ? "symlink" : "FIFO or device"));
      }
      RETURN_IF_ERROR(f.OpenInPlace(link, alias));
      return f;
    }
    if (!link && !S_ISREG(st.st_mode)) {
      return InvalidArgument(
          fmt::format("{} exists and is not a regular file, FIFO or character device", path));
    }
  }
  RETURN_IF_ERROR(f.OpenNew(mode));
  return f;
}

Status AtomicOutputFile::OpenInPlace(bool follow, bool alias) {
  // An alias of a regular file the shell opened (> or >>): appended to, so
  // that what it holds or its position is kept.
  const int flags =
      O_WRONLY | O_NOCTTY | O_CLOEXEC | (follow ? 0 : O_NOFOLLOW) | (alias ? O_APPEND : 0);
  fd_.reset(openat(dir_fd_.get(), base_.c_str(), flags));
  struct stat st {};
  if (!fd_ || fstat(fd_.get(), &st) != 0) return ErrnoStatus("cannot write " + path_);
  if (!alias && !IsFifoOrCharDevice(st)) {
    fd_.reset();
    return Unavailable(fmt::format("{} changed while being opened: not writing into it", path_));
  }
  in_place_ = true;
  return OkStatus();
}

Status AtomicOutputFile::OpenNew(mode_t mode) {
  fd_.reset(openat(dir_fd_.get(), ".", O_TMPFILE | O_WRONLY | O_CLOEXEC, mode));
  if (fd_) return OkStatus();
  // Filesystems without O_TMPFILE: a random name, created only if nothing
  // (not even a dangling symlink) has it.
  if (errno != EOPNOTSUPP && errno != EISDIR && errno != EINVAL) {
    return ErrnoStatus("cannot write " + path_);
  }
  for (int i = 0; i < 64; ++i) {
    std::string name = TempName(base_);
    fd_.reset(openat(dir_fd_.get(), name.c_str(),
                     O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, mode));
    if (fd_) {
      tmp_name_ = std::move(name);
      return OkStatus();
    }
    if (errno != EEXIST) break;
  }
  return ErrnoStatus("cannot write " + path_);
}

Status AtomicOutputFile::Commit() {
  if (in_place_) return OkStatus();
  if (fsync(fd_.get()) != 0) return ErrnoStatus("writing " + path_);
  // An O_TMPFILE gets a name of its own first: linkat never replaces an
  // existing entry, so a planted name only costs a retry.
  for (int i = 0; tmp_name_.empty() && i < 64; ++i) {
    std::string name = TempName(base_);
    std::string proc = fmt::format("/proc/self/fd/{}", fd_.get());
    if (linkat(fd_.get(), "", dir_fd_.get(), name.c_str(), AT_EMPTY_PATH) == 0 ||
        (errno != EEXIST &&
         linkat(AT_FDCWD, proc.c_str(), dir_fd_.get(), name.c_str(), AT_SYMLINK_FOLLOW) == 0)) {
      tmp_name_ = std::move(name);
    } else if (errno != EEXIST) {
      return ErrnoStatus("writing " + path_);
    }
  }
  if (tmp_name_.empty()) return ErrnoStatus("writing " + path_);
  // rename replaces whatever has the name (a file, a symlink) without
  // opening or following it.
  if (renameat(dir_fd_.get(), tmp_name_.c_str(), dir_fd_.get(), base_.c_str()) != 0) {
    return ErrnoStatus(fmt::format("cannot replace {}", path_));
  }
  tmp_name_.clear();
  return OkStatus();
}

AtomicOutputFile::~AtomicOutputFile() {
  if (!tmp_name_.empty() && dir_fd_) unlinkat(dir_fd_.get(), tmp_name_.c_str(), 0);
}

bool FdStreambuf::Drain() {
  for (char* p = pbase(); p < pptr();) {
    ssize_t w = write(fd_, p, static_cast<size_t>(pptr() - p));
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) return false;
    p += w;
  }
  setp(buf_, buf_ + sizeof(buf_));
  return true;
}

FdStreambuf::int_type FdStreambuf::overflow(int_type c) {
  if (!Drain()) return traits_type::eof();
  if (!traits_type::eq_int_type(c, traits_type::eof())) {
    *pptr() = traits_type::to_char_type(c);
    pbump(1);
  }
  return traits_type::not_eof(c);
}

int FdStreambuf::sync() { return Drain() ? 0 : -1; }

Status WriteFileAtomically(const std::string& path, const std::string& contents, mode_t mode) {
  ASSIGN_OR_RETURN(auto file, AtomicOutputFile::Open(path, mode));
  for (size_t off = 0; off < contents.size();) {
    ssize_t w = write(file.fd(), contents.data() + off, contents.size() - off);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) return ErrnoStatus("writing " + path);
    off += static_cast<size_t>(w);
  }
  return file.Commit();
}

}  // namespace flightrec
