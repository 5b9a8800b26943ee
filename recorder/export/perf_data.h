// Encoding pieces of the perf.data export (perf_data.cc), with unit tests.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "common/status.h"

namespace flightrec::recorder::exporter::perfdata {

// "PERFILE2" read as a native-endian u64 (header.c __perf_magic2).
constexpr uint64_t kMagic = 0x32454c4946524550ULL;
// sizeof(struct perf_file_header): magic, size, attr_size, three sections,
// the 256-bit feature bitmap.
constexpr uint64_t kFileHeaderSize = 8 + 8 + 8 + 3 * 16 + 4 * 8;
// PERF_ATTR_SIZE_VER7: perf 6.1's struct perf_event_attr.
constexpr uint32_t kAttrSize = 128;
// PERF_SAMPLE_IP | TID | TIME | CPU | PERIOD | CALLCHAIN: what our samples carry.
constexpr uint64_t kSampleType =
    (1u << 0) | (1u << 1) | (1u << 2) | (1u << 7) | (1u << 8) | (1u << 5);
constexpr uint32_t kRecordHeaderBuildId = 67;  // PERF_RECORD_HEADER_BUILD_ID
constexpr size_t kMaxBuildId = 20;             // perf_record_mmap2's build_id[20]

// Native-endian byte builder.
class Buf {
 public:
  void U8(uint8_t v) { Raw(v); }
  void U16(uint16_t v) { Raw(v); }
  void U32(uint32_t v) { Raw(v); }
  void U64(uint64_t v) { Raw(v); }
  void Bytes(std::string_view s) { data_.append(s); }
  // s, a NUL, and zeros up to a multiple of align.
  void Str(std::string_view s, size_t align);
  // struct perf_header_string.
  void HeaderString(std::string_view s);
  const std::string& data() const { return data_; }
  size_t size() const { return data_.size(); }

 private:
  template <typename T>
  void Raw(T v) {
    data_.append(reinterpret_cast<const char*>(&v), sizeof(v));
  }
  std::string data_;
};

// Lowercase or uppercase hex → bytes; "" when not a build-id (odd length,
// not hex, longer than 20 bytes).
std::string BuildIdBytes(std::string_view hex);

struct EventAttr {
  uint32_t type = 1;    // PERF_TYPE_SOFTWARE
  uint64_t config = 0;  // PERF_COUNT_SW_CPU_CLOCK
  uint64_t period = 0;  // fixed period, or
  uint64_t freq = 0;    // frequency mode
  std::string name;
};
// The attr of the record's event as its config names it ("cpu-clock",
// "cycles", "type T config C period P"); anything else is an error.
StatusOr<EventAttr> AttrForEvent(std::string_view event, uint64_t frequency_hz);
// struct perf_file_attr: the attr (kAttrSize bytes) and an empty ids section.
std::string FileAttr(const EventAttr& ev);

// This boot's id (/proc/sys/kernel/random/boot_id), "" if unreadable.
std::string CurrentBootId();
// A symbol's address in a kallsyms text ("ADDR TYPE NAME [MODULE]"); 0 when
// absent or hidden (kptr_restrict shows zeros to users).
uint64_t KallsymsAddress(const std::string& path, std::string_view symbol);

}  // namespace flightrec::recorder::exporter::perfdata
