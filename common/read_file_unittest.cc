#include "common/read_file.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <string>

#include "common/scoped_fd.h"

namespace flightrec {
namespace {

// The kernel's answer that once killed recorderd: /proc/PID/maps opened while
// the process lived, read after it was reaped, fails with ESRCH. The reader
// returns that as a Status instead of throwing.
TEST(ReadFileTest, AProcessGoneBetweenOpenAndReadIsAStatus) {
  pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    pause();
    _exit(0);
  }
  ScopedFd maps(::open(("/proc/" + std::to_string(child) + "/maps").c_str(), O_RDONLY | O_CLOEXEC));
  ASSERT_TRUE(maps);
  kill(child, SIGKILL);
  ASSERT_EQ(waitpid(child, nullptr, 0), child);
  auto text = ReadFdToString(maps.get(), 1 << 20);
  ASSERT_FALSE(text.ok());
  EXPECT_EQ(text.status().err(), ESRCH) << text.status().message();
}

TEST(ReadFileTest, ReadsAWholeProcFileAndRefusesOneOverTheLimit) {
  auto maps = ReadFileToString("/proc/self/maps", 16 << 20);
  ASSERT_TRUE(maps.ok()) << maps.status().message();
  EXPECT_NE(maps->find("[stack]"), std::string::npos);
  auto small = ReadFileToString("/proc/self/maps", 16);
  ASSERT_FALSE(small.ok());
  EXPECT_EQ(small.status().code(), StatusCode::kUnsupported);
  EXPECT_NE(small.status().message().find("/proc/self/maps"), std::string::npos);
}

TEST(ReadFileTest, AMissingFileNamesItsPathAndErrno) {
  auto r = ReadFileToString("/nonexistent/flightrec-read-file", 1024);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().err(), ENOENT);
  EXPECT_NE(r.status().message().find("/nonexistent/flightrec-read-file"), std::string::npos);
}

}  // namespace
}  // namespace flightrec
