#include "recorder/symbolize/debuginfo.h"

#include <fcntl.h>
#include <stdlib.h>
#include <unistd.h>

#include <filesystem>
#include <string>

#include <gtest/gtest.h>

#include "common/subprocess.h"
#include "recorder/symbolize/elf_symbols.h"

namespace flightrec::recorder::symbolize {
namespace {

namespace fs = std::filesystem;

// A record names the files it maps, and a record is anyone's to write: a
// relative path that looks like an option (`--strip-all`) was read by
// objcopy as one. After `--` it is the file of that name.
TEST(DecompressedCopyTest, APathThatLooksLikeAnOptionIsAFileToObjcopy) {
  std::string dir = (fs::temp_directory_path() / "flightrec-debuginfo-XXXXXX").string();
  ASSERT_NE(mkdtemp(dir.data()), nullptr);
  const std::string name = "--strip-all";
  // This test's own binary has DWARF; compressed, it needs a copy. (Named
  // by its path: objcopy's /proc/self/exe would be objcopy.)
  ASSERT_TRUE(RunToCompletion({"/usr/bin/objcopy", "--compress-debug-sections=zlib", "--",
                               fs::read_symlink("/proc/self/exe").string(), dir + "/" + name})
                  .ok());
  ElfFacts original;
  ASSERT_TRUE(ReadElfSymbols(dir + "/" + name, nullptr, nullptr, &original));
  ASSERT_TRUE(original.compressed_debug);
  // The record's path is relative: resolved in the reader's directory.
  int cwd = open(".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  ASSERT_GE(cwd, 0);
  ASSERT_EQ(chdir(dir.c_str()), 0);
  const std::string copy = DecompressedCopy(name, dir + "/cache");
  ASSERT_EQ(fchdir(cwd), 0);
  close(cwd);
  EXPECT_NE(copy, name);
  ElfFacts decompressed;
  EXPECT_TRUE(ReadElfSymbols(copy, nullptr, nullptr, &decompressed)) << copy;
  EXPECT_FALSE(decompressed.compressed_debug);
  EXPECT_EQ(decompressed.build_id, original.build_id);
  fs::remove_all(dir);
}

}  // namespace
}  // namespace flightrec::recorder::symbolize
