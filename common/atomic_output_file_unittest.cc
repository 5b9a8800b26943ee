#include "common/atomic_output_file.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>

namespace flightrec {
namespace {

namespace fs = std::filesystem;

class AtomicOutputFileTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string tmpl = (fs::temp_directory_path() / "atomic-out-XXXXXX").string();
    ASSERT_NE(mkdtemp(tmpl.data()), nullptr);
    dir_ = tmpl;
  }
  void TearDown() override { fs::remove_all(dir_); }
  static std::string Read(const std::string& path) {
    std::ifstream in(path, std::ios::binary);
    return std::string(std::istreambuf_iterator<char>(in), {});
  }
  size_t Entries() const {
    return std::distance(fs::directory_iterator(dir_), fs::directory_iterator());
  }
  std::string dir_;
};

TEST_F(AtomicOutputFileTest, ALinkAtTheTargetIsReplacedNotFollowed) {
  const std::string victim = dir_ + "/victim", out = dir_ + "/out";
  std::ofstream(victim) << "keep";
  ASSERT_EQ(symlink(victim.c_str(), out.c_str()), 0);
  ASSERT_TRUE(WriteFileAtomically(out, "new", 0600).ok());
  EXPECT_EQ(Read(victim), "keep");
  struct stat st {};
  ASSERT_EQ(lstat(out.c_str(), &st), 0);
  EXPECT_TRUE(S_ISREG(st.st_mode));
  EXPECT_EQ(st.st_mode & 0777, 0600u);
  EXPECT_EQ(Read(out), "new");
  EXPECT_EQ(Entries(), 2u) << "a temporary was left behind";
}

TEST_F(AtomicOutputFileTest, WithoutCommitTheTargetIsUntouchedAndNothingRemains) {
  const std::string out = dir_ + "/out";
  std::ofstream(out) << "old";
  {
    auto f = AtomicOutputFile::Open(out);
    ASSERT_TRUE(f.ok()) << f.status().ToString();
    ASSERT_EQ(write(f->fd(), "half", 4), 4);
  }
  EXPECT_EQ(Read(out), "old");
  EXPECT_EQ(Entries(), 1u);
}

TEST_F(AtomicOutputFileTest, AFifoIsWrittenInPlace) {
  const std::string fifo = dir_ + "/fifo";
  ASSERT_EQ(mkfifo(fifo.c_str(), 0600), 0);
  int reader = open(fifo.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC);
  ASSERT_GE(reader, 0);
  ASSERT_TRUE(WriteFileAtomically(fifo, "through").ok());
  char buf[16] = {};
  EXPECT_EQ(read(reader, buf, sizeof(buf)), 7);
  EXPECT_STREQ(buf, "through");
  close(reader);
  struct stat st {};
  ASSERT_EQ(lstat(fifo.c_str(), &st), 0);
  EXPECT_TRUE(S_ISFIFO(st.st_mode));
}

// -o /dev/stdout with stdout redirected to a file: the file the shell opened
// gets the output (appended: `>>` keeps what was there), and the name, a
// link into /proc, is not replaced. /dev itself is left alone here: a link
// of the same kind in the test's directory, and /proc/self/fd/N directly.
TEST_F(AtomicOutputFileTest, ANameOfAnOpenDescriptorIsWrittenIntoNotReplaced) {
  const std::string file = dir_ + "/redirected";
  int fd = open(file.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0600);
  ASSERT_GE(fd, 0);
  ASSERT_EQ(write(fd, "a", 1), 1);
  const std::string proc = "/proc/self/fd/" + std::to_string(fd);
  const std::string stdout_like = dir_ + "/stdout";
  ASSERT_EQ(symlink(proc.c_str(), stdout_like.c_str()), 0);
  ASSERT_TRUE(WriteFileAtomically(stdout_like, "b").ok());
  auto st = WriteFileAtomically(proc, "c");
  EXPECT_TRUE(st.ok()) << st.ToString();
  close(fd);
  EXPECT_EQ(Read(file), "abc");
  struct stat ls {};
  ASSERT_EQ(lstat(stdout_like.c_str(), &ls), 0);
  EXPECT_TRUE(S_ISLNK(ls.st_mode)) << "the link was replaced by a file";
  EXPECT_EQ(Entries(), 2u);
}

// An unprivileged user cannot link an O_TMPFILE by its descriptor
// (AT_EMPTY_PATH needs CAP_DAC_READ_SEARCH): the /proc/self/fd path does it.
// Run as root (CI), the child becomes nobody; run as a user, it is one.
TEST_F(AtomicOutputFileTest, AnUnprivilegedUserCommitsToo) {
  ASSERT_EQ(chmod(dir_.c_str(), 0777), 0);
  const std::string out = dir_ + "/theirs";
  pid_t pid = fork();
  if (pid == 0) {
    if (geteuid() == 0 &&
        (setresgid(65534, 65534, 65534) != 0 || setresuid(65534, 65534, 65534) != 0)) {
      _exit(2);
    }
    _exit(WriteFileAtomically(out, "mine").ok() ? 0 : 1);
  }
  int st = 0;
  ASSERT_EQ(waitpid(pid, &st, 0), pid);
  ASSERT_TRUE(WIFEXITED(st) && WEXITSTATUS(st) == 0) << st;
  EXPECT_EQ(Read(out), "mine");
  struct stat s {};
  ASSERT_EQ(lstat(out.c_str(), &s), 0);
  EXPECT_EQ(s.st_uid, geteuid() == 0 ? 65534u : geteuid());
}

}  // namespace
}  // namespace flightrec
