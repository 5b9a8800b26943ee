#include "recorder/symbolize/symbolizer.h"

#include <sys/stat.h>

#include <algorithm>
#include <tuple>

#include "recorder/attribution/vdso.h"
#include "recorder/elf/build_id.h"
#include "recorder/elf/elf_handle.h"
#include "recorder/symbolize/debuginfo.h"
#include "recorder/symbolize/dwarf_file.h"
#include "recorder/symbolize/elf_symbols.h"

namespace flightrec::recorder::symbolize {

FileSyms::FileSyms() = default;
FileSyms::~FileSyms() = default;

Symbolizer::Symbolizer(const CookieTable* cookies, const KernelSymbols* kernel)
    : cookies_(cookies), kernel_(kernel), debug_dirs_(DefaultDebugDirs()) {}

Symbolizer::~Symbolizer() = default;

const FileSyms& Symbolizer::Load(uint32_t cookie_id) {
  auto it = files_.find(cookie_id);
  if (it != files_.end()) return *it->second;
  const attribution::Cookie* c = cookies_->Get(cookie_id);
  static const FileSyms* const kMissing = [] {
    auto* f = new FileSyms;  // one immortal "unknown cookie" entry
    f->status = SymbolCode::kFileMissing;
    return f;
  }();
  const FileSyms* fs = c ? &LoadFile(c->path, c->build_id, c->ino) : kMissing;
  files_[cookie_id] = fs;
  return *fs;
}

const FileSyms& Symbolizer::LoadFile(const std::string& path, const std::string& build_id,
                                     uint64_t ino) {
  // Without a build-id, the inode the mapping had is the file's identity.
  std::string key = path + '\n' + (build_id.empty() ? "ino:" + std::to_string(ino) : build_id);
  auto it = by_file_.find(key);
  if (it != by_file_.end()) return *it->second;
  auto fs = std::make_unique<FileSyms>();
  const attribution::Cookie cookie{0, path, build_id, 0, 0};
  const attribution::Cookie* c = &cookie;
  std::vector<std::tuple<uint64_t, uint64_t, std::string>> syms;
  std::vector<std::tuple<uint64_t, uint64_t, uint64_t>> segs;
  ElfFacts facts;
  if (!ReadElfSymbols(c->path, &syms, &segs, &facts)) {
    fs->status = SymbolCode::kFileMissing;
  } else if (!c->build_id.empty() && elf::HexBuildId(facts.build_id) != c->build_id) {
    // Never attribute to a different binary's symbols.
    fs->status = SymbolCode::kFileChanged;
    syms.clear();
  } else if (struct stat st; c->build_id.empty() && ino != 0 &&
                             (stat(c->path.c_str(), &st) != 0 || st.st_ino != ino)) {
    // No build-id to compare: a file replaced since (a rebuild writes a new
    // inode) is another file, whatever its contents.
    fs->status = SymbolCode::kFileChanged;
    syms.clear();
  } else {
    std::string dwarf_path = facts.has_debug_info ? c->path : "";
    if (!facts.has_symtab || !facts.has_debug_info) {
      // Stripped: a separate debug file has the full symtab and the DWARF.
      std::string dbg =
          FindDebugFile(debug_dirs_, c->path, elf::HexBuildId(facts.build_id), facts.debuglink);
      if (dbg.empty()) dbg = FetchDebugFile(c->path, elf::HexBuildId(facts.build_id));
      if (!dbg.empty()) {
        std::vector<std::tuple<uint64_t, uint64_t, std::string>> dsyms;
        ElfFacts df;
        if (ReadElfSymbols(dbg, &dsyms, nullptr, &df)) {
          fs->debug_file = dbg;
          if (df.has_symtab && !facts.has_symtab) syms = std::move(dsyms);
          if (df.has_debug_info && dwarf_path.empty()) dwarf_path = dbg;
        }
      }
    }
    if (!dwarf_path.empty())
      fs->dwarf = DwarfFile::Open(DecompressedCopy(dwarf_path, decompress_cache_));
    // Always from the file itself: a debug file's .plt is NOBITS.
    for (auto& p : facts.plt) syms.emplace_back(p.addr, p.size, std::move(p.name));
  }
  for (auto& [off, vaddr, sz] : segs) fs->segs.push_back({off, vaddr, sz});
  // Names stay mangled here: a file has thousands of symbols, a replay hits a
  // few; ResolveIn demangles the ones it returns.
  for (auto& [addr, size, name] : syms) fs->syms.push_back({addr, size, std::move(name)});
  std::sort(fs->syms.begin(), fs->syms.end(),
            [](const FileSyms::Sym& a, const FileSyms::Sym& b) { return a.addr < b.addr; });
  auto& ref = *fs;
  by_file_[key] = std::move(fs);
  return ref;
}

void Symbolizer::set_vdso(const std::string& image) {
  vdso_.reset();
  vdso_image_ = image;
  if (image.empty() || image.size() > attribution::kMaxVdsoBytes) return;
  elf::ElfPtr elf = elf::ElfFromMemory(&vdso_image_);
  SymTuples syms;
  SegTuples segs;
  ElfFacts facts;
  if (!ReadElfSymbolsFrom(elf.get(), &syms, &segs, &facts)) return;  // not ELF: left unnamed
  auto fs = std::make_unique<FileSyms>();
  for (auto& [off, vaddr, sz] : segs) fs->segs.push_back({off, vaddr, sz});
  for (auto& [addr, size, name] : syms) fs->syms.push_back({addr, size, std::move(name)});
  // Each entry point has two names (clock_gettime, a weak alias, and
  // __vdso_clock_gettime): the lookup takes the last of equal addresses, so
  // the __vdso_ one, which is what perf shows.
  auto vdso_name = [](const FileSyms::Sym& x) { return x.name.rfind("__vdso_", 0) == 0; };
  std::sort(fs->syms.begin(), fs->syms.end(), [&](const FileSyms::Sym& a, const FileSyms::Sym& b) {
    if (a.addr != b.addr) return a.addr < b.addr;
    if (vdso_name(a) != vdso_name(b)) return !vdso_name(a);
    return a.name < b.name;
  });
  vdso_ = std::move(fs);
}

Symbol Symbolizer::Resolve(const Frame& f) {
  const FileSyms* fs = nullptr;
  uint64_t vaddr = 0;
  return ResolveIn(f, &fs, &vaddr);
}

std::vector<Symbol> Symbolizer::ResolveInline(const Frame& f) {
  const FileSyms* fs = nullptr;
  uint64_t vaddr = 0;
  Symbol outer = ResolveIn(f, &fs, &vaddr);
  std::vector<Symbol> chain;
  if (fs == nullptr || fs->dwarf == nullptr || !fs->dwarf->Frames(vaddr, want_lines_, &chain)) {
    return {std::move(outer)};
  }
  for (auto& s : chain) {
    s.dso = outer.dso;
    s.offset = outer.offset;
  }
  // The outermost entry is the containing function: keep the symbol table's
  // name (what every other tool shows) and add DWARF's file:line to it.
  Symbol& last = chain.back();
  if (!last.inlined) {
    if (!outer.function.empty() || last.function.empty()) {
      last.function = outer.function;
      last.status = outer.status;
    }
  } else {
    outer.file = last.file;
    outer.line = last.line;
    chain.push_back(std::move(outer));
  }
  return chain;
}

Symbol Symbolizer::ResolveIn(const Frame& f, const FileSyms** fs_out, uint64_t* vaddr_out) {
  Symbol s;
  s.offset = f.offset;
  if (f.kernel) {
    attribution::KernelSymbol k = kernel_ ? kernel_->Lookup(f.offset) : attribution::KernelSymbol{};
    s.dso = k.module.empty() ? "[kernel.kallsyms]" : "[" + k.module + "]";
    s.status = k.name.empty() ? SymbolCode::kNoSymbol : SymbolCode::kOk;
    s.function = k.name;
    // A module's code without a symbol: "[module]+0xoff" from its base. A
    // record without kernel addresses has only the offset into the symbol.
    if ((k.name.empty() && !k.module.empty()) || (kernel_ && kernel_->names_only())) {
      s.offset = k.offset;
    }
    return s;
  }
  const FileSyms* loaded = nullptr;
  if (f.cookie == 0) {
    s.dso = f.special;
    s.status = SymbolCode::kUnmapped;
    // The vDSO's offset is from its mapping's start, which is its file
    // offset: the image is mapped whole, from offset 0.
    if (f.special != "[vdso]" || vdso_ == nullptr) return s;
    loaded = vdso_.get();
  } else {
    const attribution::Cookie* c = cookies_->Get(f.cookie);
    s.dso = c ? c->path : "?";
    loaded = &Load(f.cookie);
  }
  const FileSyms& fs = *loaded;
  s.status = fs.status;
  if (fs.status != SymbolCode::kOk) return s;
  // File offset → link-time address through the PT_LOAD that holds it.
  uint64_t vaddr = 0;
  bool found = false;
  for (const auto& seg : fs.segs) {
    if (f.offset >= seg.offset && f.offset < seg.offset + seg.filesz) {
      vaddr = f.offset - seg.offset + seg.vaddr;
      found = true;
      break;
    }
  }
  if (!found) {
    s.status = SymbolCode::kNoSymbol;
    return s;
  }
  *fs_out = &fs;
  *vaddr_out = vaddr;
  auto it = std::upper_bound(fs.syms.begin(), fs.syms.end(), vaddr,
                             [](uint64_t a, const FileSyms::Sym& x) { return a < x.addr; });
  if (it == fs.syms.begin()) {
    s.status = SymbolCode::kNoSymbol;
    return s;
  }
  --it;
  if (it->size != 0 && vaddr >= it->addr + it->size) {
    s.status = SymbolCode::kNoSymbol;
    return s;
  }
  s.function = Demangle(it->name);
  return s;
}

}  // namespace flightrec::recorder::symbolize
