#include "common/subprocess.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <string_view>

namespace flightrec {

Subprocess& Subprocess::operator=(Subprocess&& o) noexcept {
  if (this != &o) {
    if (pid_ > 0) {
      if (kill_on_destroy_) Kill();
      (void)Wait();
    }
    pid_ = std::exchange(o.pid_, -1);
    kill_on_destroy_ = o.kill_on_destroy_;
  }
  return *this;
}

Subprocess::~Subprocess() {
  if (pid_ <= 0) return;
  if (kill_on_destroy_) Kill();
  (void)Wait();
}

void Subprocess::Kill() {
  if (pid_ > 0) kill(pid_, SIGKILL);
}

StatusOr<int> Subprocess::Wait() {
  if (pid_ <= 0) return InvalidArgument("no child to wait for");
  int status = 0;
  pid_t r;
  while ((r = waitpid(pid_, &status, 0)) < 0 && errno == EINTR) {
  }
  pid_ = -1;
  if (r < 0) return ErrnoStatus("waitpid");
  return status;
}

namespace {

// In the child, after fork: only async-signal-safe calls.
void RedirectToDevNull(int flags, std::initializer_list<int> targets) {
  int devnull = open("/dev/null", flags | O_CLOEXEC);
  if (devnull < 0) return;
  for (int t : targets) dup2(devnull, t);
}

}  // namespace

StatusOr<Subprocess> Subprocess::Spawn(const std::vector<std::string>& argv,
                                       const SpawnOptions& opts) {
  if (argv.empty()) return InvalidArgument("nothing to run");
  std::vector<char*> args;
  args.reserve(argv.size() + 1);
  for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  pid_t pid = fork();
  if (pid < 0) return ErrnoStatus("fork");
  if (pid == 0) {
    if (opts.null_stdin) RedirectToDevNull(O_RDONLY, {STDIN_FILENO});
    if (opts.quiet) RedirectToDevNull(O_WRONLY, {STDOUT_FILENO, STDERR_FILENO});
    if (opts.search_path) {
      execvp(args[0], args.data());
    } else {
      execv(args[0], args.data());
    }
    _exit(127);  // the shell's "command not found"
  }
  return Subprocess(pid);
}

StatusOr<Subprocess> Subprocess::Fork(const std::function<int()>& child) {
  pid_t pid = fork();
  if (pid < 0) return ErrnoStatus("fork");
  if (pid == 0) _exit(child());
  return Subprocess(pid);
}

Status RunToCompletion(const std::vector<std::string>& argv, const SpawnOptions& opts) {
  ASSIGN_OR_RETURN(Subprocess p, Subprocess::Spawn(argv, opts));
  ASSIGN_OR_RETURN(int status, p.Wait());
  if (WIFEXITED(status) && WEXITSTATUS(status) == 0) return OkStatus();
  if (WIFSIGNALED(status)) {
    const char* sig = sigabbrev_np(WTERMSIG(status));
    return Internal(argv[0] + " died from SIG" + (sig ? sig : std::to_string(WTERMSIG(status))));
  }
  return Internal(argv[0] + " exited with status " + std::to_string(WEXITSTATUS(status)));
}

StatusOr<std::pair<ScopedFd, ScopedFd>> MakePipe() {
  int fds[2];
  if (pipe2(fds, O_CLOEXEC) != 0) return ErrnoStatus("pipe");
  return std::make_pair(ScopedFd(fds[0]), ScopedFd(fds[1]));
}

}  // namespace flightrec
