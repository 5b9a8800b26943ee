// BuildOverlay on synthetic CIEs and FDEs: what libunwind will read back from
// the overlay (tables, converted CIE and FDEs) and where it is placed.
#include <gtest/gtest.h>

#include <cstring>

#include "recorder/unwind/cfi.h"

namespace flightrec::recorder::unwind {
namespace {

template <typename T>
T Read(const ElfImage& img, uint64_t vaddr) {
  const uint8_t* p = img.At(vaddr, sizeof(T));
  EXPECT_NE(p, nullptr) << std::hex << vaddr;
  T v{};
  if (p != nullptr) std::memcpy(&v, p, sizeof(T));
  return v;
}

// An image with one read-only segment [0x1000, 0x4000) and one writable one
// [0x10000, 0x11000); nothing is mapped (the overlay is answered first).
ElfImage SyntheticImage() {
  ElfImage img;
  img.loads.push_back({0x1000, 0x3000, 0x1000, 0x3000, false});
  img.loads.push_back({0x10000, 0x1000, 0x5000, 0x1000, true});
  img.lo = 0x1000;
  img.hi = 0x11000;
  return img;
}

// DW_CFA_def_cfa rsp+8; DW_CFA_offset r16 (rip) at cfa-8.
const uint8_t kCieInstr[] = {0x0c, 7, 8, 0x90, 1};
// DW_CFA_advance_loc 1; DW_CFA_def_cfa_offset 16.
const uint8_t kFdeInstr[] = {0x41, 0x0e, 16};

TEST(OverlayTest, DebugFrameIsRewrittenInEhFrameFormBehindASortedTable) {
  ElfImage img = SyntheticImage();
  std::vector<DebugCie> cies = {{1, -8, 16, kCieInstr, sizeof(kCieInstr)}};
  std::vector<FdeEntry> df = {{0x2000, 0x40, 0, 0, kFdeInstr, sizeof(kFdeInstr)},
                              {0x1100, 0x20, 0, 0, kFdeInstr, sizeof(kFdeInstr)}};
  // The real .eh_frame's range: never overwritten by the overlay.
  std::vector<std::pair<uint64_t, uint64_t>> keep_out = {{0x1000, 0x2000}};
  std::string why;
  ASSERT_TRUE(BuildOverlay(&img, {}, cies, df, keep_out, &why)) << why;

  const uint64_t base = img.overlay_vaddr;
  EXPECT_GE(base, 0x2000u);
  EXPECT_LE(base + img.overlay.size(), 0x4000u);
  EXPECT_EQ(img.overlay.size() % 8, 0u) << "whole words for libunwind's reads";
  ASSERT_EQ(img.tables.size(), 1u);
  const CfiTable& t = img.tables[0];
  EXPECT_EQ(t.segbase, base);
  EXPECT_EQ(t.fde_count, 2u);

  // The table: (initial location, FDE address) relative to segbase, sorted.
  uint64_t starts[2] = {0x1100, 0x2000}, ranges[2] = {0x20, 0x40};
  for (int i = 0; i < 2; ++i) {
    int32_t loc = Read<int32_t>(img, t.table_vaddr + 8 * i);
    int32_t fde_rel = Read<int32_t>(img, t.table_vaddr + 8 * i + 4);
    EXPECT_EQ(base + loc, starts[i]);
    const uint64_t fde = base + fde_rel;
    ASSERT_TRUE(img.InOverlay(fde, 16));
    // The FDE: length, CIE pointer (back from this field), pc-relative
    // sdata4 initial location, range, no augmentation data, instructions.
    uint32_t len = Read<uint32_t>(img, fde);
    EXPECT_EQ((len + 4) % 4, 0u);
    uint32_t cie_back = Read<uint32_t>(img, fde + 4);
    uint64_t at = fde + 8, start = 0, range = 0;
    ASSERT_TRUE(ReadEncoded(img, &at, kPePcrel | kPeSdata4, 0, &start));
    ASSERT_TRUE(ReadEncoded(img, &at, kPeSdata4, 0, &range));
    EXPECT_EQ(start, starts[i]);
    EXPECT_EQ(range, ranges[i]);
    EXPECT_EQ(Read<uint8_t>(img, at), 0u);
    EXPECT_EQ(std::memcmp(img.At(at + 1, sizeof(kFdeInstr)), kFdeInstr, sizeof(kFdeInstr)), 0);

    // Its CIE: id 0, version 3, "zR", alignments, return column, the FDE
    // pointer encoding, then the .debug_frame CIE's instructions unchanged.
    const uint64_t cie = fde + 4 - cie_back;
    EXPECT_EQ(Read<uint32_t>(img, cie + 4), 0u);
    const uint8_t* b = img.At(cie + 8, 8 + sizeof(kCieInstr));
    ASSERT_NE(b, nullptr);
    const uint8_t want[] = {3, 'z', 'R', 0, 1, 0x78 /* -8 */, 16, 1, kPePcrel | kPeSdata4};
    EXPECT_EQ(std::memcmp(b, want, sizeof(want)), 0);
    EXPECT_EQ(std::memcmp(b + sizeof(want), kCieInstr, sizeof(kCieInstr)), 0);
  }
  // Both FDEs share the one converted CIE.
  EXPECT_EQ(base + Read<int32_t>(img, t.table_vaddr + 4) + 4 -
                Read<uint32_t>(img, base + Read<int32_t>(img, t.table_vaddr + 4) + 4),
            base + Read<int32_t>(img, t.table_vaddr + 12) + 4 -
                Read<uint32_t>(img, base + Read<int32_t>(img, t.table_vaddr + 12) + 4));
}

TEST(OverlayTest, EhFrameTableKeepsOneEntryPerStart) {
  ElfImage img = SyntheticImage();
  std::vector<FdeEntry> eh = {{0x1200, 0x10, 0x1800, 0, nullptr, 0},
                              {0x1100, 0x10, 0x1900, 0, nullptr, 0},
                              {0x1200, 0x10, 0x1a00, 0, nullptr, 0}};
  std::string why;
  ASSERT_TRUE(BuildOverlay(&img, eh, {}, {}, {{0x1000, 0x2000}}, &why)) << why;
  ASSERT_EQ(img.tables.size(), 1u);
  const CfiTable& t = img.tables[0];
  ASSERT_EQ(t.fde_count, 2u);
  EXPECT_EQ(t.segbase + Read<int32_t>(img, t.table_vaddr), 0x1100u);
  EXPECT_EQ(t.segbase + Read<int32_t>(img, t.table_vaddr + 4), 0x1900u);
  EXPECT_EQ(t.segbase + Read<int32_t>(img, t.table_vaddr + 8), 0x1200u);
  EXPECT_EQ(t.segbase + Read<int32_t>(img, t.table_vaddr + 12), 0x1800u) << "the first one kept";
}

TEST(OverlayTest, RefusesWhenTheReadOnlyPagesHaveNoRoom) {
  ElfImage img = SyntheticImage();
  std::vector<DebugCie> cies = {{1, -8, 16, kCieInstr, sizeof(kCieInstr)}};
  std::vector<FdeEntry> df = {{0x2000, 0x40, 0, 0, kFdeInstr, sizeof(kFdeInstr)}};
  std::string why;
  EXPECT_FALSE(BuildOverlay(&img, {}, cies, df, {{0x1000, 0x4000}}, &why));
  EXPECT_NE(why.find("do not fit"), std::string::npos) << why;
  EXPECT_TRUE(img.overlay.empty());
  EXPECT_TRUE(img.tables.empty());
}

}  // namespace
}  // namespace flightrec::recorder::unwind
