#include "recorder/module/panic_region.h"

#include <zlib.h>

#include <algorithm>
#include <cstring>

#include <fmt/format.h>

namespace flightrec::recorder::module {

uint32_t PanicCrc32(const uint8_t* p, size_t n) {
  // zlib takes a uInt length: feed it in pieces.
  uLong crc = crc32(0L, Z_NULL, 0);
  while (n > 0) {
    const uInt part = static_cast<uInt>(std::min<size_t>(n, 1u << 30));
    crc = crc32(crc, p, part);
    p += part;
    n -= part;
  }
  return static_cast<uint32_t>(crc);
}

std::string FormatBootId(const uint8_t id[16]) {
  std::string s;
  for (int i = 0; i < 16; ++i) {
    if (i == 4 || i == 6 || i == 8 || i == 10) s += '-';
    s += fmt::format("{:02x}", id[i]);
  }
  return s;
}

std::string FieldString(const char* p, size_t n) { return std::string(p, strnlen(p, n)); }

namespace {

// Where [off, off + count * size) lies: "" when inside the bytes we have,
// else why not. The product and the sum are checked for overflow, and even an
// empty range must lie in the region: an offset near 2^64 is no place in it
// (and p + off would overflow the pointer).
std::string CheckRange(uint64_t off, uint64_t count, uint64_t size, const PanicRegion& r) {
  const uint64_t region = r.header.region_size;
  uint64_t bytes = 0, end = 0;
  if (__builtin_mul_overflow(count, size, &bytes) || bytes > region) {
    return fmt::format("{} x {} bytes exceed the region", count, size);
  }
  if (__builtin_add_overflow(off, bytes, &end) || end > region) {
    return fmt::format("[{}, +{}) is past the end of the {}-byte region", off, bytes, region);
  }
  if (bytes == 0) return "";
  if (off < FLIGHTREC_PANIC_HEADER_BYTES) {
    return fmt::format("offset {} is inside the header area", off);
  }
  if (end > r.bytes) {
    return fmt::format("[{}, +{}) is past the {} bytes read (region truncated)", off, bytes,
                       r.bytes);
  }
  return "";
}

void ParseCpus(const uint8_t* p, PanicRegion* r) {
  const flightrec_panic_header& h = r->header;
  if (h.nr_cpus == 0) return;
  if (h.cpu_desc_size != sizeof(flightrec_panic_cpu)) {
    r->damaged.push_back(fmt::format("cpu table: descriptor size {}, expected {}: all CPUs dropped",
                                     h.cpu_desc_size, sizeof(flightrec_panic_cpu)));
    return;
  }
  if (std::string why = CheckRange(h.cpu_off, h.nr_cpus, h.cpu_desc_size, *r); !why.empty()) {
    r->damaged.push_back("cpu table: " + why + ": all CPUs dropped");
    return;
  }
  const uint8_t* table = p + h.cpu_off;
  const size_t table_bytes = size_t{h.nr_cpus} * sizeof(flightrec_panic_cpu);
  if (PanicCrc32(table, table_bytes) != h.cpu_crc) {
    r->damaged.push_back("cpu table: checksum mismatch: all CPUs dropped");
    return;
  }
  r->cpu_table_ok = true;
  // Each CPU's copy is checksummed and parsed: bounded by the region's size
  // in total, or a table whose entries all name the whole region would cost
  // nr_cpus times that.
  uint64_t budget = h.region_size;
  std::vector<bool> seen(h.nr_cpus, false);
  for (uint32_t i = 0; i < h.nr_cpus; ++i) {
    PanicCpu c;
    std::memcpy(&c.desc, table + size_t{i} * sizeof(flightrec_panic_cpu), sizeof(c.desc));
    const flightrec_panic_cpu& d = c.desc;
    if (d.cpu >= h.nr_cpus || seen[d.cpu]) {
      r->damaged.push_back(fmt::format("cpu table entry {}: cpu {} {}: dropped", i, d.cpu,
                                       d.cpu >= h.nr_cpus ? "out of range" : "named twice"));
      continue;
    }
    seen[d.cpu] = true;
    if (std::string why = CheckRange(d.data_off, d.data_len, 1, *r); !why.empty()) {
      r->damaged.push_back(fmt::format("cpu {}: data {}: its history is dropped", d.cpu, why));
      continue;
    }
    if (d.data_len > budget) {
      r->damaged.push_back(fmt::format(
          "cpu {}: data overlaps other CPUs' (more than the region in all): dropped", d.cpu));
      continue;
    }
    budget -= d.data_len;
    const uint8_t* data = d.data_len > 0 ? p + d.data_off : nullptr;
    if (d.data_len > 0 && PanicCrc32(data, d.data_len) != d.data_crc) {
      r->damaged.push_back(
          fmt::format("cpu {}: data checksum mismatch: its history is dropped", d.cpu));
      continue;
    }
    if (d.data_len > 0) {
      c.records = ParseDataRecords(data, d.data_len, d.data_first, &c.malformed_bytes);
    }
    if (c.malformed_bytes > 0) {
      r->damaged.push_back(fmt::format("cpu {}: {} bytes after record {} do not parse: dropped",
                                       d.cpu, c.malformed_bytes, c.records.size()));
    }
    if (c.records.size() != d.records) {
      r->damaged.push_back(fmt::format("cpu {}: the region says {} records, {} were read", d.cpu,
                                       d.records, c.records.size()));
    }
    if (d.data_len > 0 && d.data_first + d.data_len != d.data_end) {
      r->damaged.push_back(fmt::format("cpu {}: the copy [{}, +{}) does not end at the head {}",
                                       d.cpu, d.data_first, d.data_len, d.data_end));
    }
    r->cpus.push_back(std::move(c));
  }
}

void ParseSideband(const uint8_t* p, PanicRegion* r) {
  const flightrec_panic_header& h = r->header;
  if (std::string why = CheckRange(h.sb_off, h.sb_count, sizeof(flightrec_sideband), *r);
      !why.empty()) {
    r->damaged.push_back("sideband: " + why + ": dropped (user frames stay unattributed)");
    return;
  }
  const size_t bytes = size_t{h.sb_count} * sizeof(flightrec_sideband);
  if (bytes > 0 && PanicCrc32(p + h.sb_off, bytes) != h.sb_crc) {
    r->damaged.push_back("sideband: checksum mismatch: dropped (user frames stay unattributed)");
    return;
  }
  r->sideband.resize(h.sb_count);
  if (bytes > 0) std::memcpy(r->sideband.data(), p + h.sb_off, bytes);
  r->sideband_ok = true;
}

void ParseModules(const uint8_t* p, PanicRegion* r) {
  const flightrec_panic_header& h = r->header;
  if (h.mod_count > 0 && h.mod_desc_size != sizeof(flightrec_panic_module)) {
    r->damaged.push_back(fmt::format("module table: entry size {}, expected {}: dropped",
                                     h.mod_desc_size, sizeof(flightrec_panic_module)));
    return;
  }
  if (std::string why = CheckRange(h.mod_off, h.mod_count, sizeof(flightrec_panic_module), *r);
      !why.empty()) {
    r->damaged.push_back("module table: " + why + ": dropped");
    return;
  }
  const size_t bytes = size_t{h.mod_count} * sizeof(flightrec_panic_module);
  if (bytes > 0 && PanicCrc32(p + h.mod_off, bytes) != h.mod_crc) {
    r->damaged.push_back("module table: checksum mismatch: dropped");
    return;
  }
  r->modules.resize(h.mod_count);
  if (bytes > 0) std::memcpy(r->modules.data(), p + h.mod_off, bytes);
  r->modules_ok = true;
}

// The panic record lies in the header area after the header (the module puts
// it at round_up(sizeof(header), 64)): checked like a DATA record, but its
// seq is the panicking CPU's head, not its own position.
void ParsePanicRecord(const uint8_t* p, PanicRegion* r) {
  const flightrec_panic_header& h = r->header;
  if (h.rec_off == 0) {
    r->damaged.push_back("panic record: none (the panicking CPU's stack at the panic is unknown)");
    return;
  }
  if (h.rec_off < sizeof(flightrec_panic_header) || h.rec_off % 8 != 0 ||
      h.rec_size < sizeof(flightrec_sample) || h.rec_size > FLIGHTREC_SAMPLE_MAX_SIZE ||
      h.rec_off + h.rec_size > FLIGHTREC_PANIC_HEADER_BYTES) {
    r->damaged.push_back(fmt::format(
        "panic record: [{}, +{}) is not inside the header area after the header: dropped",
        h.rec_off, h.rec_size));
    return;
  }
  const uint8_t* rec = p + h.rec_off;
  if (PanicCrc32(rec, h.rec_size) != h.rec_crc) {
    r->damaged.push_back("panic record: checksum mismatch: dropped");
    return;
  }
  SampleRecord s;
  std::memcpy(&s.h, rec, sizeof(s.h));
  if (s.h.size != h.rec_size || s.h.type != FLIGHTREC_REC_SAMPLE ||
      s.h.nr_kframes > FLIGHTREC_MAX_KFRAMES || s.h.nr_uframes > FLIGHTREC_MAX_UFRAMES ||
      s.h.size != sizeof(s.h) + 8 * (size_t{s.h.nr_kframes} + s.h.nr_uframes)) {
    r->damaged.push_back(
        fmt::format("panic record: size {}, type {}, {} + {} frames do not add up: dropped",
                    s.h.size, s.h.type, s.h.nr_kframes, s.h.nr_uframes));
    return;
  }
  if (s.h.cpu != h.panic_cpu) {
    r->damaged.push_back(fmt::format(
        "panic record: taken on cpu {}, the header says cpu {} panicked", s.h.cpu, h.panic_cpu));
  }
  std::memcpy(s.kframes, rec + sizeof(s.h), 8 * size_t{s.h.nr_kframes});
  std::memcpy(s.uframes, rec + sizeof(s.h) + 8 * size_t{s.h.nr_kframes},
              8 * size_t{s.h.nr_uframes});
  r->panic_record = s;
}

}  // namespace

StatusOr<PanicRegion> ParsePanicRegion(const uint8_t* p, size_t len) {
  uint64_t magic = 0;
  if (p != nullptr && len >= sizeof(magic)) std::memcpy(&magic, p, sizeof(magic));
  if (magic != FLIGHTREC_PANIC_MAGIC) {
    return NotFound("the panic region has no magic (a cold boot, or it was never armed)");
  }
  if (len < sizeof(flightrec_panic_header)) {
    return Corrupt(fmt::format("panic region: only {} bytes, shorter than its {}-byte header", len,
                               sizeof(flightrec_panic_header)));
  }
  PanicRegion r;
  std::memcpy(&r.header, p, sizeof(r.header));
  const flightrec_panic_header& h = r.header;
  // Version first: another version's header may have another layout, so
  // its checksum is not ours to check.
  if (h.version != FLIGHTREC_PANIC_VERSION) {
    return Unsupported(fmt::format("panic region: version {} (this recorder reads version {})",
                                   h.version, FLIGHTREC_PANIC_VERSION));
  }
  flightrec_panic_header zeroed = h;
  zeroed.header_crc = 0;
  const uint32_t crc = PanicCrc32(reinterpret_cast<const uint8_t*>(&zeroed), sizeof(zeroed));
  if (crc != h.header_crc) {
    return Corrupt(
        fmt::format("panic region: header checksum mismatch (stored {:08x}, computed "
                    "{:08x}): the region is not trusted",
                    h.header_crc, crc));
  }
  if (h.header_size != sizeof(flightrec_panic_header)) {
    return Corrupt(fmt::format("panic region: header size {}, expected {}", h.header_size,
                               sizeof(flightrec_panic_header)));
  }
  if (h.region_size < FLIGHTREC_PANIC_HEADER_BYTES || h.region_size > kMaxPanicRegionBytes) {
    return Corrupt(fmt::format("panic region: size {} outside [{}, {}]", h.region_size,
                               FLIGHTREC_PANIC_HEADER_BYTES, kMaxPanicRegionBytes));
  }
  if (h.nr_cpus > kMaxPanicCpus) {
    return Corrupt(fmt::format("panic region: {} CPUs (at most {})", h.nr_cpus, kMaxPanicCpus));
  }
  r.boot_id = FormatBootId(h.boot_id);
  if (h.state == FLIGHTREC_PANIC_ARMED) {
    return NotFound(
        fmt::format("the panic region is armed by boot {} and holds no panic", r.boot_id));
  }
  if (h.state != FLIGHTREC_PANIC_CAPTURED) {
    return Corrupt(fmt::format("panic region: unknown state {}", h.state));
  }
  r.bytes = static_cast<size_t>(std::min<uint64_t>(len, h.region_size));
  if (len < h.region_size) {
    r.damaged.push_back(
        fmt::format("region: only {} of its {} bytes were read", len, h.region_size));
  }
  r.release = FieldString(h.release, sizeof(h.release));
  r.panic_msg = FieldString(h.panic_msg, sizeof(h.panic_msg));
  if (h.panic_cpu >= h.nr_cpus) {
    r.damaged.push_back(
        fmt::format("header: panic cpu {} is not below nr_cpus {}", h.panic_cpu, h.nr_cpus));
  }
  ParseCpus(p, &r);
  ParseSideband(p, &r);
  ParseModules(p, &r);
  ParsePanicRecord(p, &r);
  return r;
}

}  // namespace flightrec::recorder::module
