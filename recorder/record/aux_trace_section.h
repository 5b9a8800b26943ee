// The `aux_trace` section of a dump record (docs/FORMAT.md, "Hardware trace
// section"): the bytes a trace PMU (intel_pt, arm_spe, cs_etm) left in each
// CPU's perf AUX area at the snapshot, with where they sat in the kernel's
// AUX stream (aux_head), the PERF_RECORD_AUX flags seen, and the PMU's
// attributes needed to decode them. Written by recorderd (trusted); read by
// `recorder trace` from records that are hostile input, so decoding bounds
// every count and length and names what is wrong.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"
#include "store/record_file.h"

namespace flightrec::recorder {

inline constexpr const char* kSectionAuxTrace = "aux_trace";

// PERF_AUX_FLAG_* (include/uapi/linux/perf_event.h): how the PMU filled the
// area. TRUNCATED: data lost (the area was full); OVERWRITE: snapshot mode,
// old data overwritten; PARTIAL: the PMU's record is incomplete (PT: packets
// cut at the start); COLLISION: samples collided (SPE).
inline constexpr uint64_t kAuxFlagTruncated = 0x01;
inline constexpr uint64_t kAuxFlagOverwrite = 0x02;
inline constexpr uint64_t kAuxFlagPartial = 0x04;
inline constexpr uint64_t kAuxFlagCollision = 0x08;
// "truncated|overwrite", "" for none; unknown bits as hex.
std::string AuxFlagNames(uint64_t flags);

// Bounds a reader enforces (a writer never exceeds them): CPUs, one CPU's
// area (the kernel caps AUX at 2^32 pages; recorderd asks for at most 1 GiB)
// and the whole section.
inline constexpr size_t kMaxAuxCpus = 4096;
inline constexpr uint64_t kMaxAuxAreaBytes = 1ull << 30;
inline constexpr uint64_t kMaxAuxSectionBytes = 2ull << 30;
inline constexpr size_t kMaxAuxPmuName = 64;

struct AuxCpuTrace {
  uint32_t cpu = 0;
  // The task running on the CPU when the trace was cut (0: unknown): the
  // process whose images the trace is decoded against.
  uint32_t pid = 0;
  uint32_t tid = 0;
  uint64_t aux_head = 0;     // the kernel's aux_head at the cut: bytes ever written
  uint64_t aux_size = 0;     // the AUX area's size (a power of two)
  uint64_t flags = 0;        // PERF_AUX_FLAG_* of the PERF_RECORD_AUX records since the last cut
  uint64_t cut_time_ns = 0;  // CLOCK_MONOTONIC
  std::string data;          // oldest first, ending at aux_head (stream offset aux_head - size)
  uint64_t stream_offset() const { return aux_head - data.size(); }
};

struct AuxTrace {
  std::string pmu;  // "intel_pt", "arm_spe_0", "cs_etm"
  uint32_t pmu_type = 0;
  uint64_t config = 0, config1 = 0, config2 = 0;
  // TSC to perf clock (perf_event_mmap_page's time_mult/shift/zero when
  // cap_user_time_zero; mult 0 = unknown: times stay in TSC ticks).
  uint32_t time_mult = 0;
  uint16_t time_shift = 0;
  uint64_t time_zero = 0;
  std::vector<AuxCpuTrace> cpus;
};

std::string EncodeAuxTrace(const AuxTrace& t);
// `what` names the record in errors.
StatusOr<AuxTrace> DecodeAuxTrace(std::string_view bytes, const std::string& what);
// The record's section, or NotFound naming the record when it has none.
StatusOr<AuxTrace> LoadAuxTrace(const store::RecordReader& reader);

}  // namespace flightrec::recorder
