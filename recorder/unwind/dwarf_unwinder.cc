#include "recorder/unwind/dwarf_unwinder.h"

#include <elf.h>
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <climits>
#include <cstring>
#include <map>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#define UNW_REMOTE_ONLY
#include <libunwind.h>
#include <zlib.h>
#include <zstd.h>

#ifndef ELFCOMPRESS_ZSTD
#define ELFCOMPRESS_ZSTD 2  // gABI; glibc's elf.h has it from 2.38
#endif

#include <fmt/format.h>

#include "common/regular_file.h"
#include "common/scoped_fd.h"
#include "recorder/perf/record_parser.h"

// Not in libunwind's public headers, but exported by libunwind-x86_64 and
// used the same way by perf (tools/perf/util/unwind-libunwind-local.c): the
// binary search over an .eh_frame_hdr table read through the accessors.
extern "C" int _Ux86_64_dwarf_search_unwind_table(unw_addr_space_t as, unw_word_t ip,
                                                  unw_dyn_info_t* di, unw_proc_info_t* pi,
                                                  int need_unwind_info, void* arg);

namespace flightrec::recorder::unwind {
namespace {

using attribution::CookieTable;
using attribution::Mapping;
using attribution::ProcessTable;
using attribution::UnwindNote;

// ------------------------------------------------------------- ELF images

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
  std::string status = "ok";  // ok | missing_file | no_unwind_info
  std::string detail;         // why, when not ok
  std::string path;
  ScopedMmap map;
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

