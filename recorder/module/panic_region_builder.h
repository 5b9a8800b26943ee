// Test-only: writes a panic region byte by byte as module/uapi/flightrec.h
// lays it out (what flightrec.ko's panic notifier writes), so the parser and
// the ingest path are tested on regions whose every field the test chose,
// including damaged ones. Header-only; used by unit tests and the fuzz seeds.
#pragma once

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "module/uapi/flightrec.h"
#include "recorder/module/panic_region.h"

namespace flightrec::recorder::module::testing {

class PanicRegionBuilder {
 public:
  PanicRegionBuilder(uint64_t region_size, uint32_t nr_cpus) : cpus_(nr_cpus) {
    h_.magic = FLIGHTREC_PANIC_MAGIC;
    h_.version = FLIGHTREC_PANIC_VERSION;
    h_.header_size = sizeof(flightrec_panic_header);
    h_.region_size = region_size;
    h_.state = FLIGHTREC_PANIC_CAPTURED;
    for (int i = 0; i < 16; ++i) h_.boot_id[i] = static_cast<uint8_t>(0x10 + i);
    std::strncpy(h_.release, "6.1.0-56-amd64", sizeof(h_.release) - 1);
    h_.kernel_anchor = 0xffffffff81100000ull;
    h_.nr_cpus = nr_cpus;
    h_.period = 10'000'000;  // 100 Hz cpu-clock
    h_.event = FLIGHTREC_EVENT_CPU_CLOCK;
    h_.sample_size = sizeof(flightrec_sample);
    for (uint32_t c = 0; c < nr_cpus; ++c) {
      cpus_[c].desc.cpu = c;
      cpus_[c].desc.flags = FLIGHTREC_PANIC_CPU_ONLINE;
      // Histories start mid-ring, as after the ring wrapped a few times.
      cpus_[c].desc.data_first = 3 * FLIGHTREC_DATA_CHUNK + 64 * c;
    }
  }

  flightrec_panic_header& header() { return h_; }
  flightrec_panic_cpu& cpu(uint32_t c) { return cpus_[c].desc; }
  void SetMessage(const std::string& m) {
    std::memset(h_.panic_msg, 0, sizeof(h_.panic_msg));
    std::memcpy(h_.panic_msg, m.data(), std::min(m.size(), sizeof(h_.panic_msg) - 1));
  }
  void SetRelease(const std::string& r) {
    std::memset(h_.release, 0, sizeof(h_.release));
    std::memcpy(h_.release, r.data(), std::min(r.size(), sizeof(h_.release) - 1));
  }

  // Appends one DATA sample record to `cpu`'s history (a PAD record first
  // when it would cross a FLIGHTREC_DATA_CHUNK boundary, as the ring does).
  void AddSample(uint32_t cpu, uint64_t time_ns, uint32_t pid, uint32_t tid, uint64_t ip,
                 bool kernel, const std::vector<uint64_t>& kframes,
                 const std::vector<uint64_t>& uframes) {
    Cpu& c = cpus_[cpu];
    flightrec_sample s{};
    s.size = static_cast<uint32_t>(sizeof(s) + 8 * (kframes.size() + uframes.size()));
    s.type = FLIGHTREC_REC_SAMPLE;
    const uint64_t pos = c.desc.data_first + c.data.size();
    const uint64_t room = FLIGHTREC_DATA_CHUNK - pos % FLIGHTREC_DATA_CHUNK;
    if (s.size > room) {
      flightrec_sample pad{};
      pad.size = static_cast<uint32_t>(room);
      pad.type = FLIGHTREC_REC_PAD;
      Append(&c.data, &pad, 8);
      c.data.resize(c.data.size() + room - 8, 0xa5);  // only size/type are valid
    }
    s.time_ns = time_ns;
    s.ip = ip;
    s.seq = c.desc.data_first + c.data.size();
    s.cpu = cpu;
    s.pid = pid;
    s.tid = tid;
    s.mode = kernel ? FLIGHTREC_MODE_KERNEL : FLIGHTREC_MODE_USER;
    s.nr_kframes = static_cast<uint16_t>(kframes.size());
    s.nr_uframes = static_cast<uint16_t>(uframes.size());
    s.abi = uframes.empty() ? 0 : 2;  // PERF_SAMPLE_REGS_ABI_64
    Append(&c.data, &s, sizeof(s));
    Append(&c.data, kframes.data(), 8 * kframes.size());
    Append(&c.data, uframes.data(), 8 * uframes.size());
    ++c.desc.records;
    c.desc.last_time_ns = time_ns;
  }

