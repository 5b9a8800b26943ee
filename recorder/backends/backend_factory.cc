#include "recorder/backends/backend_factory.h"

#include <linux/perf_event.h>
#include <unistd.h>

#include <map>

#include <fmt/format.h>

#include "recorder/module/module_backend.h"
#include "recorder/perf/perf_backend.h"

namespace flightrec::recorder {

StatusOr<std::unique_ptr<CaptureBackend>> CreateBackend(const BackendOptions& options) {
  std::unique_ptr<CaptureBackend> backend;
  std::string kind = options.backend;
  bool module_present = access(options.module_device.c_str(), F_OK) == 0;
  if (kind == "auto") kind = module_present ? "module" : "perf";
  if (kind == "module" && options.off_cpu) {
    // flightrec.ko would need a sched_switch probe writing into rings of its
    // own (docs/ARCHITECTURE.md, "Off-CPU history").
    return Unsupported(
        "--off-cpu: only the perf backend captures off-CPU time (use --backend perf)");
  }
  if (kind == "module") {
    if (!module_present) {
      return Unsupported(
          "--backend module: /dev/flightrec does not exist (flightrec.ko is not loaded; this "
          "kernel may not support modules). Use --backend perf");
    }
    // The module's event, rate, ring sizes and stack copy size are its load
    // parameters; --call-graph chooses what records keep of them.
    module::ModuleConfig mc;
    mc.callchain = options.callchain;
    mc.dwarf = options.dwarf_stack_bytes > 0;
    mc.dwarf_stack_bytes = options.dwarf_size_given ? options.dwarf_stack_bytes : 0;
    mc.marker_ttl_ns = options.history_ns;
    ASSIGN_OR_RETURN(backend, module::ModuleBackend::Create(options.module_device, mc));
  }
  if (kind != "perf" && kind != "module") {
    return InvalidArgument(fmt::format("unknown backend '{}' (auto, perf, module)", kind));
  }
  perf::PerfConfig pc;
  pc.frequency_hz = options.frequency_hz;
  pc.history_ns = options.history_ns;
  pc.data_pages = options.data_pages;
  pc.callchain = options.callchain;
  pc.dwarf_stack_bytes = options.dwarf_stack_bytes;
  pc.off_cpu = options.off_cpu;
  pc.off_cpu_threshold_ns = options.off_cpu_threshold_ns;
  pc.off_cpu_pages = options.off_cpu_pages;
  pc.off_cpu_stack_bytes = options.off_cpu_stack_bytes;
  if (!options.event.empty() && options.event != "auto") {
    static const std::map<std::string, uint64_t> kSoftware = {
        {"cpu-clock", PERF_COUNT_SW_CPU_CLOCK},
        {"page-faults", PERF_COUNT_SW_PAGE_FAULTS},
        {"context-switches", PERF_COUNT_SW_CONTEXT_SWITCHES},
        {"task-clock", PERF_COUNT_SW_TASK_CLOCK}};
    auto it = kSoftware.find(options.event);
    if (it == kSoftware.end()) {
      return InvalidArgument(fmt::format(
          "unknown event '{}' (auto, cpu-clock, task-clock, page-faults, context-switches)",
          options.event));
    }
    pc.event_type = PERF_TYPE_SOFTWARE;
    pc.event_config = it->second;
    bool clock = options.event == "cpu-clock" || options.event == "task-clock";
    pc.event_period = clock ? 1'000'000'000ull / options.frequency_hz : options.event_period;
  }
  if (!backend) {
    ASSIGN_OR_RETURN(backend, perf::PerfBackend::Create(pc));
  }
  return backend;
}

}  // namespace flightrec::recorder
