// The unwinder's view of CFI: an ELF image with its search tables, the
// readers of .eh_frame and .debug_frame (cfi_scan.cc) and the overlay that
// presents .debug_frame to libunwind in .eh_frame form (overlay.cc). Shared
// by those files and dwarf_unwinder.cc only.
#pragma once

#include <cstdint>
#include <cstring>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "common/leb128.h"
#include "recorder/elf/image.h"
#include "recorder/model/frame_status.h"

namespace flightrec::recorder::unwind {

using recorder::UnwindCode;

// A libunwind remote search table: sorted (initial location, FDE address)
// pairs of int32s relative to `segbase`, as in .eh_frame_hdr, at link-time
// addresses of the image.
struct CfiTable {
  uint64_t segbase = 0;
  uint64_t table_vaddr = 0;
  uint64_t fde_count = 0;
};

// One file's mapping and the facts unwinding needs, read once per file.
struct ElfImage {
  UnwindStatus status = UnwindCode::kOk;  // or missing_file, no_unwind_info
  std::string detail;                     // why, when not ok
  std::string path;
  elf::MappedElf file;
  struct Seg {
    uint64_t vaddr, memsz, offset, filesz;
    bool writable;
  };
  std::vector<Seg> loads;   // PT_LOAD
  uint64_t lo = 0, hi = 0;  // vaddr range of all PT_LOADs
  // Searched in order: .eh_frame_hdr's table, then the built ones.
  std::vector<CfiTable> tables;
  // Unwind data built at load time (the table of an .eh_frame without
  // .eh_frame_hdr, .debug_frame converted to .eh_frame form) and the
  // link-time address it is presented at (see BuildOverlay).
  uint64_t overlay_vaddr = 0;
  std::vector<uint8_t> overlay;
  std::string sources;  // which CFI the tables come from, for notes

  const uint8_t* bytes() const { return file.bytes(); }
  bool InOverlay(uint64_t vaddr, size_t len) const {
    return !overlay.empty() && vaddr >= overlay_vaddr &&
           elf::RangeInside(vaddr - overlay_vaddr, len, overlay.size());
  }
  // File (or overlay) bytes behind a link-time address, or nullptr (bss,
  // outside).
  const uint8_t* At(uint64_t vaddr, size_t len) const {
    if (InOverlay(vaddr, len)) return overlay.data() + (vaddr - overlay_vaddr);
    // Without sums that could wrap: an image's headers are input.
    for (const auto& s : loads) {
      if (vaddr >= s.vaddr && elf::RangeInside(vaddr - s.vaddr, len, s.filesz)) {
        uint64_t rel = vaddr - s.vaddr;
        if (s.offset > file.size() || !elf::RangeInside(rel, len, file.size() - s.offset)) {
          return nullptr;
        }
        return bytes() + s.offset + rel;
      }
    }
    return nullptr;
  }
  // The link-time address of a file offset in a PT_LOAD (page granular, as
  // the kernel maps segments), or false.
  bool VaddrOfOffset(uint64_t offset, uint64_t* vaddr) const {
    const uint64_t page = 4096;
    for (const auto& s : loads) {
      uint64_t off0 = s.offset & ~(page - 1);
      uint64_t v0 = s.vaddr & ~(page - 1);
      if (offset >= off0 && offset < s.offset + s.filesz) {
        *vaddr = v0 + (offset - off0);
        return true;
      }
    }
    return false;
  }
};

// Bounds-checked little-endian reads over a byte range; a read past the end
// clears ok and returns 0.
struct ByteReader {
  const uint8_t* p;
  const uint8_t* end;
  bool ok = true;

