#include <algorithm>
#include <climits>

#include <fmt/format.h>

#include "recorder/unwind/cfi.h"

namespace flightrec::recorder::unwind {

// Builds the overlay (cfi.h).
//
// Why this shape: libunwind's remote API reads unwind information only
// through access_mem, and only in .eh_frame form behind a table of int32
// offsets from a base address (dwarf_search_unwind_table with
// UNW_INFO_FORMAT_REMOTE_TABLE). Its .debug_frame support
// (UNW_INFO_FORMAT_TABLE, dwarf_find_debug_frame) reads the section into the
// unwinder's own memory through internal structures, keeps a process-wide
// list keyed by runtime address ranges, and is not exported by
// libunwind-x86_64 1.6. So a .debug_frame is rewritten once per file into
// the .eh_frame form (CIE id 0, CIE pointers relative to the FDE, initial
// locations pc-relative sdata4, "zR" augmentation; the CFA programs are the
// same bytes) and offered, with its table, at link-time addresses inside the
// image's own read-only segments. That range must be within 2 GiB of the code
// (the table's int32 offsets) and is one that nothing else is read from: the
// accessors only read CFI from an image (never code or data), the real
// .eh_frame/.eh_frame_hdr ranges are kept out, and read-only memory is never
// part of a stack copy, so AccessMem can answer overlay addresses first.
bool BuildOverlay(ElfImage* img, std::vector<FdeEntry> eh, const std::vector<DebugCie>& cies,
                  std::vector<FdeEntry> df,
                  const std::vector<std::pair<uint64_t, uint64_t>>& keep_out, std::string* why) {
  auto by_start = [](const FdeEntry& a, const FdeEntry& b) { return a.start < b.start; };
  auto dedupe = [&](std::vector<FdeEntry>* v) {
    std::stable_sort(v->begin(), v->end(), by_start);
    v->erase(std::unique(v->begin(), v->end(),
                         [](const FdeEntry& a, const FdeEntry& b) { return a.start == b.start; }),
             v->end());
  };
  dedupe(&eh);
  dedupe(&df);
  // The converted CIEs and FDEs, with offsets relative to the start of their
  // area; the pc-relative fields are filled in once the base is known.
  std::vector<uint8_t> area;
  std::vector<size_t> cie_pos(cies.size(), SIZE_MAX);
  std::vector<size_t> fde_pos;
  auto pad = [&](size_t start) {
    while ((area.size() - start) % 4 != 0) area.push_back(0);  // DW_CFA_nop
    PutAt<uint32_t>(&area, start, static_cast<uint32_t>(area.size() - start - 4));
  };
  for (const FdeEntry& f : df) {
    if (cie_pos[f.cie] == SIZE_MAX) {
      const DebugCie& c = cies[f.cie];
      size_t start = area.size();
      cie_pos[f.cie] = start;
      Put<uint32_t>(&area, 0);  // length, set by pad()
      Put<uint32_t>(&area, 0);  // CIE id in .eh_frame
      area.push_back(3);        // version 3: uleb128 return address column
      for (char ch : {'z', 'R', '\0'}) area.push_back(static_cast<uint8_t>(ch));
      AppendUleb128(&area, c.code_align);
      AppendSleb128(&area, c.data_align);
      AppendUleb128(&area, c.ra);
      AppendUleb128(&area, 1);  // augmentation data: the FDE pointer encoding
      area.push_back(kPePcrel | kPeSdata4);
      area.insert(area.end(), c.instr, c.instr + c.instr_len);
      pad(start);
    }
    if (f.range > INT32_MAX) {
      *why = "a .debug_frame FDE covers more than 2 GiB";
      return false;
    }
    size_t start = area.size();
    fde_pos.push_back(start);
    Put<uint32_t>(&area, 0);  // length, set by pad()
    Put<uint32_t>(&area, static_cast<uint32_t>(start + 4 - cie_pos[f.cie]));
    Put<int32_t>(&area, 0);  // initial location, pc-relative: below
    Put<int32_t>(&area, static_cast<int32_t>(f.range));
    AppendUleb128(&area, 0);  // no augmentation data
    area.insert(area.end(), f.instr, f.instr + f.instr_len);
    pad(start);
  }
  const size_t tables = 8 * (eh.size() + df.size());
  const size_t size = (tables + area.size() + 7) & ~size_t{7};

  // Where: the largest stretch of the image's read-only pages outside the
  // keep-out ranges and every writable segment.
  const uint64_t page = 4096;
  std::vector<std::pair<uint64_t, uint64_t>> free_ranges, taken = keep_out;
  for (const auto& s : img->loads) {
    uint64_t lo = std::max(s.vaddr & ~(page - 1), img->lo);
    uint64_t hi = std::min((s.vaddr + s.memsz + page - 1) & ~(page - 1), img->hi);
    if (s.writable) {
      taken.emplace_back(lo, hi);
    } else if (lo < hi) {
      free_ranges.emplace_back(lo, hi);
    }
  }
  for (const auto& [tlo, thi] : taken) {
    std::vector<std::pair<uint64_t, uint64_t>> next;
    for (const auto& [lo, hi] : free_ranges) {
      if (thi <= lo || tlo >= hi) {
        next.emplace_back(lo, hi);
        continue;
      }
      if (tlo > lo) next.emplace_back(lo, tlo);
      if (thi < hi) next.emplace_back(thi, hi);
    }
    free_ranges = std::move(next);
  }
  uint64_t base = 0, best = 0;
  for (const auto& [lo, hi] : free_ranges) {
    uint64_t a = (lo + 7) & ~uint64_t{7};
    if (a < hi && hi - a > best) {
      best = hi - a;
      base = a;
    }
  }
  if (best < size) {
    *why = fmt::format("{} bytes of converted CFI do not fit in the image's read-only pages", size);
    return false;
  }
  const uint64_t area_vaddr = base + tables;
  for (size_t i = 0; i < df.size(); ++i) {
    uint64_t field = area_vaddr + fde_pos[i] + 8;
    int64_t rel = static_cast<int64_t>(df[i].start - field);
    if (rel < INT32_MIN || rel > INT32_MAX) {
      *why = "the image spans more than 2 GiB";
      return false;
    }
    PutAt<int32_t>(&area, fde_pos[i] + 8, static_cast<int32_t>(rel));
    df[i].vaddr = area_vaddr + fde_pos[i];
  }
  std::vector<uint8_t> out;
  out.reserve(size);
  for (const std::vector<FdeEntry>* v : {&eh, &df}) {
    if (v->empty()) continue;
    CfiTable t;
    t.segbase = base;
    t.table_vaddr = base + out.size();
    t.fde_count = v->size();
    for (const FdeEntry& f : *v) {
      int64_t s = static_cast<int64_t>(f.start - base), d = static_cast<int64_t>(f.vaddr - base);
      if (s < INT32_MIN || s > INT32_MAX || d < INT32_MIN || d > INT32_MAX) {
        *why = "the image spans more than 2 GiB";
        return false;
      }
      Put<int32_t>(&out, static_cast<int32_t>(s));
      Put<int32_t>(&out, static_cast<int32_t>(d));
    }
    img->tables.push_back(t);
  }
  out.insert(out.end(), area.begin(), area.end());
  // libunwind reads remote memory in aligned words: a whole number of them
  // keeps every word entirely inside or outside the overlay.
  out.resize((out.size() + 7) & ~size_t{7});
  img->overlay = std::move(out);
  img->overlay_vaddr = base;
  return true;
}

}  // namespace flightrec::recorder::unwind
