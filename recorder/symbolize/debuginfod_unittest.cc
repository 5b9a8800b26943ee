// What a debuginfod fetcher hands back is a file from the network: it is used
// only if it is an ELF file of the build-id asked for, read by the same
// bounded reader as local debug files.
#include "recorder/symbolize/debuginfod.h"

#include <stdlib.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>

#include <gtest/gtest.h>

#include "recorder/elf/build_id.h"
#include "recorder/symbolize/debuginfo.h"
#include "recorder/symbolize/dwarf_file.h"
#include "recorder/symbolize/elf_symbols.h"

namespace flightrec::recorder::symbolize {
namespace {

namespace fs = std::filesystem;

class FetchDebugFileTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = (fs::temp_directory_path() / "flightrec-debuginfod-XXXXXX").string();
    ASSERT_NE(mkdtemp(dir_.data()), nullptr);
    self_ = fs::read_symlink("/proc/self/exe").string();
    ElfFacts f;
    ASSERT_TRUE(ReadElfSymbols(self_, nullptr, nullptr, &f));
    self_id_ = elf::HexBuildId(f.build_id);
    ASSERT_FALSE(self_id_.empty());
  }
  void TearDown() override {
    SetDebugFileFetcher(nullptr);
    fs::remove_all(dir_);
  }
  // Installs a fetcher that answers every build-id with `answer`.
  void Answer(const std::string& answer) {
    SetDebugFileFetcher([answer](const std::string&) { return answer; });
  }
  std::string Write(const std::string& name, const std::string& bytes) {
    std::string p = dir_ + "/" + name;
    std::ofstream(p, std::ios::binary) << bytes;
    return p;
  }
  std::string dir_, self_, self_id_;
};

TEST_F(FetchDebugFileTest, NothingIsFetchedWithoutAFetcher) {
  EXPECT_EQ(FetchDebugFile("/bin/true", self_id_), "");
}

TEST_F(FetchDebugFileTest, AFileOfTheBuildIdAskedForIsUsed) {
  Answer(self_);
  EXPECT_EQ(FetchDebugFile("/elsewhere/prog", self_id_), self_);
}

TEST_F(FetchDebugFileTest, AnotherBuildsFileIsRefused) {
  Answer(self_);
  EXPECT_EQ(FetchDebugFile("/elsewhere/prog", std::string(40, 'a')), "");
}

TEST_F(FetchDebugFileTest, FilesThatAreNotWholeElfFilesAreRefused) {
  std::string elf_bytes;
  {
    std::ifstream in(self_, std::ios::binary);
    elf_bytes.assign(std::istreambuf_iterator<char>(in), {});
  }
  for (const std::string& bad :
       {Write("empty", ""), Write("text", "not an ELF file\n"),
        Write("header-only", elf_bytes.substr(0, 64)), dir_, dir_ + "/missing"}) {
    Answer(bad);
    EXPECT_EQ(FetchDebugFile("/elsewhere/prog", self_id_), "") << bad;
  }
}

// A file cut short after its build-id note passes the build-id check; its
// symbols and DWARF are then read as a local debug file's are, within the
// file's bytes.
TEST_F(FetchDebugFileTest, ATruncatedFileWithTheRightBuildIdIsReadWithinItsBytes) {
  std::string elf_bytes;
  {
    std::ifstream in(self_, std::ios::binary);
    elf_bytes.assign(std::istreambuf_iterator<char>(in), {});
  }
  for (size_t cut : {size_t{4096}, elf_bytes.size() / 2, elf_bytes.size() - 1}) {
    Answer(Write("cut", elf_bytes.substr(0, cut)));
    std::string got = FetchDebugFile("/elsewhere/prog", self_id_);
    if (got.empty()) continue;  // refused: fine too
    SymTuples syms;
    ElfFacts facts;
    ReadElfSymbols(got, &syms, nullptr, &facts);
    auto dwarf = DwarfFile::Open(got);
    if (!dwarf) continue;
    // Lookups at this test's own functions' addresses.
    SymTuples own;
    ASSERT_TRUE(ReadElfSymbols(self_, &own, nullptr, nullptr));
    for (size_t i = 0; i < own.size() && i < 500; i += 5) {
      std::vector<Symbol> chain;
      dwarf->Frames(std::get<0>(own[i]), true, &chain);
    }
  }
}

TEST_F(FetchDebugFileTest, TheFileItselfIsNotItsOwnDebugFile) {
  Answer(self_);
  EXPECT_EQ(FetchDebugFile(self_, self_id_), "");
}

// Build-ids reach libdebuginfod, which puts them in a URL and a cache path:
// only hex digits of a build-id's length are ever sent.
TEST(DebuginfodTest, OnlyHexBuildIdsAreQueried) {
  EXPECT_TRUE(IsQueryableBuildId("69b85ef032df7e631f167916785ab296d6a63684"));
  EXPECT_TRUE(IsQueryableBuildId("ab"));
  for (const std::string& bad :
       {std::string(), std::string("a"), std::string("abc"), std::string("../../etc/passwd"),
        std::string("69B85EF0"), std::string("69b8/ef0"), std::string("ab\ncd"),
        std::string(130, 'a'), std::string("ab\0cd", 5)}) {
    EXPECT_FALSE(IsQueryableBuildId(bad)) << bad;
  }
}

}  // namespace
}  // namespace flightrec::recorder::symbolize
