#include "recorder/fleet/crash_signature.h"

#include <array>
#include <string_view>

#include <fmt/format.h>

#include "common/cgroup.h"
#include "common/checked_json.h"
#include "common/terminal_escape.h"
#include "recorder/fleet/digest_pg.h"
#include "recorder/fleet/fleet_index.h"
#include "store/record_file.h"

namespace flightrec::fleet {
namespace {

// Bumped when the definition changes (docs/FLEET.md): every id changes with
// it, so two definitions never share a group.
constexpr std::string_view kVersion = "flightrec-signature v1";

// Sections read for a signature: the hook writes far less.
constexpr uint64_t kMaxSectionBytes = 64ull << 20;

// Frames at the top of a crashing stack that every crash of its kind has:
// the kernel's signal trampoline (a crash inside a handler), glibc's
// raise/abort path (SIGABRT), its assert and fortify reporters and malloc's
// consistency checks, and the C++ runtime's terminate path. Matched on the
// name before any parameter list. glibc 2.36 names as in its sources
// (sysdeps/unix/sysv/linux/x86_64/libc_sigaction.c __restore_rt,
// nptl/pthread_kill.c __pthread_kill_implementation, assert/assert.c).
constexpr std::array<std::string_view, 30> kSkippedTop = {
    "__restore_rt",
    "raise",
    "__GI_raise",
    "gsignal",
    "abort",
    "__GI_abort",
    "pthread_kill",
    "__pthread_kill",
    "__GI___pthread_kill",
    "__pthread_kill_implementation",
    "__pthread_kill_internal",
    "__assert_fail",
    "__GI___assert_fail",
    "__assert_fail_base",
    "__assert_perror_fail",
    "__libc_message",
    "__libc_fatal",
    "__fortify_fail",
    "__chk_fail",
    "__stack_chk_fail",
    "malloc_printerr",
    "std::terminate",
    "std::__terminate",
    "__cxxabiv1::__terminate",
    "__gnu_cxx::__verbose_terminate_handler",
    "__cxa_throw",
    "__cxa_rethrow",
    "__cxa_pure_virtual",
    "__cxa_call_terminate",
    "__cxa_bad_cast",
};

bool Skipped(const std::string& function) {
  std::string_view name = function;
  if (auto paren = name.find('('); paren != std::string_view::npos) name = name.substr(0, paren);
  for (auto s : kSkippedTop) {
    if (name == s) return true;
  }
  return false;
}

std::string Basename(const std::string& path) {
  auto slash = path.find_last_of('/');
  return slash == std::string::npos ? path : path.substr(slash + 1);
}

}  // namespace

std::string BoundedText(const std::string& s, size_t max) {
  std::string v = ToValidUtf8(s);
  if (v.size() > max) {
    size_t cut = max;
    // Back up to the start of a UTF-8 sequence (not a continuation byte).
    while (cut > 0 && (static_cast<unsigned char>(v[cut]) & 0xC0) == 0x80) --cut;
    v.resize(cut);
  }
  for (char& c : v) {
    if (static_cast<unsigned char>(c) < 0x20 || c == 0x7f) c = '?';
  }
  return v;
}

std::string NormalizeFunction(const std::string& function) {
  std::string f = function;
  // The demangler's "foo(int) [clone .isra.0]" and the raw "foo.isra.0",
  // "foo.cold", "foo.constprop.0.lto_priv.0": compiler clones of one
  // function, whose suffixes change from build to build.
  if (auto c = f.find(" [clone "); c != std::string::npos) f.resize(c);
  static constexpr std::string_view kClones[] = {".cold",  ".isra.",       ".constprop.",
                                                 ".part.", ".lto_priv.",   ".localalias",
                                                 ".llvm.", ".specialized."};
  size_t cut = std::string::npos;
  for (auto s : kClones) {
    // Only in the name proper, not inside a C++ parameter list.
    auto paren = f.find('(');
    auto p = f.find(s);
    if (p != std::string::npos && p > 0 && (paren == std::string::npos || p < paren)) {
      cut = std::min(cut, p);
    }
  }
  if (cut != std::string::npos) f.resize(cut);
  f = BoundedText(f, kMaxFunctionBytes);
  return f.empty() ? "?" : f;
}

std::string NormalizeModule(const std::string& dso_path) {
  std::string m = dso_path;
  constexpr std::string_view kDeleted = " (deleted)";
  if (m.size() > kDeleted.size() && m.ends_with(kDeleted)) m.resize(m.size() - kDeleted.size());
  m = Basename(m);
  // libc.so.6 and libfoo.so.1.2.3: the soname's version changes with
  // upgrades that do not change the bug.
  if (auto so = m.find(".so."); so != std::string::npos) m.resize(so + 3);
  m = BoundedText(m, kMaxModuleBytes);
  return m.empty() ? "?" : m;
}

nlohmann::json CrashSignature::ToJson() const {
  nlohmann::json frames_json = nlohmann::json::array();
  for (const auto& f : frames)
    frames_json.push_back({{"function", f.function}, {"module", f.module}});
  return {{"id", id}, {"title", title}, {"frames", frames_json}};
}

CrashSignature ComputeSignature(const nlohmann::json& backtrace, const std::string& signal_name,
                                const std::string& program) {
  const auto& threads = json::Array(backtrace, "threads");
  // The crashing thread: the one the hook names, else the first (the
  // kernel writes the thread that took the signal first).
  const nlohmann::json* crashing = nullptr;
  const int64_t want = json::Get<int64_t>(backtrace, "crashing_tid", -1);
  for (const auto& t : threads) {
    if (want >= 0 && json::Get<int64_t>(t, "tid", -2) == want) {
      crashing = &t;
      break;
    }
  }
  if (crashing == nullptr && !threads.empty()) crashing = &threads[0];
  CrashSignature sig;
  if (crashing != nullptr) {
    bool top = true;
    for (const auto& f : json::Array(*crashing, "frames")) {
      if (sig.frames.size() == kSignatureFrames) break;
      const std::string fn = json::Str(f, "function");
      if (top && Skipped(fn)) continue;
      top = false;
      sig.frames.push_back({NormalizeFunction(fn), NormalizeModule(json::Str(f, "dso"))});
    }
  }
  // A stack of nothing but unknown frames says as little as none.
  bool known = false;
  for (const auto& f : sig.frames) known = known || f.function != "?" || f.module != "?";
  if (!known) sig.frames.clear();
  const std::string sig_name = BoundedText(signal_name.empty() ? "signal" : signal_name, 32);
  std::string canonical = fmt::format("{}\n{}\n", kVersion, sig_name);
  std::string title = sig_name + " in ";
  if (sig.frames.empty()) {
    const std::string prog = NormalizeModule(program);
    canonical += fmt::format("program\t{}\n", prog);
    title += prog + " (no backtrace)";
  } else {
    for (size_t i = 0; i < sig.frames.size(); ++i) {
      canonical += fmt::format("{}\t{}\n", sig.frames[i].function, sig.frames[i].module);
      // The title: the first three functions and the top frame's module.
      if (i < 3) title += (i ? " ← " : "") + sig.frames[i].function;
    }
    title += " (" + sig.frames[0].module + ")";
  }
  sig.id = Sha256Hex(canonical).substr(0, 16);
  sig.title = BoundedText(title, 512);
  return sig;
}

StatusOr<IndexCrash> CrashFromRecord(const store::RecordReader& reader) {
  if (reader.header().kind != "crash") {
    return InvalidArgument(fmt::format("record {} is a {}, not a crash",
                                       BoundedText(reader.header().id, 64),
                                       BoundedText(reader.header().kind, 32)));
  }
  const nlohmann::json& meta = reader.meta();
  const nlohmann::json& crash = json::Object(meta, "crash");
  auto section = [&](const char* name) -> nlohmann::json {
    if (!reader.FindSection(name)) return nlohmann::json::object();
    auto text = reader.ReadSection(name, kMaxSectionBytes);
    if (!text.ok()) return nlohmann::json::object();
    auto j = json::ParseBounded(*text);
    return j.is_object() ? j : nlohmann::json::object();
  };
  const nlohmann::json md = section("metadata");
  const nlohmann::json bt = section("backtrace");
  IndexCrash c;
  c.pid = json::Get<uint32_t>(crash, "pid", 0);
  c.comm = BoundedText(json::RawText(crash, "comm"), 64);
  c.signal = json::Get<int>(crash, "signal", 0);
  c.signal_name = BoundedText(json::Str(crash, "signal_name"), 32);
  c.executable = BoundedText(json::RawText(crash, "exe"), 4096);
  c.build_id = BoundedText(json::Str(md, "build_id"), 128);
  for (const auto& p : json::Array(meta, "processes")) {
    IndexProcess ip;
    ip.pid = json::Get<uint32_t>(p, "pid", 0);
    ip.comm = BoundedText(json::RawText(p, "comm"), 64);
    ip.executable = BoundedText(json::RawText(p, "exe"), 4096);
    ip.where = cgroup::CgroupFromJson(p);
    if (ip.pid == c.pid) {
      ip.build_id = c.build_id;
      c.where = ip.where;
    }
    c.processes.push_back(std::move(ip));
    if (c.processes.size() == 64) break;  // the hook writes one
  }
  c.signature = ComputeSignature(bt, c.signal_name, c.executable.empty() ? c.comm : c.executable);
  return c;
}

}  // namespace flightrec::fleet
