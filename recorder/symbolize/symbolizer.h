// Symbolization at query time: (file cookie, file offset) and kernel frames
// to function names, with inline chains and source lines from DWARF.
//
// Thread: a Symbolizer is used by one thread.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "recorder/attribution/attributor.h"
#include "recorder/attribution/cookie_table.h"
#include "recorder/attribution/kernel_symbols.h"

namespace flightrec::recorder::symbolize {

using attribution::CookieTable;
using attribution::Frame;
using attribution::KernelSymbols;
using attribution::Symbol;
using attribution::SymbolCode;

class DwarfFile;  // dwarf_file.h

// One file's symbols and load segments, as the Symbolizer caches them.
struct FileSyms {
  FileSyms();
  ~FileSyms();
  attribution::SymbolStatus status = attribution::SymbolCode::kOk;  // or file_*, no_symbol
  std::string debug_file;  // where symbols/DWARF came from if not the file itself
  struct Seg {
    uint64_t offset, vaddr, filesz;
  };
  std::vector<Seg> segs;
  struct Sym {
    uint64_t addr, size;
    std::string name;
  };
  std::vector<Sym> syms;             // sorted by addr
  std::unique_ptr<DwarfFile> dwarf;  // null without DWARF
};

// Looks up (cookie, offset) in the files on disk, verifying build-ids; each
// file is read once and its symbols cached.
//
// Separate debug files are looked for like gdb and elfutils do: by build-id
// under <dir>/.build-id/xx/yyyy.debug for each debug directory, then by the
// file's .gnu_debuglink next to it, in its .debug/ subfolder and under
// <dir>/<its folder>/. A debug file is used only if its build-id matches.
class Symbolizer {
 public:
  // Debug directories: $FLIGHTREC_DEBUGINFO_PATH (colon-separated) or
  // /usr/lib/debug.
  Symbolizer(const CookieTable* cookies, const KernelSymbols* kernel);
  ~Symbolizer();
  // The function containing the frame (never an inlined one).
  Symbol Resolve(const Frame& f);
  // Innermost first: the inlined functions at this address (inlined = true),
  // then the function they were inlined into; with source file:line where the
  // file has DWARF line info.
  std::vector<Symbol> ResolveInline(const Frame& f);
  void set_debug_dirs(std::vector<std::string> dirs) { debug_dirs_ = std::move(dirs); }
  // Source file:line of frames (default on). Off for callers that show only
  // functions: a file's line tables are the costliest part of its DWARF.
  void set_want_lines(bool on) { want_lines_ = on; }
  size_t files_loaded() const { return by_file_.size(); }
  // The vDSO image (recorder/attribution/vdso.h) that names "[vdso]" frames;
  // without one (or with one that is not ELF) they stay "[vdso]+0xoff".
  void set_vdso(const std::string& image);
  // Off by default: a directory (DefaultDecompressCacheDir()) where files
  // whose DWARF is compressed get a decompressed copy, made once per build-id
  // by running objcopy, so later queries skip libdw's inflating. It starts a
  // process and writes files, so only callers that want that (the query
  // commands) turn it on; the core hook's sandboxed unwinder, which may not
  // fork, never does.
  void set_decompress_cache(std::string dir) { decompress_cache_ = std::move(dir); }

 private:
  const FileSyms& Load(uint32_t cookie);
  const FileSyms& LoadFile(const std::string& path, const std::string& build_id, uint64_t ino);
  Symbol ResolveIn(const Frame& f, const FileSyms** fs, uint64_t* vaddr);
  const CookieTable* cookies_;
  const KernelSymbols* kernel_;
  std::vector<std::string> debug_dirs_;
  bool want_lines_ = true;
  std::string decompress_cache_;
  std::unordered_map<uint32_t, const FileSyms*> files_;  // by cookie id
  // By path and build-id: what a file's symbols depend on.
  std::unordered_map<std::string, std::unique_ptr<FileSyms>> by_file_;
  std::string vdso_image_;  // elf_memory reads it in place
  std::unique_ptr<FileSyms> vdso_;
};

}  // namespace flightrec::recorder::symbolize

// The names callers used while the symbolizer lived in attribution/.
namespace flightrec::recorder::attribution {
using symbolize::FileSyms;
using symbolize::Symbolizer;
}  // namespace flightrec::recorder::attribution