  // The panic record (header rec_off): the panicking CPU's stack at the
  // panic, placed where flightrec.ko puts it (after the header, 64-aligned).
  void SetPanicRecord(uint32_t cpu, uint64_t time_ns, uint32_t pid, uint64_t ip,
                      const std::vector<uint64_t>& kframes, const std::vector<uint64_t>& uframes) {
    flightrec_sample s{};
    s.size = static_cast<uint32_t>(sizeof(s) + 8 * (kframes.size() + uframes.size()));
    s.type = FLIGHTREC_REC_SAMPLE;
    s.flags = FLIGHTREC_SAMPLE_CRASH;
    s.time_ns = time_ns;
    s.ip = ip;
    s.cpu = cpu;
    s.pid = s.tid = pid;
    s.mode = FLIGHTREC_MODE_KERNEL;
    s.nr_kframes = static_cast<uint16_t>(kframes.size());
    s.nr_uframes = static_cast<uint16_t>(uframes.size());
    s.abi = uframes.empty() ? 0 : 2;
    rec_.clear();
    Append(&rec_, &s, sizeof(s));
    Append(&rec_, kframes.data(), 8 * kframes.size());
    Append(&rec_, uframes.data(), 8 * uframes.size());
    h_.panic_cpu = cpu;
    h_.panic_time_ns = time_ns;
    h_.flags |= FLIGHTREC_PANIC_F_ENTRY;
  }

  void AddSideband(const flightrec_sideband& r) { sideband_.push_back(r); }
  void AddMmap(uint64_t time_ns, uint32_t pid, uint64_t start, uint64_t len, uint64_t pgoff,
               uint32_t dev, uint64_t ino, const std::string& path) {
    flightrec_sideband r{};
    r.type = FLIGHTREC_SB_MMAP;
    r.time_ns = time_ns;
    r.pid = r.tid = pid;
    r.start = start;
    r.len = len;
    r.pgoff = pgoff;
    r.dev = dev;
    r.ino = ino;
    std::strncpy(r.path, path.c_str(), sizeof(r.path) - 1);
    AddSideband(r);
  }
  void AddModule(const std::string& name, uint64_t base, uint64_t size) {
    flightrec_panic_module m{};
    std::strncpy(m.name, name.c_str(), sizeof(m.name) - 1);
    m.base = base;
    m.size = size;
    modules_.push_back(m);
  }