  const uint8_t* bytes() const { return static_cast<const uint8_t*>(map.data()); }
  bool InOverlay(uint64_t vaddr, size_t len) const {
    return !overlay.empty() && vaddr >= overlay_vaddr &&
           vaddr + len <= overlay_vaddr + overlay.size();
  }
  // File (or overlay) bytes behind a link-time address, or nullptr (bss,
  // outside).
  const uint8_t* At(uint64_t vaddr, size_t len) const {
    if (InOverlay(vaddr, len)) return overlay.data() + (vaddr - overlay_vaddr);
    for (const auto& s : loads) {
      if (vaddr >= s.vaddr && vaddr + len <= s.vaddr + s.filesz) {
        uint64_t off = vaddr - s.vaddr + s.offset;
        if (off + len > map.size()) return nullptr;
        return bytes() + off;
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
    for (int shift = 0; shift < 64; shift += 7) {
      uint8_t b = Get<uint8_t>();
      if (!ok) return 0;
      v |= uint64_t{b & 0x7fu} << shift;
      if ((b & 0x80) == 0) return v;
    }
    ok = false;
    return 0;
  }
  int64_t Sleb() {
    int64_t v = 0;
    int shift = 0;
    uint8_t b = 0;
    do {
      b = Get<uint8_t>();
      if (!ok || shift >= 64) {
        ok = false;
        return 0;
      }
      v |= int64_t{b & 0x7f} << shift;
      shift += 7;
    } while (b & 0x80);
    if (shift < 64 && (b & 0x40)) v |= -(int64_t{1} << shift);
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
  void Skip(uint64_t n) {
    if (static_cast<uint64_t>(end - p) < n) {
      ok = false;
      p = end;
      return;
    }
    p += n;
  }
};

void PutUleb(std::vector<uint8_t>* out, uint64_t v) {
  do {
    uint8_t b = v & 0x7f;
    v >>= 7;
    out->push_back(static_cast<uint8_t>(b | (v ? 0x80 : 0)));
  } while (v);
}

void PutSleb(std::vector<uint8_t>* out, int64_t v) {
  for (;;) {
    uint8_t b = v & 0x7f;
    v >>= 7;
    bool done = (v == 0 && !(b & 0x40)) || (v == -1 && (b & 0x40));
    out->push_back(static_cast<uint8_t>(b | (done ? 0 : 0x80)));
    if (done) return;
  }
}

template <typename T>
void Put(std::vector<uint8_t>* out, T v) {
  const auto* b = reinterpret_cast<const uint8_t*>(&v);
  out->insert(out->end(), b, b + sizeof(T));
}

template <typename T>
void PutAt(std::vector<uint8_t>* out, size_t pos, T v) {
  std::memcpy(out->data() + pos, &v, sizeof(T));
}

// Whether a CFA program (DWARF 5 section 6.4.2) is one the .eh_frame form
// expresses unchanged: every instruction known, none with an address operand
// (DW_CFA_set_loc, whose operand .eh_frame encodes with the FDE's pointer
// encoding). Anything else is left out rather than misread.
bool PortableCfaProgram(const uint8_t* p, const uint8_t* end) {
  ByteReader r{p, end};
  while (r.ok && r.p < r.end) {
    uint8_t op = r.Get<uint8_t>();
    switch (op >> 6) {
      case 1:  // DW_CFA_advance_loc
      case 3:  // DW_CFA_restore
        continue;
      case 2:  // DW_CFA_offset
        r.Uleb();
        continue;
    }
    switch (op) {
      case 0x00:  // nop
      case 0x0a:  // remember_state
      case 0x0b:  // restore_state
        break;
      case 0x02:  // advance_loc1
        r.Skip(1);
        break;
      case 0x03:  // advance_loc2
        r.Skip(2);
        break;
      case 0x04:  // advance_loc4
        r.Skip(4);
        break;
      case 0x06:  // restore_extended
      case 0x07:  // undefined
      case 0x08:  // same_value
      case 0x0d:  // def_cfa_register
      case 0x0e:  // def_cfa_offset
      case 0x2e:  // GNU_args_size
        r.Uleb();
        break;
      case 0x05:  // offset_extended
      case 0x09:  // register
      case 0x0c:  // def_cfa
      case 0x14:  // val_offset
      case 0x2f:  // GNU_negative_offset_extended
        r.Uleb();
        r.Uleb();
        break;
      case 0x11:  // offset_extended_sf
      case 0x12:  // def_cfa_sf
      case 0x15:  // val_offset_sf
        r.Uleb();
        r.Sleb();
        break;
      case 0x13:  // def_cfa_offset_sf
        r.Sleb();
        break;
      case 0x0f:  // def_cfa_expression
        r.Skip(r.Uleb());
        break;
      case 0x10:  // expression
      case 0x16:  // val_expression
        r.Uleb();
        r.Skip(r.Uleb());
        break;
      default:  // set_loc, vendor extensions
        return false;
    }
  }
  return r.ok;
}

// DWARF exception-header pointer encodings (LSB 4.1, "DWARF Exception Header
// Encoding"; gcc's unwind-pe.h).
constexpr uint8_t kPeOmit = 0xff;
constexpr uint8_t kPeAbsptr = 0x00, kPeUdata2 = 0x02, kPeUdata4 = 0x03, kPeUdata8 = 0x04,
                  kPeSdata2 = 0x0a, kPeSdata4 = 0x0b, kPeSdata8 = 0x0c;
constexpr uint8_t kPePcrel = 0x10, kPeDatarel = 0x30;

size_t EncodedSize(uint8_t enc) {
  switch (enc & 0x0f) {
    case kPeAbsptr:
    case kPeUdata8:
    case kPeSdata8:
      return 8;
    case kPeUdata4:
    case kPeSdata4:
      return 4;
    case kPeUdata2:
    case kPeSdata2:
      return 2;
    default:
      return 0;
  }
}

bool ReadEncoded(const ElfImage& img, uint64_t* vaddr, uint8_t enc, uint64_t data_base,
                 uint64_t* out) {
  if (enc == kPeOmit) return false;
  uint64_t at = *vaddr;
  uint64_t v = 0;
  size_t len = EncodedSize(enc);
  if (len == 0) return false;
  const uint8_t* p = img.At(at, len);
  if (p == nullptr) return false;
  if (len == 8) {
    std::memcpy(&v, p, 8);
  } else if (len == 4) {
    uint32_t u;
    std::memcpy(&u, p, 4);
    v = (enc & 0x0f) == kPeSdata4
            ? static_cast<uint64_t>(static_cast<int64_t>(static_cast<int32_t>(u)))
            : u;
  } else {
    uint16_t u;
    std::memcpy(&u, p, 2);
    v = (enc & 0x0f) == kPeSdata2
            ? static_cast<uint64_t>(static_cast<int64_t>(static_cast<int16_t>(u)))
            : u;
  }
  switch (enc & 0x70) {
    case 0:
      break;
    case kPePcrel:
      v += at;
      break;
    case kPeDatarel:
      v += data_base;
      break;
    default:
      return false;
  }
  *vaddr = at + len;
  *out = v;
  return true;
}

struct SectionHeader {
  uint64_t addr = 0, offset = 0, size = 0;
  uint64_t flags = 0;
};

// The named section's header, or nullopt (no section headers, no such
// section, or one that lies outside the file).
std::optional<SectionHeader> FindSection(const ElfImage& img, const Elf64_Ehdr& eh,
                                         std::string_view name) {
  const size_t size = img.map.size();
  if (eh.e_shoff == 0 || eh.e_shentsize != sizeof(Elf64_Shdr) || eh.e_shstrndx >= eh.e_shnum ||
      eh.e_shoff + uint64_t{eh.e_shnum} * sizeof(Elf64_Shdr) > size) {
    return std::nullopt;
  }
  auto shdr = [&](size_t i) {
    Elf64_Shdr sh;
    std::memcpy(&sh, img.bytes() + eh.e_shoff + i * sizeof(Elf64_Shdr), sizeof(sh));
    return sh;
  };
  Elf64_Shdr strtab = shdr(eh.e_shstrndx);
  if (strtab.sh_offset + strtab.sh_size > size) return std::nullopt;
  for (size_t i = 0; i < eh.e_shnum; ++i) {
    Elf64_Shdr sh = shdr(i);
    if (sh.sh_name >= strtab.sh_size || sh.sh_type == SHT_NOBITS) continue;
    const char* n = reinterpret_cast<const char*>(img.bytes() + strtab.sh_offset + sh.sh_name);
    size_t max = strtab.sh_size - sh.sh_name;
    if (strnlen(n, max) != name.size() || std::memcmp(n, name.data(), name.size()) != 0) continue;
    if (sh.sh_offset + sh.sh_size > size) return std::nullopt;
    return SectionHeader{sh.sh_addr, sh.sh_offset, sh.sh_size, sh.sh_flags};
  }
  return std::nullopt;
}

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

// The FDEs of an .eh_frame that has no .eh_frame_hdr, for a built table.
// Only the pointer encodings of the CIEs are needed; libunwind parses the
// rest when it reads the FDE.
std::vector<FdeEntry> ScanEhFrame(const ElfImage& img, const SectionHeader& sec,
                                  std::string* problem) {
  std::vector<FdeEntry> out;
  std::map<uint64_t, uint8_t> cie_enc;  // CIE address -> FDE pointer encoding (kPeOmit: unusable)
  auto encoding_of = [&](uint64_t cie) -> uint8_t {
    if (auto it = cie_enc.find(cie); it != cie_enc.end()) return it->second;
    uint8_t enc = kPeOmit;
    const uint8_t* p = img.At(cie, 8);
    if (p != nullptr) {
      uint32_t len, id;
      std::memcpy(&len, p, 4);
      std::memcpy(&id, p + 4, 4);
      const uint8_t* body = img.At(cie + 8, len >= 4 ? len - 4 : 0);
      if (len != 0xffffffff && len >= 4 && id == 0 && body != nullptr) {
        ByteReader r{body, body + (len - 4)};
        uint8_t version = r.Get<uint8_t>();
        std::string aug = r.Str();
        r.Uleb();
        r.Sleb();
        if (version == 1) {
          r.Get<uint8_t>();
        } else {
          r.Uleb();
        }
        if (r.ok && (version == 1 || version == 3) && aug.empty()) {
          enc = kPeAbsptr;
        } else if (r.ok && (version == 1 || version == 3) && aug[0] == 'z') {
          r.Uleb();  // augmentation data length
          enc = kPeAbsptr;
          for (size_t i = 1; i < aug.size() && r.ok; ++i) {
            if (aug[i] == 'R') {
              enc = r.Get<uint8_t>();
              break;
            } else if (aug[i] == 'L') {
              r.Get<uint8_t>();
            } else if (aug[i] == 'P') {
              uint8_t penc = r.Get<uint8_t>();
              size_t n = EncodedSize(penc);
              if (n == 0) {
                enc = kPeOmit;
                break;
              }
              r.Skip(n);
            } else if (aug[i] != 'S' && aug[i] != 'B') {
              break;  // unknown: the 'R' encoding, if any, cannot be found
            }
          }
          if (!r.ok) enc = kPeOmit;
        }
      }
    }
    cie_enc[cie] = enc;
    return enc;
  };
  uint64_t pos = sec.addr, end = sec.addr + sec.size;
  size_t skipped = 0;
  while (pos + 4 <= end) {
    const uint8_t* p = img.At(pos, 4);
    if (p == nullptr) break;
    uint32_t len;
    std::memcpy(&len, p, 4);
    if (len == 0) break;  // the terminator
    if (len == 0xffffffff) {
      *problem = "64-bit DWARF .eh_frame entries are not supported";
      break;
    }
    uint64_t next = pos + 4 + len;
    if (next > end || len < 4) {
      *problem = fmt::format(".eh_frame entry at {:#x} runs past the section's end", pos);
      break;
    }
    const uint8_t* idp = img.At(pos + 4, 4);
    if (idp == nullptr) break;
    uint32_t id;
    std::memcpy(&id, idp, 4);
    if (id != 0) {  // an FDE: id is the distance back to its CIE
      uint8_t enc = encoding_of(pos + 4 - id);
      uint64_t at = pos + 8, start = 0, range = 0;
      if (enc != kPeOmit && ReadEncoded(img, &at, enc, 0, &start) &&
          ReadEncoded(img, &at, enc & 0x0f, 0, &range)) {
        if (range != 0) out.push_back({start, range, pos, 0, nullptr, 0});
      } else {
        ++skipped;
      }
    }
    pos = next;
  }
  if (skipped && problem->empty()) {
    *problem = fmt::format("{} .eh_frame FDEs with unsupported encodings left out", skipped);
  }
  return out;
}

// The bytes of a non-allocated section, decompressed if it is SHF_COMPRESSED
// (ld --compress-debug-sections: zlib or zstd), into *storage; or an empty
// span and why.
std::span<const uint8_t> SectionBytes(const ElfImage& img, const SectionHeader& sec,
                                      std::vector<uint8_t>* storage, std::string* problem) {
  const uint8_t* raw = img.bytes() + sec.offset;
  if ((sec.flags & SHF_COMPRESSED) == 0) return {raw, sec.size};
  Elf64_Chdr ch;
  if (sec.size < sizeof(ch)) {
    *problem = "truncated compressed section";
    return {};
  }
  std::memcpy(&ch, raw, sizeof(ch));
  // A .debug_frame is a few percent of the code; a size beyond 1 GiB is a
  // corrupt header, not something to allocate.
  if (ch.ch_size > (uint64_t{1} << 30)) {
    *problem = "compressed section claims more than 1 GiB";
    return {};
  }
  storage->resize(ch.ch_size);
  const uint8_t* src = raw + sizeof(ch);
  size_t src_len = sec.size - sizeof(ch);
  if (ch.ch_type == ELFCOMPRESS_ZLIB) {
    uLongf out = static_cast<uLongf>(ch.ch_size);
    if (uncompress(storage->data(), &out, src, static_cast<uLong>(src_len)) == Z_OK &&
        out == ch.ch_size) {
      return {storage->data(), storage->size()};
    }
  } else if (ch.ch_type == ELFCOMPRESS_ZSTD) {
    size_t n = ZSTD_decompress(storage->data(), storage->size(), src, src_len);
    if (!ZSTD_isError(n) && n == ch.ch_size) return {storage->data(), storage->size()};
  } else {
    *problem = fmt::format("unknown section compression {}", ch.ch_type);
    return {};
  }
  *problem = "compressed section does not decompress";
  return {};
}

// The CIEs and FDEs of a .debug_frame (32-bit DWARF, CIE versions 1, 3 and 4
// without augmentation, as GCC and Clang write them), FDEs limited to code
// in the image's loaded range. Pointers in the results point into `bytes`.
void ScanDebugFrame(const ElfImage& img, std::span<const uint8_t> bytes,
                    std::vector<DebugCie>* cies, std::vector<FdeEntry>* fdes,
                    std::string* problem) {
  const uint8_t* base = bytes.data();
  const uint64_t size = bytes.size();
  std::map<uint64_t, size_t> cie_at;  // section offset -> index, or SIZE_MAX if unusable
  auto cie_index = [&](uint64_t off) -> size_t {
    if (auto it = cie_at.find(off); it != cie_at.end()) return it->second;
    size_t idx = SIZE_MAX;
    if (off + 8 <= size) {
      uint32_t len, id;
      std::memcpy(&len, base + off, 4);
      std::memcpy(&id, base + off + 4, 4);
      if (len != 0xffffffff && len >= 4 && off + 4 + len <= size && id == 0xffffffff) {
        ByteReader r{base + off + 8, base + off + 4 + len};
        DebugCie c;
        uint8_t version = r.Get<uint8_t>();
        std::string aug = r.Str();
        if (version == 4) {
          uint8_t address_size = r.Get<uint8_t>();
          uint8_t segment_size = r.Get<uint8_t>();
          if (address_size != 8 || segment_size != 0) version = 0;
        }
        c.code_align = r.Uleb();
        c.data_align = r.Sleb();
        c.ra = version == 1 ? r.Get<uint8_t>() : r.Uleb();
        c.instr = r.p;
        c.instr_len = static_cast<size_t>(r.end - r.p);
        if (r.ok && (version == 1 || version == 3 || version == 4) && aug.empty() &&
            PortableCfaProgram(c.instr, c.instr + c.instr_len)) {
          idx = cies->size();
          cies->push_back(c);
        }
      }
    }
    cie_at[off] = idx;
    return idx;
  };
  uint64_t off = 0;
  size_t skipped = 0;
  while (off + 4 <= size) {
    uint32_t len;
    std::memcpy(&len, base + off, 4);
    if (len == 0xffffffff) {
      *problem = "64-bit DWARF .debug_frame entries are not supported";
      break;
    }
    uint64_t next = off + 4 + len;
    if (next > size) {
      *problem = fmt::format("the entry at {:#x} runs past the section's end", off);
      break;
    }
    if (len >= 4) {
      uint32_t id;
      std::memcpy(&id, base + off + 4, 4);
      if (id != 0xffffffff) {  // an FDE: id is its CIE's offset in the section
        ByteReader r{base + off + 8, base + next};
        uint64_t start = r.Get<uint64_t>();
        uint64_t range = r.Get<uint64_t>();
        size_t cie = cie_index(id);
        bool in_image = start >= img.lo && start < img.hi && range <= img.hi - start;
        if (!r.ok || cie == SIZE_MAX || !PortableCfaProgram(r.p, r.end)) {
          ++skipped;
        } else if (in_image && range != 0) {  // others: code the linker discarded
          fdes->push_back({start, range, 0, cie, r.p, static_cast<size_t>(r.end - r.p)});
        }
      }
    }
    off = next;
  }
  if (skipped && problem->empty()) {
    *problem = fmt::format("{} .debug_frame FDEs in an unsupported form left out", skipped);
  }
}

// Builds the overlay: the search tables for `eh` (FDEs of an .eh_frame
// without .eh_frame_hdr) and `df` (.debug_frame), and df's CIEs and FDEs
// rewritten in .eh_frame form. Returns false (with why) if it cannot be
// placed.
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
      PutUleb(&area, c.code_align);
      PutSleb(&area, c.data_align);
      PutUleb(&area, c.ra);
      PutUleb(&area, 1);  // augmentation data: the FDE pointer encoding
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
    PutUleb(&area, 0);  // no augmentation data
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

// Maps the file and finds its PT_LOADs and CFI: .eh_frame_hdr's table, else
// a table built over .eh_frame, and .debug_frame (for code .eh_frame does
// not cover: crt files bring .eh_frame to binaries whose own code has only
// .debug_frame). The caller has checked the build-id.
std::unique_ptr<ElfImage> LoadImage(const std::string& path) {
  auto img = std::make_unique<ElfImage>();
  img->path = path;
  ScopedFd fd = OpenRegularFile(path);
  struct stat st {};
  if (!fd || fstat(fd.get(), &st) != 0 || st.st_size < static_cast<off_t>(sizeof(Elf64_Ehdr))) {
    img->status = "missing_file";
    img->detail = "cannot read";
    return img;
  }
  void* p = mmap(nullptr, static_cast<size_t>(st.st_size), PROT_READ, MAP_PRIVATE, fd.get(), 0);
  if (p == MAP_FAILED) {
    img->status = "missing_file";
    img->detail = "cannot map";
    return img;
  }
  img->map = ScopedMmap(p, static_cast<size_t>(st.st_size));
  Elf64_Ehdr eh;
  std::memcpy(&eh, p, sizeof(eh));
  if (std::memcmp(eh.e_ident, ELFMAG, SELFMAG) != 0 || eh.e_ident[EI_CLASS] != ELFCLASS64 ||
      eh.e_machine != EM_X86_64 || eh.e_phentsize != sizeof(Elf64_Phdr) ||
      eh.e_phoff + uint64_t{eh.e_phnum} * sizeof(Elf64_Phdr) > img->map.size()) {
    img->status = "no_unwind_info";
    img->detail = "not an x86-64 ELF file";
    return img;
  }
  uint64_t hdr = 0, hdr_size = 0;
  bool has_hdr = false;
  bool first = true;
  for (int i = 0; i < eh.e_phnum; ++i) {
    Elf64_Phdr ph;
    std::memcpy(&ph, img->bytes() + eh.e_phoff + i * sizeof(Elf64_Phdr), sizeof(ph));
    if (ph.p_type == PT_LOAD) {
      img->loads.push_back(
          {ph.p_vaddr, ph.p_memsz, ph.p_offset, ph.p_filesz, (ph.p_flags & PF_W) != 0});
      uint64_t lo = ph.p_vaddr, hi = ph.p_vaddr + ph.p_memsz;
      img->lo = first ? lo : std::min(img->lo, lo);
      img->hi = first ? hi : std::max(img->hi, hi);
      first = false;
    } else if (ph.p_type == PT_GNU_EH_FRAME) {
      hdr = ph.p_vaddr;
      hdr_size = ph.p_memsz;
      has_hdr = true;
    }
  }
  std::vector<std::string> problems;
  std::vector<std::pair<uint64_t, uint64_t>> keep_out;
  auto eh_frame = FindSection(*img, eh, ".eh_frame");
  if (has_hdr) {
    // .eh_frame_hdr: version, eh_frame_ptr_enc, fde_count_enc, table_enc,
    // then eh_frame_ptr, fde_count and the sorted (initial_location, fde)
    // table.
    const uint8_t* h = img->At(hdr, 4);
    uint64_t cur = hdr + 4, eh_frame_ptr = 0, count = 0;
    if (h != nullptr && h[0] == 1 && ReadEncoded(*img, &cur, h[1], hdr, &eh_frame_ptr) &&
        ReadEncoded(*img, &cur, h[2], hdr, &count) && h[3] == (kPeDatarel | kPeSdata4) &&
        count > 0) {
      img->tables.push_back({hdr, cur, count});
      img->sources = ".eh_frame_hdr";
      keep_out.emplace_back(hdr, hdr + hdr_size);
      if (eh_frame) {
        keep_out.emplace_back(eh_frame->addr, eh_frame->addr + eh_frame->size);
      } else {
        // Where the .eh_frame ends is unknown: keep its whole segment.
        for (const auto& s : img->loads) {
          if (eh_frame_ptr >= s.vaddr && eh_frame_ptr < s.vaddr + s.memsz) {
            keep_out.emplace_back(s.vaddr & ~uint64_t{4095}, s.vaddr + s.memsz);
          }
        }
      }
    } else if (count != 0 || h == nullptr || h[0] != 1) {
      // libunwind's lookup needs the datarel|sdata4 table every linker
      // writes; an empty table (no FDEs) is no loss.
      problems.push_back("unusable .eh_frame_hdr");
    }
  }
  std::vector<FdeEntry> eh_fdes;
  if (img->tables.empty() && eh_frame && eh_frame->addr != 0) {
    std::string problem;
    eh_fdes = ScanEhFrame(*img, *eh_frame, &problem);
    if (!problem.empty()) problems.push_back(problem);
    if (!eh_fdes.empty()) keep_out.emplace_back(eh_frame->addr, eh_frame->addr + eh_frame->size);
  }
  std::vector<DebugCie> cies;
  std::vector<FdeEntry> df_fdes;
  std::vector<uint8_t> decompressed;  // behind df_fdes' pointers until the overlay is built
  if (auto debug_frame = FindSection(*img, eh, ".debug_frame")) {
    std::string problem;
    auto bytes = SectionBytes(*img, *debug_frame, &decompressed, &problem);
    if (!bytes.empty()) ScanDebugFrame(*img, bytes, &cies, &df_fdes, &problem);
    if (!problem.empty()) problems.push_back(".debug_frame: " + problem);
  }
  if (!eh_fdes.empty() || !df_fdes.empty()) {
    std::string why, built = eh_fdes.empty() ? "" : ".eh_frame (table built)";
    if (!df_fdes.empty()) built += std::string(built.empty() ? "" : ", ") + ".debug_frame";
    if (BuildOverlay(img.get(), std::move(eh_fdes), cies, std::move(df_fdes), keep_out, &why)) {
      img->sources += (img->sources.empty() ? "" : ", ") + built;
    } else {
      problems.push_back(why);
    }
  }
  if (img->tables.empty()) {
    img->status = "no_unwind_info";
    img->detail = "no .eh_frame_hdr, .eh_frame or .debug_frame";
    for (const auto& pr : problems) img->detail += "; " + pr;
  }
  return img;
}

// ------------------------------------------------------------- unwinder

// The CFI row for [start, end): libunwind's register-state record
// (dwarf_reg_state_t) as unw_reg_states_iterate hands it out, applied to a
// cursor with unw_apply_reg_state.
struct Rule {
  uint64_t end = 0;
  std::unique_ptr<uint64_t[]> data;  // 8-aligned copy of the record
};

// One ELF image at one load bias, with the rules found in it so far. Rules
// are kept per bias, not per file: a rule whose CFA is a DWARF expression
// (PLT entries) holds the runtime address of that expression.
struct Placement {
  const ElfImage* img = nullptr;
  uint64_t bias = 0;               // runtime - link-time address
  uint64_t lo = 0, hi = 0;         // runtime range of the image's PT_LOADs
  std::map<uint64_t, Rule> rules;  // by runtime start address
};

// What one process's address space holds, as far as unwinding has needed
// it; forgotten when the process's mappings change.
struct Space {
  uint64_t signature = 0;
  std::vector<Placement*> placed;
  std::vector<Placement*> overlaid;  // the placed images with built CFI (usually none)
};

class Unwinder;

// The sample being unwound: what the accessors read from.
struct Ctx {
  const Sample* sample = nullptr;
  const ProcessTable* table = nullptr;
  const CookieTable* cookies = nullptr;
  Unwinder* self = nullptr;
  Space* space = nullptr;
  uint64_t sp = 0;
  int reg_index[UNW_TDEP_LAST_REG + 1];  // libunwind reg -> index in regs, -1
  // The address whose CFI is wanted (ip for the leaf, return address - 1
  // for callers, so a call that ends a function finds that function) and
  // where rules found for it go.
  uint64_t lookup = 0;
  Placement* collect = nullptr;
  // Why the walk stopped, set by the accessors: the status, the detailed
  // where for the sample's note, and a coarse place for the statistics.
  std::string status;
  std::string where;
  std::string place;
  Placement* last = nullptr;  // the image of the last memory read, tried first
};

// libunwind x86-64 register numbers -> perf_regs.h bits.
int PerfRegOf(int unw_reg) {
  switch (unw_reg) {
    case UNW_X86_64_RAX:
      return perf::kPerfRegAx;
    case UNW_X86_64_RDX:
      return 3;
    case UNW_X86_64_RCX:
      return 2;
    case UNW_X86_64_RBX:
      return perf::kPerfRegBx;
    case UNW_X86_64_RSI:
      return 4;
    case UNW_X86_64_RDI:
      return 5;
    case UNW_X86_64_RBP:
      return perf::kPerfRegBp;
    case UNW_X86_64_RSP:
      return perf::kPerfRegSp;
    case UNW_X86_64_RIP:
      return perf::kPerfRegIp;
    default:
      if (unw_reg >= UNW_X86_64_R8 && unw_reg <= UNW_X86_64_R15) {
        return 16 + (unw_reg - UNW_X86_64_R8);  // PERF_REG_X86_R8..R15
      }
      return -1;
  }
}

// Why libunwind's own stepping (unw_step) is not used: with a register-rule
// cache its every step takes the cache lock with sigprocmask (two syscalls a
// frame, 3/4 of the time of a first version), and without one it parses the
// FDE again for every frame. Instead the rules of a whole FDE are taken once
// with unw_reg_states_iterate, kept per image placement, and applied with
// unw_apply_reg_state — the external-cache API libunwind provides for this.
class Unwinder : public DwarfUnwinder {
 public:
  Unwinder() {
    std::memset(&accessors_, 0, sizeof(accessors_));
    accessors_.find_proc_info = &FindProcInfo;
    accessors_.put_unwind_info = &PutUnwindInfo;
    accessors_.get_dyn_info_list_addr = &GetDynInfoListAddr;
    accessors_.access_mem = &AccessMem;
    accessors_.access_reg = &AccessReg;
    accessors_.access_fpreg = &AccessFpreg;
    accessors_.resume = &Resume;
    accessors_.get_proc_name = &GetProcName;
    as_ = unw_create_addr_space(&accessors_, 0);
    unw_set_caching_policy(as_, UNW_CACHE_NONE);
  }
  ~Unwinder() override {
    if (as_ != nullptr) unw_destroy_addr_space(as_);
  }
  Unwinder(const Unwinder&) = delete;
  Unwinder& operator=(const Unwinder&) = delete;

  const UnwindStats& stats() const override { return stats_; }

  std::vector<uint64_t> Unwind(const Sample& s, const ProcessTable& table,
                               const CookieTable& cookies, UnwindNote* note) override {
    std::vector<uint64_t> ips;
    ips.reserve(64);  // one allocation for most stacks, not one per doubling
    ++stats_.samples;
    Ctx ctx;
    ctx.sample = &s;
    ctx.table = &table;
    ctx.cookies = &cookies;
    ctx.self = this;
    const UserStack& us = s.user_stack;
    // Where each register sits in the sample: the same for every sample of a
    // backend, so computed once per register mask.
    if (us.regs_mask != index_mask_ || !index_valid_) {
      for (int r = 0; r <= UNW_TDEP_LAST_REG; ++r) {
        int bit = PerfRegOf(r);
        index_[r] = -1;
        if (bit >= 0 && (us.regs_mask >> bit) & 1) {
          index_[r] = __builtin_popcountll(us.regs_mask & ((1ull << bit) - 1));
        }
      }
      index_mask_ = us.regs_mask;
      index_valid_ = true;
    }
    for (int r = 0; r <= UNW_TDEP_LAST_REG; ++r) {
      ctx.reg_index[r] =
          index_[r] >= 0 && static_cast<size_t>(index_[r]) < us.regs.size() ? index_[r] : -1;
    }
    if (ctx.reg_index[UNW_X86_64_RIP] < 0 || ctx.reg_index[UNW_X86_64_RSP] < 0) {
      Finish(note, "error", "no ip/sp registers in the sample", "samples without ip/sp");
      return ips;
    }
    ctx.sp = us.regs[ctx.reg_index[UNW_X86_64_RSP]];
    uint64_t ip = us.regs[ctx.reg_index[UNW_X86_64_RIP]];
    ctx.space = SpaceFor(s.pid, table);
    ips.push_back(ip);

    unw_cursor_t cursor;
    int r = unw_init_remote(&cursor, as_, &ctx);
    if (r < 0) {
      Finish(note, "error", fmt::format("unw_init_remote: {}", unw_strerror(r)), "unw_init_remote");
      return ips;
    }
    bool complete = false;
    while (ips.size() < kMaxFrames) {
      ctx.lookup = ips.size() == 1 ? ip : ip - 1;
      const Rule* rule = FindRule(&ctx, &cursor);
      if (rule == nullptr) break;
      r = unw_apply_reg_state(&cursor, rule->data.get());
      if (r < 0) {
        if (ctx.status.empty()) {
          ctx.status = "error";
          ctx.where = fmt::format("{}: {}", Describe(ctx, ip, ips.size() == 1),
                                  unw_strerror(static_cast<unw_error_t>(-r)));
          ctx.place = FileOf(ctx, ip, ips.size() == 1);
        }
        break;
      }
      unw_word_t next = 0;
      unw_get_reg(&cursor, UNW_REG_IP, &next);
      // An undefined return address column (r == 0) is the ABI's end of the
      // call chain (_start, clone); so is a null return address.
      if (r == 0 || next == 0) {
        complete = true;
        break;
      }
      ip = next;
      ips.push_back(ip);
    }
    stats_.frames += ips.size();
    if (complete) {
      ++stats_.complete;
      note->status = "ok";
      note->where.clear();
    } else if (ips.size() >= kMaxFrames) {
      std::string limit = fmt::format("{} frames (the limit)", kMaxFrames);
      Finish(note, "truncated", limit, limit);
    } else {
      Finish(note, ctx.status.empty() ? "error" : ctx.status, ctx.where, ctx.place);
    }
    return ips;
  }

 private:
  void Finish(UnwindNote* note, const std::string& status, std::string where,
              const std::string& place) {
    if (status == "truncated") ++stats_.truncated;
    if (status == "missing_file") ++stats_.missing_file;
    if (status == "no_unwind_info") ++stats_.no_unwind_info;
    if (status == "error") ++stats_.errors;
    ++stats_.stops[{status, place.empty() ? "(unknown)" : place}];
    note->status = status;
    note->where = std::move(where);
  }

  // "file+0xoffset" of a frame, for notes.
  static std::string Describe(const Ctx& ctx, uint64_t ip, bool leaf) {
    uint64_t look = leaf ? ip : ip - 1;
    const Mapping* m = ctx.table->Lookup(ctx.sample->pid, look);
    if (m == nullptr) return fmt::format("{:#x} (unmapped)", ip);
    if (m->cookie == 0) {
      return fmt::format("{}+{:#x}", m->name.empty() ? "[anon]" : m->name, ip - m->start);
    }
    const attribution::Cookie* c = ctx.cookies->Get(m->cookie);
    return fmt::format("{}+{:#x}", c ? c->path : "?", look - m->start + m->pgoff);
  }

  // The file (or special mapping) of a frame, for the statistics.
  static std::string FileOf(const Ctx& ctx, uint64_t ip, bool leaf) {
    const Mapping* m = ctx.table->Lookup(ctx.sample->pid, leaf ? ip : ip - 1);
    if (m == nullptr) return "unmapped addresses";
    if (m->cookie == 0) return m->name.empty() ? "[anon]" : m->name;
    const attribution::Cookie* c = ctx.cookies->Get(m->cookie);
    return c ? c->path : "unknown files";
  }

  // The process's mappings, hashed: a changed signature (exec, dlopen over a
  // dlclosed library) makes the space forget where its images were.
  static uint64_t Signature(const ProcessTable& table, uint32_t pid) {
    const attribution::Process* p = table.Find(pid);
    if (p == nullptr) return 0;
    uint64_t h = 0xcbf29ce484222325ull;
    auto mix = [&h](uint64_t v) {
      h ^= v;
      h *= 0x100000001b3ull;
    };
    for (const auto& [start, m] : p->maps) {
      mix(start);
      mix(m.end);
      mix(m.pgoff);
      mix(m.cookie);
    }
    return h;
  }

  Space* SpaceFor(uint32_t pid, const ProcessTable& table) {
    uint64_t sig = Signature(table, pid);
    Space& sp = spaces_[pid];
    if (sp.signature != sig) {
      sp.placed.clear();
      sp.overlaid.clear();
      sp.signature = sig;
    }
    return &sp;
  }

  const ElfImage* Image(const attribution::Cookie& c) {
    std::string key = c.path + '\n' + c.build_id;
    auto it = images_.find(key);
    if (it != images_.end()) return it->second.get();
    std::unique_ptr<ElfImage> img;
    bool readable = access(c.path.c_str(), R_OK) == 0;
    if (!readable || (!c.build_id.empty() &&
                      attribution::HexBuildId(attribution::ReadBuildId(c.path)) != c.build_id)) {
      // Gone, or rebuilt since: its CFI would describe other code.
      img = std::make_unique<ElfImage>();
      img->path = c.path;
      img->status = "missing_file";
      img->detail = readable ? "build-id differs" : "not found";
    } else {
      img = LoadImage(c.path);
    }
    return images_.emplace(key, std::move(img)).first->second.get();
  }

  // The placed image containing a runtime address of the sample's process,
  // placing it (from the process table's executable mapping) on first use.
  Placement* Place(Ctx* ctx, uint64_t addr) {
    for (Placement* p : ctx->space->placed) {
      if (addr >= p->lo && addr < p->hi) return p;
    }
    const Mapping* m = ctx->table->Lookup(ctx->sample->pid, addr);
    if (m == nullptr) {
      ctx->status = "error";
      ctx->where = fmt::format("{:#x}: not in any mapping", addr);
      ctx->place = "unmapped addresses";
      return nullptr;
    }
    if (m->cookie == 0) {
      // [vdso], JIT code, anonymous memory: no file to read CFI from.
      ctx->status = "missing_file";
      ctx->place = m->name.empty() ? "[anon]" : m->name;
      ctx->where = fmt::format("{}+{:#x}", ctx->place, addr - m->start);
      return nullptr;
    }
    const attribution::Cookie* c = ctx->cookies->Get(m->cookie);
    if (c == nullptr) {
      ctx->status = "error";
      ctx->where = fmt::format("{:#x}: unknown file", addr);
      ctx->place = "unknown files";
      return nullptr;
    }
    const ElfImage* img = Image(*c);
    uint64_t vaddr = 0;
    if (img->status != "ok" || !img->VaddrOfOffset(m->pgoff, &vaddr)) {
      ctx->status = img->status == "ok" ? "no_unwind_info" : img->status;
      ctx->where = fmt::format("{}+{:#x}", c->path, addr - m->start + m->pgoff);
      ctx->place = c->path;
      if (!img->detail.empty()) {
        ctx->where += " (" + img->detail + ")";
        ctx->place += " (" + img->detail + ")";
      }
      return nullptr;
    }
    uint64_t bias = m->start - vaddr;
    auto& slot = placements_[{img, bias}];
    if (!slot) {
      slot = std::make_unique<Placement>();
      slot->img = img;
      slot->bias = bias;
      slot->lo = img->lo + bias;
      slot->hi = img->hi + bias;
    }
    ctx->space->placed.push_back(slot.get());
    if (!img->overlay.empty()) ctx->space->overlaid.push_back(slot.get());
    return slot.get();
  }

  // The rule for ctx->lookup: from the placement's rules, or by reading the
  // FDE that covers it (all of its rows at once).
  const Rule* FindRule(Ctx* ctx, unw_cursor_t* cursor) {
    Placement* p = Place(ctx, ctx->lookup);
    if (p == nullptr) return nullptr;
    // A direct-mapped memo of (placement, address) -> rule in front of the
    // rules' ordered map: most frames of most samples were seen before.
    // Entries never go stale (placements and their rules live as long as
    // the unwinder).
    MemoEntry& m = memo_[(ctx->lookup * 0x9e3779b97f4a7c15ull) >> (64 - kMemoBits)];
    if (m.placement == p && m.addr == ctx->lookup) return m.rule;
    const Rule* rule = RuleIn(*p, ctx->lookup);
    if (rule == nullptr) {
      ctx->collect = p;
      int r = unw_reg_states_iterate(cursor, &Collect, ctx);
      ctx->collect = nullptr;
      if (r < 0) {
        if (ctx->status.empty()) {
          ctx->status = "error";
          ctx->where = fmt::format("{}+{:#x}: {}", p->img->path, ctx->lookup - p->bias,
                                   unw_strerror(static_cast<unw_error_t>(-r)));
          ctx->place = p->img->path;
        }
        return nullptr;
      }
      rule = RuleIn(*p, ctx->lookup);
      if (rule == nullptr) {
        ctx->status = "no_unwind_info";
        ctx->where = fmt::format("{}+{:#x} (no CFI row)", p->img->path, ctx->lookup - p->bias);
        ctx->place = p->img->path;
        return nullptr;
      }
    }
    m = MemoEntry{p, ctx->lookup, rule};
    return rule;
  }

  static const Rule* RuleIn(const Placement& p, uint64_t addr) {
    auto it = p.rules.upper_bound(addr);
    if (it == p.rules.begin()) return nullptr;
    --it;
    return addr < it->second.end ? &it->second : nullptr;
  }

  static int Collect(void* token, void* data, size_t size, unw_word_t start, unw_word_t end) {
    Ctx* ctx = static_cast<Ctx*>(token);
    Rule rule;
    rule.end = end;
    rule.data.reset(new uint64_t[(size + 7) / 8]);
    std::memcpy(rule.data.get(), data, size);
    ctx->collect->rules.emplace(start, std::move(rule));
    return 0;
  }

  // ---- libunwind accessors (arg = Ctx*)

  static int FindProcInfo(unw_addr_space_t as, unw_word_t, unw_proc_info_t* pi,
                          int need_unwind_info, void* arg) {
    Ctx* ctx = static_cast<Ctx*>(arg);
    // libunwind asks for the cursor's ip; the row wanted is ctx->lookup's.
    unw_word_t ip = ctx->lookup;
    Placement* p = ctx->self->Place(ctx, ip);
    // A hard error, not -UNW_ENOINFO: libunwind would then guess the caller
    // from rbp (Gstep.c), which without frame pointers is a wrong frame.
    if (p == nullptr) return -UNW_EINVAL;
    const ElfImage* img = p->img;
    // .eh_frame_hdr's table first, then the built ones (the code of a
    // binary built without .eh_frame has its CFI in .debug_frame).
    int r = -UNW_ENOINFO;
    for (const CfiTable& t : img->tables) {
      unw_dyn_info_t di;
      std::memset(&di, 0, sizeof(di));
      di.format = UNW_INFO_FORMAT_REMOTE_TABLE;
      di.start_ip = p->lo;
      di.end_ip = p->hi;
      di.u.rti.segbase = t.segbase + p->bias;
      di.u.rti.table_data = t.table_vaddr + p->bias;
      // In words; each entry is two int32 (initial location, FDE address).
      di.u.rti.table_len = t.fde_count * 8 / sizeof(unw_word_t);
      r = _Ux86_64_dwarf_search_unwind_table(as, ip, &di, pi, need_unwind_info, arg);
      if (r != -UNW_ENOINFO) break;
    }
    if (r == -UNW_ENOINFO) {
      ctx->status = "no_unwind_info";
      ctx->where = fmt::format("{}+{:#x} (no FDE in {})", img->path, ip - p->bias, img->sources);
      ctx->place = img->path;
      return -UNW_EINVAL;
    }
    return r;
  }

  static void PutUnwindInfo(unw_addr_space_t, unw_proc_info_t*, void*) {}

  static int GetDynInfoListAddr(unw_addr_space_t, unw_word_t*, void*) { return -UNW_ENOINFO; }

  static int AccessMem(unw_addr_space_t, unw_word_t addr, unw_word_t* valp, int write, void* arg) {
    if (write) return -UNW_EINVAL;
    Ctx* ctx = static_cast<Ctx*>(arg);
    // CFI built at load time, at addresses in an image's read-only pages
    // that a stack copy never holds (BuildOverlay): answered first, as a
    // copy running past the stack's end into an image would hold the file's
    // bytes there instead.
    for (Placement* q : ctx->space->overlaid) {
      if (q->img->InOverlay(addr - q->bias, sizeof(unw_word_t))) {
        std::memcpy(valp, q->img->At(addr - q->bias, sizeof(unw_word_t)), sizeof(unw_word_t));
        return 0;
      }
    }
    const std::vector<uint8_t>& stack = ctx->sample->user_stack.stack;
    // The stack copy starts at the sampled sp.
    if (addr >= ctx->sp && addr - ctx->sp + sizeof(unw_word_t) <= stack.size()) {
      std::memcpy(valp, stack.data() + (addr - ctx->sp), sizeof(unw_word_t));
      return 0;
    }
    // Code and unwind tables: from the file behind the image.
    Placement* p = ctx->last;
    if (p == nullptr || addr < p->lo || addr >= p->hi) {
      p = nullptr;
      for (Placement* q : ctx->space->placed) {
        if (addr >= q->lo && addr < q->hi) {
          p = ctx->last = q;
          break;
        }
      }
    }
    if (p != nullptr) {
      if (const uint8_t* b = p->img->At(addr - p->bias, sizeof(unw_word_t))) {
        std::memcpy(valp, b, sizeof(unw_word_t));
        return 0;
      }
    }
    // Above the copy, on the stack: the copy was too short for this frame.
    if (addr >= ctx->sp) {
      ctx->status = "truncated";
      ctx->where = fmt::format("stack copy of {} bytes ends at sp+{:#x}, frame needs sp+{:#x}",
                               stack.size(), stack.size(), addr - ctx->sp);
      ctx->place = fmt::format("stack copy of {} bytes", stack.size());
    } else if (ctx->status.empty()) {
      ctx->status = "error";
      ctx->where = fmt::format("read of {:#x} below the stack pointer", addr);
      ctx->place = "reads below the stack pointer";
    }
    return -UNW_EINVAL;
  }

  static int AccessReg(unw_addr_space_t, unw_regnum_t reg, unw_word_t* valp, int write, void* arg) {
    if (write) return -UNW_EREADONLYREG;
    Ctx* ctx = static_cast<Ctx*>(arg);
    if (reg < 0 || reg > UNW_TDEP_LAST_REG || ctx->reg_index[reg] < 0) {
      // A caller-saved register the sample does not carry: no CFI computes a
      // CFA or return address from one, so its value never matters.
      *valp = 0;
      return 0;
    }
    *valp = ctx->sample->user_stack.regs[ctx->reg_index[reg]];
    return 0;
  }

  static int AccessFpreg(unw_addr_space_t, unw_regnum_t, unw_fpreg_t*, int, void*) {
    return -UNW_EINVAL;
  }
  static int Resume(unw_addr_space_t, unw_cursor_t*, void*) { return -UNW_EINVAL; }
  static int GetProcName(unw_addr_space_t, unw_word_t, char*, size_t, unw_word_t*, void*) {
    return -UNW_EINVAL;
  }

  struct MemoEntry {
    const Placement* placement = nullptr;
    uint64_t addr = 0;
    const Rule* rule = nullptr;
  };
  static constexpr int kMemoBits = 14;  // 16 Ki entries, 384 KiB
  std::vector<MemoEntry> memo_ = std::vector<MemoEntry>(size_t{1} << kMemoBits);
  uint64_t index_mask_ = 0;
  bool index_valid_ = false;
  int index_[UNW_TDEP_LAST_REG + 1];  // libunwind reg -> index in index_mask_'s regs, -1

  unw_accessors_t accessors_;
  unw_addr_space_t as_ = nullptr;
  std::unordered_map<uint32_t, Space> spaces_;
  std::map<std::pair<const ElfImage*, uint64_t>, std::unique_ptr<Placement>> placements_;
  std::unordered_map<std::string, std::unique_ptr<ElfImage>> images_;
  UnwindStats stats_;
};

}  // namespace

std::unique_ptr<DwarfUnwinder> MakeDwarfUnwinder() { return std::make_unique<Unwinder>(); }

}  // namespace flightrec::recorder::unwind
