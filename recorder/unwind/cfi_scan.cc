#include <algorithm>
#include <map>

#include <fmt/format.h>

#include "recorder/unwind/cfi.h"

namespace flightrec::recorder::unwind {

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

// The FDEs of an .eh_frame that has no .eh_frame_hdr, for a built table.
// Only the pointer encodings of the CIEs are needed; libunwind parses the
// rest when it reads the FDE.
std::vector<FdeEntry> ScanEhFrame(const ElfImage& img, const elf::SectionHeader& sec,
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

// Maps the file and finds its PT_LOADs and CFI: .eh_frame_hdr's table, else
// a table built over .eh_frame, and .debug_frame (for code .eh_frame does
// not cover: crt files bring .eh_frame to binaries whose own code has only
// .debug_frame). The caller has checked the build-id.
namespace {

// The rest of LoadImage once img->file is mapped (or `error` says why not).
std::unique_ptr<ElfImage> ReadCfi(std::unique_ptr<ElfImage> img, elf::MappedElf::Error error);

}  // namespace

std::unique_ptr<ElfImage> LoadImage(const std::string& path) {
  auto img = std::make_unique<ElfImage>();
  img->path = path;
  elf::MappedElf::Error error = elf::MappedElf::Error::kNone;
  img->file = elf::MappedElf::Open(path, &error);
  return ReadCfi(std::move(img), error);
}

std::unique_ptr<ElfImage> LoadImageFromBytes(const std::string& name, std::string_view bytes) {
  auto img = std::make_unique<ElfImage>();
  img->path = name;
  elf::MappedElf::Error error = elf::MappedElf::Error::kNone;
  img->file = elf::MappedElf::FromBytes(bytes, &error);
  return ReadCfi(std::move(img), error);
}

namespace {

std::unique_ptr<ElfImage> ReadCfi(std::unique_ptr<ElfImage> img, elf::MappedElf::Error error) {
  switch (error) {
    case elf::MappedElf::Error::kNone:
      break;
    case elf::MappedElf::Error::kCannotRead:
    case elf::MappedElf::Error::kCannotMap:
      img->status = UnwindCode::kMissingFile;
      img->detail = error == elf::MappedElf::Error::kCannotRead ? "cannot read" : "cannot map";
      return img;
    case elf::MappedElf::Error::kNotX86_64:
      img->status = UnwindCode::kNoUnwindInfo;
      img->detail = "not an x86-64 ELF file";
      return img;
  }
  const Elf64_Ehdr& eh = img->file.header();
  uint64_t hdr = 0, hdr_size = 0;
  bool has_hdr = false;
  bool first = true;
  for (int i = 0; i < eh.e_phnum; ++i) {
    Elf64_Phdr ph = img->file.phdr(static_cast<size_t>(i));
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
  auto eh_frame = img->file.FindSection(".eh_frame");
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
  if (auto debug_frame = img->file.FindSection(".debug_frame")) {
    std::string problem;
    auto bytes = img->file.SectionBytes(*debug_frame, &decompressed, &problem);
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
    img->status = UnwindCode::kNoUnwindInfo;
    img->detail = "no .eh_frame_hdr, .eh_frame or .debug_frame";
    for (const auto& pr : problems) img->detail += "; " + pr;
  }
  return img;
}

}  // namespace

}  // namespace flightrec::recorder::unwind
