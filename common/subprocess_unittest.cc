#include "common/subprocess.h"

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <gtest/gtest.h>

namespace flightrec {
namespace {

TEST(SubprocessTest, RunToCompletionReportsHowTheChildEnded) {
  EXPECT_TRUE(RunToCompletion({"/bin/true"}).ok());
  Status failed = RunToCompletion({"/bin/sh", "-c", "exit 3"});
  ASSERT_FALSE(failed.ok());
  EXPECT_NE(failed.message().find("exited with status 3"), std::string::npos) << failed.message();
  Status killed = RunToCompletion({"/bin/sh", "-c", "kill -KILL $$"});
  ASSERT_FALSE(killed.ok());
  EXPECT_NE(killed.message().find("SIGKILL"), std::string::npos) << killed.message();
  // Not found: the child's exec fails and it exits 127, the caller lives on.
  Status missing = RunToCompletion({"/nonexistent/flightrec-tool"});
  ASSERT_FALSE(missing.ok());
  EXPECT_NE(missing.message().find("127"), std::string::npos) << missing.message();
}

TEST(SubprocessTest, QuietChildWritesNothingToTheCallersStdout) {
  auto pipe = MakePipe();
  ASSERT_TRUE(pipe.ok());
  // The child's stdout would be the pipe's write end; quiet sends it to
  // /dev/null instead.
  int saved = dup(STDOUT_FILENO);
  dup2(pipe->second.get(), STDOUT_FILENO);
  Status s = RunToCompletion({"/bin/echo", "chatter"}, SpawnOptions{.quiet = true});
  dup2(saved, STDOUT_FILENO);
  close(saved);
  ASSERT_TRUE(s.ok()) << s.message();
  pipe->second.reset();
  char buf[16];
  EXPECT_EQ(read(pipe->first.get(), buf, sizeof(buf)), 0);
}

TEST(SubprocessTest, ForkRunsTheFunctionAndExitsWithItsValue) {
  auto p = Subprocess::Fork([] { return 7; });
  ASSERT_TRUE(p.ok());
  auto status = p->Wait();
  ASSERT_TRUE(status.ok());
  EXPECT_TRUE(WIFEXITED(*status));
  EXPECT_EQ(WEXITSTATUS(*status), 7);
  EXPECT_FALSE(p->running());
}

TEST(SubprocessTest, DestructorKillsAndReapsAChildWhenAsked) {
  pid_t pid = -1;
  {
    auto p = Subprocess::Fork([] {
      pause();
      return 0;
    });
    ASSERT_TRUE(p.ok());
    pid = p->pid();
    p->set_kill_on_destroy(true);
  }
  // Reaped: the pid is no longer our child.
  EXPECT_EQ(waitpid(pid, nullptr, WNOHANG), -1);
  EXPECT_EQ(errno, ECHILD);
}

}  // namespace
}  // namespace flightrec
