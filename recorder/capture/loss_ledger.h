// LossLedger: the exact accounting of one snapshot's samples, by counter.
// Every snapshot path (perf rings, flightrec.ko rings, a crash marker) fills
// one per CPU and sums them, and the record's `loss` section is its JSON:
// the counter names are part of the record format (docs/FORMAT.md), so they
// live in one enum with one ToString instead of as string literals at each
// writer.
#pragma once

#include <array>
#include <cstdint>
#include <string_view>

#include <nlohmann/json.hpp>

namespace flightrec::recorder {

enum class LossCounter : uint8_t {
  kProduced,             // samples the kernel counted as taken
  kInRing,               // samples found in the copy of the ring(s)
  kInWindow,             // ... of them inside the requested window
  kOutsideWindow,        // ... of them older than the window
  kPaused,               // dropped while the output was paused/frozen
  kOverwritten,          // overwritten in an overwrite ring before the copy
  kRingLostRecords,      // perf PERF_RECORD_LOST counts in the data ring
  kMalformed,            // perf records that did not parse
  kMalformedBytes,       // module ring bytes that did not parse
  kSidebandLost,         // sideband records lost (mappings unknown then)
  kLostInWindow,         // perf: the window's share of every loss
  kOverwrittenInWindow,  // perf: the window's share of kOverwritten (estimate)
  kPausedInWindow,       // perf: pauses that ended inside the window
  kRingLostInWindow,     // perf: ring losses inside the window
  kSize,                 // module: records too large for their ring
  kTornBytes,            // module: bytes the writer overwrote while we copied
  kOverwrittenBytes,     // crash marker: bytes below the preserved position
  kThrottled,            // module: throttled periods (no sample, no loss counter)
  kCpusNotCounting,      // module: online CPUs whose counter is not active
  kFilteredPid,          // in the window, but not one of the dump's pids
  kNotCopied,            // panic region: in the ring at the panic, beyond the CPU's share
  kBelowThreshold,       // off-CPU: blocked for less than the threshold (not a loss)
  kEndUnknown,           // off-CPU: switch-in overwritten, so how long it blocked is unknown
  kEnd,                  // not a counter: the number of counters
};

// The counter's name in records and status ("in_window", ...).
const char* ToString(LossCounter c);

class LossLedger {
 public:
  // A counter once set or added is present in ToJson() even when 0: which
  // counters a backend keeps is itself information (a crash marker has no
  // "produced").
  void Set(LossCounter c, uint64_t v);
  void Add(LossCounter c, uint64_t v);
  bool Has(LossCounter c) const { return present_[Index(c)]; }
  uint64_t Get(LossCounter c) const { return values_[Index(c)]; }
  // By name, for callers that hold one (tests, the record's JSON); throws
  // std::out_of_range for a counter that is not present, as std::map::at.
  uint64_t at(std::string_view name) const;
  // Sums the other ledger's present counters into this one.
  LossLedger& operator+=(const LossLedger& o);
  // {name: value} of the present counters.
  nlohmann::json ToJson() const;
  // The inverse, for readers of a record: a counter is present when its name
  // is (a value that is no unsigned number reads as 0); other keys are not
  // counters and are skipped.
  static LossLedger FromJson(const nlohmann::json& j);
  // The samples of the window that never reached the record: the window's
  // own estimate when the backend makes one (perf), else every loss the
  // backend counted over the ring's life (paused + overwritten + ring lost).
  uint64_t LostInWindow() const;

 private:
  static size_t Index(LossCounter c) { return static_cast<size_t>(c); }
  std::array<uint64_t, static_cast<size_t>(LossCounter::kEnd)> values_{};
  std::array<bool, static_cast<size_t>(LossCounter::kEnd)> present_{};
};

}  // namespace flightrec::recorder
