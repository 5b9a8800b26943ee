// The event stream: what every capture backend (perf, module) produces and
// what records store, so that live capture and replay of a stored record feed
// the same attribution pipeline (docs/ARCHITECTURE.md, "One pipeline").
//
// Times are CLOCK_MONOTONIC nanoseconds (perf: use_clockid + CLOCK_MONOTONIC;
// module: ktime_get_ns), so they compare with the daemon's own clock; a record
// stores the monotonic→wall offset taken at dump time.
#pragma once

#include <cstdint>
#include <string>
#include <variant>
#include <vector>

namespace flightrec::recorder {

// Where the sampled instruction pointer was.
enum class CpuMode : uint8_t { kUnknown = 0, kKernel = 1, kUser = 2, kHypervisor = 3, kGuest = 4 };

// Optional raw material for DWARF unwinding (PERF_SAMPLE_REGS_USER +
// PERF_SAMPLE_STACK_USER, or the module's AUX ring).
struct UserStack {
  uint64_t regs_mask = 0;      // PERF_REG_X86_* bits present in regs
  std::vector<uint64_t> regs;  // in bit order of regs_mask
  std::vector<uint8_t> stack;  // bytes copied from the user stack pointer upwards
  uint64_t dyn_size = 0;       // bytes the kernel actually filled (<= stack.size())
};

struct Sample {
  uint64_t time_ns = 0;
  uint32_t cpu = 0;
  uint32_t pid = 0;
  uint32_t tid = 0;
  CpuMode mode = CpuMode::kUnknown;
  uint64_t ip = 0;
  uint64_t period = 0;  // event units this sample stands for (ns for cpu-clock)
  // Callchain split at PERF_CONTEXT_KERNEL/USER markers, innermost first. The
  // leaf frame (== ip) is the first entry of the chain of `mode`.
  std::vector<uint64_t> kernel_chain;
  std::vector<uint64_t> user_chain;
  UserStack user_stack;  // empty unless captured with --call-graph dwarf
};

// The per-sample fields of a sample, apart from what identifies its stack:
// what EventDecoder::SkimSample reads (leaving mode, ip and call chains
// encoded, as the stack's identity key), and what an attributed sample
// carries on beside its frames.
struct SampleHead {
  uint64_t time_ns = 0;
  uint32_t cpu = 0;
  uint32_t pid = 0;
  uint32_t tid = 0;
  uint64_t period = 0;
};

// A file (or anonymous) mapping coming into existence: PERF_RECORD_MMAP2 or the
// module's sideband. build_id is raw bytes (empty if the kernel gave none).
struct MmapEvent {
  uint64_t time_ns = 0;
  uint32_t pid = 0;
  uint32_t tid = 0;
  uint64_t start = 0;
  uint64_t len = 0;
  uint64_t pgoff = 0;  // file offset of `start`
  uint32_t maj = 0;
  uint32_t min = 0;
  uint64_t ino = 0;
  uint32_t prot = 0;   // PROT_* bits
  uint32_t flags = 0;  // MAP_* bits
  std::string build_id;
  std::string filename;  // "[vdso]", "//anon", "[heap]" as the kernel names them
  bool kernel = false;   // a kernel module / kernel text map (pid == -1 in perf)
};

struct CommEvent {
  uint64_t time_ns = 0;
  uint32_t pid = 0;
  uint32_t tid = 0;
  std::string comm;
  bool exec = false;  // PERF_RECORD_MISC_COMM_EXEC: the address space was replaced
};

// PERF_RECORD_FORK / PERF_RECORD_EXIT.
struct TaskEvent {
  uint64_t time_ns = 0;
  uint32_t pid = 0;
  uint32_t ppid = 0;
  uint32_t tid = 0;
  uint32_t ptid = 0;
  bool exit = false;
};

// Why samples or sideband are missing. Each cause is counted separately and
// stored in every record (seed 003: loss is reported exactly, by cause).
enum class LossCause : uint8_t {
  kRingLost = 1,       // PERF_RECORD_LOST in a data ring
  kSidebandLost = 2,   // PERF_RECORD_LOST in the sideband ring
  kPaused = 3,         // produced while the ring was paused for a dump
  kOverwritten = 4,    // overwritten in an overwrite ring before the dump
  kOutsideWindow = 5,  // in the ring, but older than --last
  kFilteredPid = 6,    // not one of --pid (not a loss, but accounted)
  kTorn = 7,           // module: record overwritten while it was copied
  kSize = 8,           // module: record too large for its ring
};

struct LostEvent {
  uint64_t time_ns = 0;
  uint32_t cpu = 0;
  LossCause cause = LossCause::kRingLost;
  uint64_t count = 0;
};

using Event = std::variant<Sample, MmapEvent, CommEvent, TaskEvent, LostEvent>;

inline uint64_t EventTime(const Event& e) {
  return std::visit([](const auto& v) { return v.time_ns; }, e);
}

}  // namespace flightrec::recorder
