// UnwinderSeccomp: the filter the unwinder child runs under lets it read and
// write what it has, and kills it on anything else.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/ioctl.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <functional>
#include <string>

#include "coredump-hook/coredump.h"

namespace flightrec::coredump {
namespace {

// Runs `body` in a child under the filter; returns its wait status.
int UnderFilter(const std::function<void()>& body) {
  pid_t pid = fork();
  if (pid == 0) {
    if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0) _exit(90);
    if (!UnwinderSeccomp().ok()) _exit(91);
    body();
    _exit(0);
  }
  int st = 0;
  waitpid(pid, &st, 0);
  return st;
}

bool KilledBySigsys(int st) { return WIFSIGNALED(st) && WTERMSIG(st) == SIGSYS; }

TEST(UnwinderSeccomp, FilesAndMemoryAreAllowed) {
  int p[2];
  ASSERT_EQ(pipe(p), 0);
  int st = UnderFilter([&] {
    int fd = open("/proc/self/maps", O_RDONLY | O_CLOEXEC);
    char buf[256];
    if (fd < 0 || read(fd, buf, sizeof(buf)) <= 0) _exit(1);
    close(fd);
    std::string big(8 << 20, 'x');  // mmap'd by malloc
    if (write(p[1], "ok", 2) != 2) _exit(2);
  });
  close(p[1]);
  char got[3] = {};
  EXPECT_EQ(read(p[0], got, 2), 2);
  close(p[0]);
  EXPECT_TRUE(WIFEXITED(st) && WEXITSTATUS(st) == 0) << st;
  EXPECT_STREQ(got, "ok");
}

TEST(UnwinderSeccomp, ASocketExecForkOrSignalKillsTheProcess) {
  EXPECT_TRUE(KilledBySigsys(UnderFilter([] { socket(AF_UNIX, SOCK_STREAM, 0); })));
  EXPECT_TRUE(KilledBySigsys(UnderFilter([] {
    char* argv[] = {const_cast<char*>("/bin/true"), nullptr};
    execve("/bin/true", argv, nullptr);
  })));
  EXPECT_TRUE(KilledBySigsys(UnderFilter([] { fork(); })));
  pid_t parent = getpid();
  EXPECT_TRUE(KilledBySigsys(UnderFilter([parent] { kill(parent, 0); })));
  EXPECT_TRUE(KilledBySigsys(UnderFilter([] { unlink("/nonexistent-flightrec"); })));
}

// The two rules with an argument check (spelled out as scmp_arg_cmp structs):
// socketpair only for AF_UNIX, ioctl only for TCGETS.
TEST(UnwinderSeccomp, SocketpairOnlyUnixIoctlOnlyTcgets) {
  const int st = UnderFilter([] {
    int sv[2];
    if (socketpair(AF_UNIX, SOCK_STREAM, 0, sv) != 0) _exit(1);
    isatty(0);
  });
  EXPECT_TRUE(WIFEXITED(st) && WEXITSTATUS(st) == 0) << st;
  EXPECT_TRUE(KilledBySigsys(UnderFilter([] {
    int sv[2];
    socketpair(AF_INET, SOCK_STREAM, 0, sv);
  })));
  EXPECT_TRUE(KilledBySigsys(UnderFilter([] {
    int n = 0;
    ioctl(0, FIONREAD, &n);
  })));
}

}  // namespace
}  // namespace flightrec::coredump
