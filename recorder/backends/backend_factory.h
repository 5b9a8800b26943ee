// The one place that knows which capture backends exist: picks perf_event or
// flightrec.ko from the daemon's options and configures it. Its own library
// (flightrec_recorder_capture_backends), so that the interface library
// (flightrec_recorder_capture) stays free of the backends that depend on it.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "common/status.h"
#include "recorder/capture/capture_backend.h"

namespace flightrec::recorder {

struct BackendOptions {
  std::string backend = "auto";  // auto | perf | module
  std::string module_device = "/dev/flightrec";
  int64_t history_ns = 30'000'000'000;
  uint32_t frequency_hz = 99;
  size_t data_pages = 0;  // 0 = sized from history
  bool callchain = true;
  uint32_t dwarf_stack_bytes = 0;  // --call-graph dwarf,N: N > 0
  // --call-graph dwarf without a size: the module backend then keeps what
  // flightrec.ko copies (its stack_bytes), perf takes 8192 bytes.
  bool dwarf_size_given = false;
  // "" or "auto" = cycles, else cpu-clock; or a discrete software event
  // sampled every `event_period` occurrences: page-faults, context-switches.
  std::string event;
  uint64_t event_period = 1;
  // Off-CPU capture (perf backend): see perf::PerfConfig.
  bool off_cpu = false;
  int64_t off_cpu_threshold_ns = 1'000'000;
  size_t off_cpu_pages = 0;
  uint32_t off_cpu_stack_bytes = 0;
};

// "auto" is the module when its device exists, else perf. Options are checked
// whichever backend is chosen (an unknown --event is an error with either).
StatusOr<std::unique_ptr<CaptureBackend>> CreateBackend(const BackendOptions& options);

}  // namespace flightrec::recorder
