// The crash signature: what makes "the same bug on 200 hosts" one group.
//
// Definition (docs/FLEET.md, "Crash signature"): the crashing thread's top
// kSignatureFrames frames, each as (function, module basename), with no
// address or offset in it (addresses move with ASLR and rebuilds), after
// skipping the frames every crash of its kind shares and that say nothing
// about the bug: the signal trampoline, raise/abort/pthread_kill and the
// libc assert and fortify reporters at the top of the stack. Function names
// lose the compiler's clone suffixes (.cold, .isra.0, .constprop.0, .part.0)
// and module names their version after ".so", so one bug in two builds of
// the same code is one group. The signal name is part of it (a SIGSEGV and
// a SIGABRT at the same place are different failures). The id is the first
// 16 hex digits of SHA-256 of that canonical text, prefixed by the
// definition's version ("v1"): changing the definition changes every id
// rather than mixing two definitions in one group.
//
// Everything here comes from a crash record (attacker-controlled): names are
// bounded, control bytes and NULs are replaced, and only checked JSON
// accessors are used.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "common/status.h"

namespace flightrec::store {
class RecordReader;
}

namespace flightrec::fleet {

inline constexpr size_t kSignatureFrames = 5;
// Bounds on what a record may put in the index (bytes).
inline constexpr size_t kMaxFunctionBytes = 256;
inline constexpr size_t kMaxModuleBytes = 128;

struct SignatureFrame {
  std::string function;  // "?" when the frame has no symbol
  std::string module;    // basename, version after ".so" dropped; "?" if unknown
  bool operator==(const SignatureFrame&) const = default;
};

struct CrashSignature {
  std::string id;     // 16 lowercase hex digits
  std::string title;  // "SIGSEGV in crash_here ← main (fr_crash)"
  std::vector<SignatureFrame> frames;
  nlohmann::json ToJson() const;
};

// `backtrace` is a crash record's `backtrace` section (coredump::Backtrace:
// {"threads": [{"tid", "frames": [{"function", "dso", ...}]}], "crashing_tid"}),
// the crashing thread first. `program` names the crash when there is no
// usable frame (the executable's path or comm): such crashes group by
// program and signal.
CrashSignature ComputeSignature(const nlohmann::json& backtrace, const std::string& signal_name,
                                const std::string& program);

// The normalized name of one frame (exposed for tests and for the docs).
std::string NormalizeFunction(const std::string& function);
std::string NormalizeModule(const std::string& dso_path);
// Text safe to store and print: at most `max` bytes, cut on a UTF-8
// boundary, control bytes replaced by '?'.
std::string BoundedText(const std::string& s, size_t max);

struct IndexCrash;

// Reads a crash record (kind "crash"): its meta's crash and processes, the
// `metadata` section's build-id and the `backtrace` section, and fills what
// the index keeps, signature included. InvalidArgument for a record that is
// not a crash; a missing or unreadable backtrace gives the program's
// signature (a crash is indexed whatever its record lacks).
StatusOr<IndexCrash> CrashFromRecord(const store::RecordReader& reader);

}  // namespace flightrec::fleet
