// The panic region (module/uapi/flightrec.h, "Panic region"): what an earlier
// boot's flightrec.ko wrote at a kernel panic into memory that survived the
// reboot. This file only validates and splits it; panic_ingest.h turns it into
// a record.
//
// The bytes came from RAM across a reset: anything may be wrong with them (a
// cold boot's noise, a panic cut short, bit flips, a hostile writer of
// /dev/mem). So every offset and length is checked against the bytes we
// have before anything is read, every checksum is verified, the work is
// linear in the region's size, and a damaged part is dropped and named
// ("cpu 1: data checksum mismatch") while the rest is kept. Only a header
// that cannot be trusted (no magic, bad checksum, unknown version, sizes
// that do not add up) refuses the whole region.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "common/status.h"
#include "module/uapi/flightrec.h"
#include "recorder/module/module_backend.h"

namespace flightrec::recorder::module {

// CRC-32 as zlib's crc32(0, p, n) computes it (the uapi's checksum).
uint32_t PanicCrc32(const uint8_t* p, size_t n);

// One CPU's history as the region holds it, its DATA records decoded.
struct PanicCpu {
  flightrec_panic_cpu desc{};
  std::vector<SampleRecord> records;
  uint64_t malformed_bytes = 0;  // bytes ParseDataRecords could not walk
};

struct PanicRegion {
  flightrec_panic_header header{};           // checked: magic, version, sizes, crc
  size_t bytes = 0;                          // bytes we were given (<= header.region_size)
  std::string boot_id;                       // the crashed boot's, as /proc/.../boot_id prints it
  std::string release;                       // NUL-terminated within its field
  std::string panic_msg;                     // raw bytes: escape before printing
  std::vector<PanicCpu> cpus;                // the CPUs whose copy is whole and checked
  std::vector<flightrec_sideband> sideband;  // empty when damaged
  std::vector<flightrec_panic_module> modules;  // empty when damaged
  // The panic record (header rec_off): the panicking CPU's stack at panic()
  // entry (F_ENTRY) or in the notifier; in no CPU's copy and no counter.
  std::optional<SampleRecord> panic_record;
  // What was dropped and why, one line each ("cpu 1: data checksum mismatch").
  std::vector<std::string> damaged;
  bool sideband_ok = false;
  bool modules_ok = false;
  bool cpu_table_ok = false;
};

// Bounds: a region larger than this is refused (the module maps a few MiB;
// decoded records take up to 8 times their bytes in memory).
constexpr uint64_t kMaxPanicRegionBytes = 256ull << 20;
// nr_cpu_ids can be at most NR_CPUS (CONFIG_NR_CPUS_RANGE_END is 8192).
constexpr uint32_t kMaxPanicCpus = 8192;

// Validates `len` bytes read from the region's start (PANIC_READ). Errors:
// NotFound with no magic (a cold boot, or a region never armed) or a region
// still ARMED (no panic happened); Corrupt for a header that fails its
// checksum or whose sizes do not add up; Unsupported for another version.
StatusOr<PanicRegion> ParsePanicRegion(const uint8_t* p, size_t len);

// "0123...-..." from the 16 raw bytes, as /proc/sys/kernel/random/boot_id.
std::string FormatBootId(const uint8_t id[16]);

// A NUL-terminated field of at most n bytes (n when there is no NUL).
std::string FieldString(const char* p, size_t n);

}  // namespace flightrec::recorder::module
