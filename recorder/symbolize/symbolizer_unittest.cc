#include "recorder/symbolize/symbolizer.h"

#include <gtest/gtest.h>

#include <set>
#include <string>
#include <vector>

#include "recorder/attribution/vdso.h"

namespace flightrec::recorder::symbolize {
namespace {

using attribution::ReadOwnVdso;
using attribution::VdsoBuildId;

// The vDSO image this process maps names its entry points the way perf does.
TEST(VdsoTest, OwnImageNamesClockGettime) {
  auto image = ReadOwnVdso();
  ASSERT_TRUE(image.ok()) << image.status().message();
  EXPECT_FALSE(VdsoBuildId(*image).empty());
  CookieTable cookies;
  Symbolizer sym(&cookies, nullptr);
  sym.set_vdso(*image);
  std::set<std::string> names;
  for (uint64_t off = 0; off < image->size(); off += 4) {
    names.insert(sym.Resolve(Frame{false, 0, off, "[vdso]"}).function);
  }
  EXPECT_TRUE(names.count("__vdso_clock_gettime")) << ::testing::PrintToString(names);
  EXPECT_FALSE(names.count("clock_gettime")) << "the weak alias, not perf's name";
  // Without an image, or with one that is not ELF, frames stay unnamed.
  Symbolizer bare(&cookies, nullptr);
  bare.set_vdso("not an ELF image");
  Symbol s = bare.Resolve(Frame{false, 0, 0x10, "[vdso]"});
  EXPECT_EQ(s.Display(), "[vdso]+0x10");
}

// The vdso section comes from a record file, which another user may have
// written: a truncated or corrupted image must leave frames unnamed, never
// crash or read past the image.
TEST(VdsoTest, HostileImagesLeaveFramesUnnamed) {
  auto image = ReadOwnVdso();
  ASSERT_TRUE(image.ok()) << image.status().message();
  CookieTable cookies;
  std::vector<std::string> hostile;
  for (size_t len : {size_t{4}, size_t{16}, size_t{63}, size_t{64}, size_t{200}, image->size() / 2,
                     image->size() - 1}) {
    hostile.push_back(image->substr(0, len));  // truncated
  }
  std::string shoff = *image;  // section headers said to lie far past the end
  for (size_t i = 0x28; i < 0x30; ++i) shoff[i] = '\x7f';
  hostile.push_back(shoff);
  std::string shnum = *image;  // more section headers than the image holds
  shnum[0x3c] = '\xff';
  shnum[0x3d] = '\xff';
  hostile.push_back(shnum);
  for (const auto& bad : hostile) {
    Symbolizer sym(&cookies, nullptr);
    sym.set_vdso(bad);
    for (uint64_t off = 0; off < image->size(); off += 64) {
      Symbol s = sym.Resolve(Frame{false, 0, off, "[vdso]"});
      EXPECT_FALSE(s.Display().empty()) << "image of " << bad.size() << " bytes, offset " << off;
    }
  }
}

}  // namespace
}  // namespace flightrec::recorder::symbolize