  template <typename T>
  T Get() {
    T v{};
    if (static_cast<size_t>(end - p) < sizeof(T)) {
      ok = false;
      p = end;
      return v;
    }
    std::memcpy(&v, p, sizeof(T));
    p += sizeof(T);
    return v;
  }
  uint64_t Uleb() {
    uint64_t v = 0;
    if (!ReadUleb128(&p, end, &v)) return Fail();
    return v;
  }
  int64_t Sleb() {
    int64_t v = 0;
    if (!ReadSleb128(&p, end, &v)) return Fail();
    return v;
  }
  std::string Str() {
    std::string s;
    for (;;) {
      char c = static_cast<char>(Get<uint8_t>());
      if (!ok || c == 0) return s;
      s += c;
    }
  }
  int Fail() {
    ok = false;
    p = end;
    return 0;
  }
  void Skip(uint64_t n) {
    if (static_cast<uint64_t>(end - p) < n) {
      ok = false;
      p = end;
      return;
    }
    p += n;
  }
};

template <typename T>
void Put(std::vector<uint8_t>* out, T v) {
  const auto* b = reinterpret_cast<const uint8_t*>(&v);
  out->insert(out->end(), b, b + sizeof(T));
}

template <typename T>
void PutAt(std::vector<uint8_t>* out, size_t pos, T v) {
  std::memcpy(out->data() + pos, &v, sizeof(T));
}

// DWARF exception-header pointer encodings (LSB 4.1, "DWARF Exception Header
// Encoding"; gcc's unwind-pe.h).
constexpr uint8_t kPeOmit = 0xff;
constexpr uint8_t kPeAbsptr = 0x00, kPeUdata2 = 0x02, kPeUdata4 = 0x03, kPeUdata8 = 0x04,
                  kPeSdata2 = 0x0a, kPeSdata4 = 0x0b, kPeSdata8 = 0x0c;
constexpr uint8_t kPePcrel = 0x10, kPeDatarel = 0x30;

// The size of a pointer in encoding `enc`, 0 if unsupported.
size_t EncodedSize(uint8_t enc);
// Reads a pointer in encoding `enc` at *vaddr (advanced past it).
bool ReadEncoded(const ElfImage& img, uint64_t* vaddr, uint8_t enc, uint64_t data_base,
                 uint64_t* out);

// An FDE found in a section: the code it covers (link-time addresses) and,
// for .eh_frame, where it is; for .debug_frame, its CIE and instructions.
struct FdeEntry {
  uint64_t start = 0, range = 0;
  uint64_t vaddr = 0;  // .eh_frame: the FDE's own address
  size_t cie = 0;      // .debug_frame: index into the CIEs
  const uint8_t* instr = nullptr;
  size_t instr_len = 0;
};

// A .debug_frame CIE, as the converted CIE needs it.
struct DebugCie {
  uint64_t code_align = 0;
  int64_t data_align = 0;
  uint64_t ra = 0;
  const uint8_t* instr = nullptr;
  size_t instr_len = 0;
};

// Whether a CFA program (DWARF 5 section 6.4.2) is one the .eh_frame form
// expresses unchanged: every instruction known, none with an address operand
// (DW_CFA_set_loc, whose operand .eh_frame encodes with the FDE's pointer
// encoding). Anything else is left out rather than misread.
bool PortableCfaProgram(const uint8_t* p, const uint8_t* end);

// The FDEs of an .eh_frame that has no .eh_frame_hdr, for a built table.
// Only the pointer encodings of the CIEs are needed; libunwind parses the
// rest when it reads the FDE.
std::vector<FdeEntry> ScanEhFrame(const ElfImage& img, const elf::SectionHeader& sec,
                                  std::string* problem);

// The CIEs and FDEs of a .debug_frame (32-bit DWARF, CIE versions 1, 3 and 4
// without augmentation, as GCC and Clang write them), FDEs limited to code
// in the image's loaded range. Pointers in the results point into `bytes`.
void ScanDebugFrame(const ElfImage& img, std::span<const uint8_t> bytes,
                    std::vector<DebugCie>* cies, std::vector<FdeEntry>* fdes, std::string* problem);

// Builds the overlay: the search tables for `eh` (FDEs of an .eh_frame
// without .eh_frame_hdr) and `df` (.debug_frame), and df's CIEs and FDEs
// rewritten in .eh_frame form. Returns false (with why) if it cannot be
// placed.
// See overlay.cc for why this shape.
bool BuildOverlay(ElfImage* img, std::vector<FdeEntry> eh, const std::vector<DebugCie>& cies,
                  std::vector<FdeEntry> df,
                  const std::vector<std::pair<uint64_t, uint64_t>>& keep_out, std::string* why);

// Maps the file and finds its PT_LOADs and CFI: .eh_frame_hdr's table, else
// a table built over .eh_frame, and .debug_frame (for code .eh_frame does
// not cover: crt files bring .eh_frame to binaries whose own code has only
// .debug_frame). The caller has checked the build-id.
std::unique_ptr<ElfImage> LoadImage(const std::string& path);
// The same for an image held in memory (the vDSO), named `name` in notes.
std::unique_ptr<ElfImage> LoadImageFromBytes(const std::string& name, std::string_view bytes);

}  // namespace flightrec::recorder::unwind
