#include "recorder/attribution/kernel_symbols.h"

#include <algorithm>
#include <set>
#include <sstream>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "common/read_file.h"

namespace flightrec::recorder::attribution {

uint32_t KernelSymbols::ModuleIndex(const std::string& name) {
  for (size_t i = 0; i < modules_.size(); ++i) {
    if (modules_[i].name == name) return static_cast<uint32_t>(i + 1);
  }
  modules_.push_back(Module{name, 0, 0});
  return static_cast<uint32_t>(modules_.size());
}

const KernelSymbols::Module* KernelSymbols::ModuleAt(uint64_t addr) const {
  for (const auto& m : modules_) {
    if (m.size && addr >= m.base && addr - m.base < m.size) return &m;
  }
  return nullptr;
}

StatusOr<KernelSymbols> KernelSymbols::FromText(const std::string& text) {
  KernelSymbols k;
  std::istringstream in(text);
  std::string line;
  while (std::getline(in, line)) {
    char name[512], module[128];
    unsigned long long addr = 0, size = 0;
    if (line.rfind("module ", 0) == 0) {
      if (std::sscanf(line.c_str(), "module %127s %llx %llu", module, &addr, &size) == 3) {
        Module& m = k.modules_[k.ModuleIndex(module) - 1];
        m.base = addr;
        m.size = size;
      }
      continue;
    }
    char type = 0;
    int n = std::sscanf(line.c_str(), "%llx %c %511s [%127[^]]]", &addr, &type, name, module);
    if (n < 3) continue;
    if (addr == 0) continue;  // addresses hidden (kptr_restrict)
    if (n == 3) {
      if (std::strcmp(name, "_etext") == 0) k.core_text_end_ = addr;
      if (std::strcmp(name, "_sinittext") == 0) k.init_text_start_ = addr;
      if (std::strcmp(name, "_einittext") == 0) k.init_text_end_ = addr;
    }
    if (type != 't' && type != 'T' && type != 'w' && type != 'W') continue;
    k.syms_.push_back({addr, name, n == 4 ? k.ModuleIndex(module) : 0});
  }
  std::sort(k.syms_.begin(), k.syms_.end(),
            [](const Sym& a, const Sym& b) { return a.addr < b.addr; });
  return k;
}

void KernelSymbols::AddModules(const std::string& proc_modules) {
  std::istringstream in(proc_modules);
  std::string line;
  while (std::getline(in, line)) {
    // name size refcount deps state address [taint]
    char name[128], deps[4096], state[32];
    unsigned long long size = 0, base = 0;
    int refs = 0;
    if (std::sscanf(line.c_str(), "%127s %llu %d %4095s %31s %llx", name, &size, &refs, deps, state,
                    &base) != 6 ||
        base == 0) {
      continue;  // malformed, or addresses hidden
    }
    Module& m = modules_[ModuleIndex(name) - 1];
    m.base = base;
    m.size = size;
  }
}

StatusOr<KernelSymbols> KernelSymbols::Load(const std::string& kallsyms,
                                            const std::string& modules) {
  // kallsyms is ~10 MiB on a distribution kernel with every module loaded.
  auto slurp = [](const std::string& path) { return ReadFileToString(path, 256 << 20); };
  ASSIGN_OR_RETURN(std::string text, slurp(kallsyms));
  ASSIGN_OR_RETURN(KernelSymbols k, FromText(text));
  // A kernel without module support has no /proc/modules: nothing to add.
  if (auto m = slurp(modules); m.ok()) k.AddModules(*m);
  return k;
}

namespace {

// Whether JSON text nests arrays/objects at most max deep (strings skipped):
// checked before parsing, as parts of nlohmann's DOM recurse per level.
bool NestingAtMost(const std::string& text, int max) {
  int depth = 0;
  bool in_string = false;
  for (size_t i = 0; i < text.size(); ++i) {
    char c = text[i];
    if (in_string) {
      if (c == '\\') {
        ++i;
      } else if (c == '"') {
        in_string = false;
      }
    } else if (c == '"') {
      in_string = true;
    } else if (c == '[' || c == '{') {
      if (++depth > max) return false;
    } else if (c == ']' || c == '}') {
      --depth;
    }
  }
  return true;
}

}  // namespace

StatusOr<KernelSymbols> KernelSymbols::FromNames(const std::string& json_text) {
  // A record is untrusted: depth, counts and lengths are bounded, types checked.
  constexpr size_t kMaxName = 512;
  if (!NestingAtMost(json_text, 2)) {
    return Corrupt("kernel_names: nested deeper than [[name, module], ...]");
  }
  auto j = nlohmann::json::parse(json_text, nullptr, false);
  if (j.is_discarded() || !j.is_array() || j.size() > kNameRefLimit) {
    return Corrupt("kernel_names: not an array of at most 2^24 [name, module] pairs");
  }
  KernelSymbols k;
  k.names_only_ = true;
  k.names_.reserve(j.size());
  for (const auto& e : j) {
    if (!e.is_array() || e.size() != 2 || !e[0].is_string() || !e[1].is_string() ||
        e[0].get_ref<const std::string&>().size() > kMaxName ||
        e[1].get_ref<const std::string&>().size() > kMaxName) {
      return Corrupt("kernel_names: an entry is not a [name, module] pair of short strings");
    }
    k.names_.emplace_back(e[0].get<std::string>(), e[1].get<std::string>());
  }
  return k;
}

bool KernelSymbols::InCoreText(uint64_t addr) const {
  if (!core_text_end_ || addr < core_text_end_) return true;
  return init_text_start_ && addr >= init_text_start_ && addr < init_text_end_;
}

KernelSymbol KernelSymbols::Lookup(uint64_t addr) const {
  KernelSymbol r;
  if (names_only_) {
    const uint64_t index = addr >> 32;
    if (index == 0 || index > names_.size()) return r;
    const auto& [name, module] = names_[index - 1];
    return KernelSymbol{name, addr & 0xffffffffu, module, true};
  }
  auto it = std::upper_bound(syms_.begin(), syms_.end(), addr,
                             [](uint64_t a, const Sym& s) { return a < s.addr; });
  if (const Module* m = ModuleAt(addr)) {
    const uint32_t mi = static_cast<uint32_t>(m - modules_.data()) + 1;
    // The nearest symbol below that belongs to this module, not below its base.
    for (auto j = it; j != syms_.begin();) {
      --j;
      if (j->addr < m->base) break;
      if (j->module == mi) return KernelSymbol{j->name, addr - j->addr, m->name, true};
    }
    return KernelSymbol{"", addr - m->base, m->name, true};
  }
  if (it == syms_.begin()) return r;
  const Sym& s = *std::prev(it);
  if (s.module == 0 && !InCoreText(addr)) {
    return r;  // past the kernel's text and init text, and in no known module
  }
  if (s.module != 0 && modules_[s.module - 1].size) {
    return r;  // the module's extent is known, and this address is not in it
  }
  return KernelSymbol{s.name, addr - s.addr, s.module ? modules_[s.module - 1].name : "", true};
}

std::string KernelSymbols::Resolve(uint64_t addr) const {
  KernelSymbol k = Lookup(addr);
  if (!k.found) return "";
  if (k.name.empty()) return fmt::format("[{}]+0x{:x}", k.module, k.offset);
  if (!k.module.empty()) return fmt::format("{}+0x{:x} [{}]", k.name, k.offset, k.module);
  return fmt::format("{}+0x{:x}", k.name, k.offset);
}

std::string KernelSymbols::Subset(const std::vector<uint64_t>& addrs) const {
  std::vector<size_t> idx;
  std::set<uint32_t> mods;
  for (uint64_t a : addrs) {
    if (const Module* m = ModuleAt(a)) mods.insert(static_cast<uint32_t>(m - modules_.data()) + 1);
    auto it = std::upper_bound(syms_.begin(), syms_.end(), a,
                               [](uint64_t x, const Sym& s) { return x < s.addr; });
    if (it == syms_.begin()) continue;
    size_t i = static_cast<size_t>(it - syms_.begin()) - 1;
    idx.push_back(i);
    if (i + 1 < syms_.size()) idx.push_back(i + 1);  // bounds the symbol's extent
  }
  std::sort(idx.begin(), idx.end());
  idx.erase(std::unique(idx.begin(), idx.end()), idx.end());
  std::string out;
  if (core_text_end_) out += fmt::format("{:016x} T _etext\n", core_text_end_);
  if (init_text_start_ && init_text_end_) {
    out += fmt::format("{:016x} T _sinittext\n{:016x} T _einittext\n", init_text_start_,
                       init_text_end_);
  }
  for (uint32_t mi : mods) {
    const Module& m = modules_[mi - 1];
    out += fmt::format("module {} {:x} {}\n", m.name, m.base, m.size);
  }
  for (size_t i : idx) {
    const Sym& s = syms_[i];
    if (s.module) {
      out += fmt::format("{:016x} T {}\t[{}]\n", s.addr, s.name, modules_[s.module - 1].name);
    } else {
      out += fmt::format("{:016x} T {}\n", s.addr, s.name);
    }
  }
  return out;
}

}  // namespace flightrec::recorder::attribution