  // Lays the region out (header, CPU table, modules, sideband, then each
  // CPU's data), fills counters the test did not set and every checksum.
  std::vector<uint8_t> Build() {
    std::vector<uint8_t> out(h_.region_size, 0);
    uint64_t off = FLIGHTREC_PANIC_HEADER_BYTES;
    h_.cpu_off = off;
    h_.cpu_desc_size = sizeof(flightrec_panic_cpu);
    off += cpus_.size() * sizeof(flightrec_panic_cpu);
    h_.mod_off = off;
    h_.mod_desc_size = sizeof(flightrec_panic_module);
    h_.mod_count = static_cast<uint32_t>(modules_.size());
    off += modules_.size() * sizeof(flightrec_panic_module);
    h_.sb_off = off;
    h_.sb_count = static_cast<uint32_t>(sideband_.size());
    for (size_t i = 0; i < sideband_.size(); ++i) sideband_[i].seq = h_.sb_first_seq + i;
    off += sideband_.size() * sizeof(flightrec_sideband);
    off = (off + 7) & ~7ull;
    h_.data_off = off;
    std::vector<flightrec_panic_cpu> table;
    for (auto& c : cpus_) {
      flightrec_panic_cpu d = c.desc;
      d.data_off = c.data.empty() ? 0 : off;
      d.data_len = c.data.size();
      d.data_end = d.data_first + d.data_len;
      d.written = d.overwritten + d.not_copied + d.records;
      d.produced = d.written + d.dropped_frozen + d.dropped_size;
      d.data_crc = PanicCrc32(c.data.data(), c.data.size());
      if (!c.data.empty()) Put(&out, off, c.data.data(), c.data.size());
      off += c.data.size();
      table.push_back(d);
    }
    h_.data_size = off - h_.data_off;
    if (!rec_.empty()) {
      // Its seq is the panicking CPU's head: the ring never held it.
      flightrec_sample s{};
      std::memcpy(&s, rec_.data(), sizeof(s));
      if (s.cpu < table.size()) s.seq = table[s.cpu].data_end;
      std::memcpy(rec_.data(), &s, sizeof(s));
      h_.rec_off = (sizeof(flightrec_panic_header) + 63) & ~63ull;
      h_.rec_size = static_cast<uint32_t>(rec_.size());
      Put(&out, h_.rec_off, rec_.data(), rec_.size());
      h_.rec_crc = PanicCrc32(rec_.data(), rec_.size());
    }
    Put(&out, h_.cpu_off, table.data(), table.size() * sizeof(table[0]));
    h_.cpu_crc = PanicCrc32(out.data() + h_.cpu_off, table.size() * sizeof(table[0]));
    Put(&out, h_.mod_off, modules_.data(), modules_.size() * sizeof(modules_[0]));
    h_.mod_crc = PanicCrc32(out.data() + h_.mod_off, modules_.size() * sizeof(modules_[0]));
    Put(&out, h_.sb_off, sideband_.data(), sideband_.size() * sizeof(sideband_[0]));
    h_.sb_crc = PanicCrc32(out.data() + h_.sb_off, sideband_.size() * sizeof(sideband_[0]));
    Reseal(&out, h_);
    return out;
  }

  // Writes `h` as the region's header with a correct header_crc: tests that
  // damage a field behind the header's checksum call it after.
  static void Reseal(std::vector<uint8_t>* region, flightrec_panic_header h) {
    h.header_crc = 0;
    h.header_crc = PanicCrc32(reinterpret_cast<const uint8_t*>(&h), sizeof(h));
    std::memcpy(region->data(), &h, sizeof(h));
  }
  static flightrec_panic_header HeaderOf(const std::vector<uint8_t>& region) {
    flightrec_panic_header h{};
    std::memcpy(&h, region.data(), sizeof(h));
    return h;
  }
  static flightrec_panic_cpu CpuOf(const std::vector<uint8_t>& region, uint32_t i) {
    const auto h = HeaderOf(region);
    flightrec_panic_cpu c{};
    std::memcpy(&c, region.data() + h.cpu_off + i * sizeof(c), sizeof(c));
    return c;
  }

 private:
  struct Cpu {
    flightrec_panic_cpu desc{};
    std::vector<uint8_t> data;
  };
  static void Append(std::vector<uint8_t>* v, const void* p, size_t n) {
    const auto* b = static_cast<const uint8_t*>(p);
    v->insert(v->end(), b, b + n);
  }
  static void Put(std::vector<uint8_t>* v, uint64_t off, const void* p, size_t n) {
    if (n) std::memcpy(v->data() + off, p, n);
  }
  flightrec_panic_header h_{};
  std::vector<Cpu> cpus_;
  std::vector<flightrec_sideband> sideband_;
  std::vector<flightrec_panic_module> modules_;
  std::vector<uint8_t> rec_;  // the panic record, if set
};

}  // namespace flightrec::recorder::module::testing
