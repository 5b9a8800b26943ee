// From a validated panic region (panic_region.h) to the pieces of a record of
// kind `panic`, and the claim protocol recorderd runs at start
// (PANIC_INFO → PANIC_READ → store → PANIC_RELEASE).
//
// The history becomes the same Snapshot the crash-marker path builds, through
// the module backend's own decoding (AppendSamples, SampleFromRecord,
// OrderSideband, SidebandEvent), so the record replays through the one
// attribution pipeline like any other. What differs is the boot: samples,
// sideband and kernel addresses are the crashed boot's, so
//  * user frames are attributed with the region's sideband (file identity,
//    and the build-id read now from a file that still has the mapped inode);
//  * kernel frames resolve against this boot's symbols shifted by the KASLR
//    delta (the header's anchor minus this boot's `panic`) and the crashed
//    boot's module table, when the release is the same; otherwise they stay
//    "[kernel]+0xOFFSET" / "[module]+0xOFFSET" and the record says why;
//  * wall-clock times come from the crashed boot's mono_to_real_ns.
//
// Thread: recorderd's start, before its loop runs; no state of its own.
#pragma once

#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "common/status.h"
#include "recorder/attribution/attribution.h"
#include "recorder/capture/capture_backend.h"
#include "recorder/module/panic_region.h"

namespace flightrec::recorder::module {

// What this boot's kernel is, for resolving the crashed boot's frames.
struct KernelEnv {
  std::string release;   // uname -r
  std::string kallsyms;  // /proc/kallsyms text ("" if unreadable)
  std::string modules;   // /proc/modules text
  static KernelEnv ReadRunning();
};

// x86-64's kernel image mapping (__START_KERNEL_map, KERNEL_IMAGE_SIZE with
// KASLR: arch/x86/include/asm/page_64_types.h): where an unresolved kernel
// frame's "[kernel]+0xOFFSET" counts from. Modules live above it.
constexpr uint64_t kKernelImageStart = 0xffffffff80000000ull;
constexpr uint64_t kKernelImageSize = 1ull << 30;

// The crashed boot's kernel symbols, as KernelSymbols::FromText reads them.
struct CrashedKernel {
  std::string symbols_text;
  bool resolved = false;  // core-kernel frames have names
  std::string note;       // how they were resolved, or why not
  int64_t kaslr_delta = 0;
};
CrashedKernel CrashedKernelSymbols(const PanicRegion& r, const KernelEnv& env);

// The build-id of a mapped file, read now, only if the file at its path is
// still the one that was mapped (same inode); "" otherwise.
std::string BuildIdIfSameFile(const MmapEvent& m);
using BuildIdFn = std::function<std::string(const MmapEvent&)>;

// Everything WriteDump needs for the record, plus its `panic` section.
struct PanicDump {
  Snapshot snap;
  std::unique_ptr<attribution::CookieTable> cookies;
  std::unique_ptr<attribution::SidebandHistory> history;
  attribution::KernelSymbols ksyms;
  nlohmann::json backend;  // the writing module's event and rate
  nlohmann::json panic;    // section `panic` (docs/FORMAT.md)
  nlohmann::json summary;  // index metadata `panic`: what `crash list` shows
  int64_t mono_to_wall_ns = 0;
  int64_t mono_to_boot_ns = 0;
  int64_t last_ns = 0;  // from the oldest sample held to the panic
};

StatusOr<PanicDump> BuildPanicDump(const PanicRegion& r, const KernelEnv& env,
                                   const BuildIdFn& build_id = BuildIdIfSameFile);

// The outcome of recorderd's claim, with the one line it logs.
struct PanicClaim {
  enum class Outcome {
    kNothing,      // no region configured, or a module without panic support: no log
    kEmpty,        // armed for this boot, nothing from an earlier one
    kStored,       // stored as record_id, then released
    kRefused,      // the module (or this parser) refused the region
    kUnavailable,  // configured but unusable
    kFailed,       // could not read or store it: kept for the next start
  };
  Outcome outcome = Outcome::kNothing;
  std::string message;
  std::string record_id;
};
// What PANIC_INFO's answer means: the outcome and its one log line for every
// state but HELD (nullopt: read the region and store it). `where` names the
// region ("at 0x30000000 (4.0 MiB)").
std::optional<PanicClaim> ClaimFromInfo(const flightrec_panic_info& info, const std::string& where);

// Stores the dump as a record (the daemon's WriteDump) and returns its id.
using StorePanicFn = std::function<StatusOr<std::string>(PanicDump&)>;
// Runs the claim on `device`: never blocks (ioctls only), never throws, and
// releases the region only after `store` committed it (or when nothing in it
// can ever be stored).
// `env` is asked for only when there is a region to store (it reads
// /proc/kallsyms).
PanicClaim ClaimPanicRegion(const std::string& device, const std::function<KernelEnv()>& env,
                            const StorePanicFn& store);

// The claim after PANIC_READ: validate `bytes`, build the dump, store it,
// then call `release` (which returns "" or "; why it failed"). A region that
// fails validation is released unstored (nothing in it can ever be stored),
// unless it is another version's (kept for a recorder that reads it); one
// that could not be stored is kept for the next start.
PanicClaim StoreHeldRegion(const std::vector<uint8_t>& bytes, const std::string& where,
                           const std::function<KernelEnv()>& env, const StorePanicFn& store,
                           const std::function<std::string()>& release);

}  // namespace flightrec::recorder::module
