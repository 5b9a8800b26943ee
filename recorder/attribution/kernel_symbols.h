// Kernel and module symbols (kallsyms, /proc/modules, or a record's names).
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "common/status.h"

namespace flightrec::recorder::attribution {

// What a kernel address is: a symbol of the kernel or of a module, or a
// module's code without a symbol.
struct KernelSymbol {
  std::string name;     // "" when only the module is known
  uint64_t offset = 0;  // from the symbol, or from the module's base without one
  std::string module;   // "" for the core kernel
  bool found = false;
};

// Kernel symbols from /proc/kallsyms (with each module symbol's [module]) and
// module extents from /proc/modules, so an address is named only by a symbol
// that can contain it: inside a module, one of that module's symbols (or
// "[module]+0xoff"); past the end of the core kernel's text (and init text)
// or of every module, nothing — never the nearest symbol below, which would mis-attribute.
class KernelSymbols {
 public:
  static StatusOr<KernelSymbols> Load(const std::string& kallsyms = "/proc/kallsyms",
                                      const std::string& modules = "/proc/modules");
  // kallsyms lines ("addr type name [module]") plus, optionally, lines
  // "module NAME BASE_HEX SIZE" (the form records store) — or /proc/modules
  // text through AddModules.
  static StatusOr<KernelSymbols> FromText(const std::string& text);
  // /proc/modules lines: "name size refcount deps state 0xbase".
  void AddModules(const std::string& proc_modules);
  KernelSymbol Lookup(uint64_t addr) const;
  // "name+0xoff", "name+0xoff [module]", "[module]+0xoff", or "" if unknown.
  std::string Resolve(uint64_t addr) const;
  // The subset of symbols (and module extents) that covers addrs, as text
  // FromText reads (for records).
  std::string Subset(const std::vector<uint64_t>& addrs) const;
  bool empty() const { return syms_.empty() && names_.empty(); }

  // Records given to users hold no kernel address (/proc/kallsyms hides them
  // from users; one defeats KASLR). A kernel frame there is a name reference,
  // (index + 1) << 32 | offset into the symbol, over the record's table of
  // (symbol, module) names (section `kernel_names`, docs/FORMAT.md); 0 is a
  // kernel frame nobody could name. MakeNameRef returns the reference for a
  // looked-up address; FromNames reads a table, after which Lookup answers
  // for references only.
  static constexpr uint64_t kNameRefLimit = 1ull << 24;  // names per record
  static uint64_t NameRef(uint32_t index, uint64_t offset) {
    return (static_cast<uint64_t>(index) + 1) << 32 | offset;
  }
  // JSON: [[name, module], ...] ("" = none); bounded, type-checked.
  static StatusOr<KernelSymbols> FromNames(const std::string& json_text);
  bool names_only() const { return names_only_; }

 private:
  struct Sym {
    uint64_t addr;
    std::string name;
    uint32_t module;  // 0 = core kernel, else index + 1 in modules_
  };
  struct Module {
    std::string name;
    uint64_t base = 0, size = 0;  // size 0: extent unknown
  };
  uint32_t ModuleIndex(const std::string& name);
  const Module* ModuleAt(uint64_t addr) const;
  std::vector<Sym> syms_;
  std::vector<Module> modules_;
  bool InCoreText(uint64_t addr) const;
  uint64_t core_text_end_ = 0;  // _etext, 0 if unknown
  // Init text ([_sinittext, _einittext)) lies past _etext; kallsyms keeps
  // its symbols after boot, and the boot CPU's idle stack roots there
  // (start_kernel). 0 if unknown.
  uint64_t init_text_start_ = 0, init_text_end_ = 0;
  bool names_only_ = false;
  std::vector<std::pair<std::string, std::string>> names_;  // FromNames: (symbol, module)
};

}  // namespace flightrec::recorder::attribution
