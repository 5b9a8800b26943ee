// The record's `loss` section as types: what the capture lost and where
// (docs/FORMAT.md, "loss"). Its keys are spelled here and in LossLedger's
// one table of counter names; readers ask for counters, never for keys.
#pragma once

#include <optional>

#include <nlohmann/json.hpp>

#include "recorder/capture/loss_ledger.h"

namespace flightrec::recorder {

// The key of the off-CPU history's own accounting inside the loss section.
inline constexpr const char* kLossOffCpu = "off_cpu";

struct LossReport {
  // The off-CPU history's accounting (perf --off-cpu only).
  struct OffCpu {
    LossLedger switch_out;  // blocking switch-outs the kernel produced, kept, lost
    LossLedger switch_in;
    LossLedger intervals;  // what the record left out: below the threshold, end unknown
  };
  bool present = false;  // the record has a loss section (an object)
  LossLedger window;     // the sampled history's counters
  std::optional<OffCpu> off_cpu;

  // Never fails: a missing or malformed section reads as absent, a malformed
  // counter as 0 (the section comes from a record file, hostile or old).
  static LossReport FromJson(const nlohmann::json& loss);
};

}  // namespace flightrec::recorder
