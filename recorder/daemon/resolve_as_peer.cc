#include "recorder/daemon/resolve_as_peer.h"

#include <grp.h>
#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/vfs.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>

#include <fmt/format.h>

#include "common/scoped_fd.h"
#include "common/subprocess.h"

namespace flightrec::recorder {
namespace {

// FUSE_SUPER_MAGIC (include/uapi/linux/magic.h).
constexpr long kFuseMagic = 0x65735546;

// What the child answers, with the fd it opened (SCM_RIGHTS) when ok.
struct Reply {
  int32_t code = 0;  // StatusCode
  int32_t err = 0;
  uint64_t file_offset = 0;
  char message[1024] = {};
};

bool SendReply(int sock, const Reply& r, int fd) {
  iovec iov{const_cast<Reply*>(&r), sizeof(r)};
  alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int))] = {};
  msghdr msg{};
  msg.msg_iov = &iov;
  msg.msg_iovlen = 1;
  if (fd >= 0) {
    msg.msg_control = control;
    msg.msg_controllen = sizeof(control);
    cmsghdr* c = CMSG_FIRSTHDR(&msg);
    c->cmsg_level = SOL_SOCKET;
    c->cmsg_type = SCM_RIGHTS;
    c->cmsg_len = CMSG_LEN(sizeof(int));
    std::memcpy(CMSG_DATA(c), &fd, sizeof(int));
  }
  return sendmsg(sock, &msg, MSG_NOSIGNAL) == static_cast<ssize_t>(sizeof(r));
}

// False unless a whole Reply came; *fd gets the fd passed with it, if any.
bool ReceiveReply(int sock, Reply* r, ScopedFd* fd) {
  iovec iov{r, sizeof(*r)};
  alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int))] = {};
  msghdr msg{};
  msg.msg_iov = &iov;
  msg.msg_iovlen = 1;
  msg.msg_control = control;
  msg.msg_controllen = sizeof(control);
  ssize_t n = recvmsg(sock, &msg, MSG_CMSG_CLOEXEC | MSG_DONTWAIT);
  for (cmsghdr* c = n > 0 ? CMSG_FIRSTHDR(&msg) : nullptr; c != nullptr; c = CMSG_NXTHDR(&msg, c)) {
    if (c->cmsg_level == SOL_SOCKET && c->cmsg_type == SCM_RIGHTS &&
        c->cmsg_len == CMSG_LEN(sizeof(int))) {
      int received = -1;
      std::memcpy(&received, CMSG_DATA(c), sizeof(int));
      fd->reset(received);
    }
  }
  r->message[sizeof(r->message) - 1] = '\0';
  return n == static_cast<ssize_t>(sizeof(*r)) && (msg.msg_flags & (MSG_TRUNC | MSG_CTRUNC)) == 0;
}

// Makes the calling child `who` for good. It is a copy of recorderd's
// memory, which the peer must neither read (ptrace, /proc/PID/mem) nor get
// as a core: not dumpable before and after the uid change (which resets it
// to fs.suid_dumpable), RLIMIT_CORE 1 (the kernel then pipes no core to a
// hook), and it dies with recorderd.
bool BecomePeer(const Credentials& who) {
  const rlimit no_core{1, 1};
  if (prctl(PR_SET_DUMPABLE, 0) != 0 || setrlimit(RLIMIT_CORE, &no_core) != 0 ||
      setgroups(who.groups.size(), who.groups.data()) != 0 ||
      setresgid(who.gid, who.gid, who.gid) != 0 || setresuid(who.uid, who.uid, who.uid) != 0) {
    return false;
  }
  return prctl(PR_SET_DUMPABLE, 0) == 0 && prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) == 0 &&
         prctl(PR_SET_PDEATHSIG, SIGKILL) == 0;
}

// The child: becomes `who`, resolves the spec and answers.
int ResolveInChild(int sock, const std::string& spec, const Credentials& who) {
  Reply r;
  ScopedFd file;
  Status st = OkStatus();
  if (!BecomePeer(who)) {
    st = ErrnoStatus(
        fmt::format("uprobe '{}': cannot take the credentials of uid {}", spec, who.uid));
  } else if (auto t = ResolveUprobeTarget(spec); !t.ok()) {
    st = t.status();
  } else if (struct statfs fs{}; fstatfs(t->file.get(), &fs) == 0 && fs.f_type == kFuseMagic) {
    st = Unsupported(
        fmt::format("uprobe '{}': {} is on a FUSE filesystem (refused for users)", spec, t->path));
  } else {
    r.file_offset = t->file_offset;
    file = std::move(t->file);
  }
  r.code = static_cast<int32_t>(st.code());
  r.err = st.err();
  std::snprintf(r.message, sizeof(r.message), "%s", st.message().c_str());
  return SendReply(sock, r, file.get()) ? 0 : 1;
}

}  // namespace

StatusOr<UprobeTarget> ResolveUprobeTargetAs(const std::string& spec, const Credentials& who,
                                             std::chrono::milliseconds timeout) {
  ASSIGN_OR_RETURN(UprobeTarget target, ParseUprobeSpec(spec));
  int sv[2];
  if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv) != 0) {
    return ErrnoStatus("socketpair for resolving a uprobe");
  }
  ScopedFd mine(sv[0]), theirs(sv[1]);
  ASSIGN_OR_RETURN(Subprocess child,
                   Subprocess::Fork([&] { return ResolveInChild(theirs.get(), spec, who); }));
  child.set_kill_on_destroy(true);  // one still running past the timeout
  theirs.reset();                   // a child that dies unanswered reads as a hangup
  pollfd p{mine.get(), POLLIN, 0};
  int ready = 0;
  do {
    ready = poll(&p, 1, static_cast<int>(timeout.count()));
  } while (ready < 0 && errno == EINTR);
  if (ready == 0) {
    return Unavailable(fmt::format("uprobe '{}': opening {} as uid {} took more than {} ms", spec,
                                   target.path, who.uid, timeout.count()));
  }
  Reply r;
  ScopedFd file;
  if (!ReceiveReply(mine.get(), &r, &file)) {
    return Internal(
        fmt::format("uprobe '{}': the child resolving it as uid {} gave no answer", spec, who.uid));
  }
  (void)child.Wait();
  if (r.code < 0 || r.code > static_cast<int32_t>(StatusCode::kInternal)) {
    return Internal(fmt::format("uprobe '{}': malformed answer from its resolver", spec));
  }
  if (r.code != 0) return Status(static_cast<StatusCode>(r.code), r.message, r.err);
  if (!file) return Internal(fmt::format("uprobe '{}': its resolver sent no file", spec));
  target.file_offset = r.file_offset;
  target.file = std::move(file);
  return target;
}

}  // namespace flightrec::recorder
