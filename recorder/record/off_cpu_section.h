// The off-CPU sections of a dump record (docs/FORMAT.md, "Off-CPU
// sections"): `off_cpu`, the blocked intervals' switch-out samples in the
// events encoding (period = nanoseconds off CPU), and `off_cpu_info`, JSON
// with the threshold and each interval's state. Records are hostile input:
// decoding bounds the count and refuses intervals that end after the
// record's freeze time (a huge duration), naming the interval.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "common/status.h"
#include "recorder/capture/off_cpu.h"
#include "store/record_file.h"

namespace flightrec::recorder {

inline constexpr const char* kSectionOffCpu = "off_cpu";
inline constexpr const char* kSectionOffCpuInfo = "off_cpu_info";

// Intervals a record may hold: a reader refuses more (a real window holds a
// few thousand after the threshold).
inline constexpr size_t kMaxOffCpuIntervals = 1u << 22;

struct OffCpuSections {
  std::string events;  // section `off_cpu`
  std::string info;    // section `off_cpu_info`
};
OffCpuSections EncodeOffCpu(const std::vector<OffCpuInterval>& intervals, int64_t threshold_ns);

struct OffCpuRecord {
  bool present = false;  // the record was written with off-CPU capture on
  int64_t threshold_ns = 0;
  std::vector<OffCpuInterval> intervals;  // by switch-out time
};
// Decodes the two sections' bytes; freeze_ns is the record's freeze time
// (config), which no interval may end after. `what` names the record.
StatusOr<OffCpuRecord> DecodeOffCpu(std::string_view events, std::string_view info,
                                    uint64_t freeze_ns, const std::string& what);
// Reads and decodes a record's off-CPU sections (present = false without them).
StatusOr<OffCpuRecord> LoadOffCpu(const store::RecordReader& reader, uint64_t freeze_ns);

}  // namespace flightrec::recorder
