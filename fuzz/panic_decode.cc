#include "fuzz/panic_decode.h"

#include <xxhash.h>

#include <algorithm>
#include <cstring>
#include <string>
#include <vector>

#include "common/checked_json.h"
#include "fuzz/record_decode.h"
#include "module/uapi/flightrec.h"
#include "recorder/module/panic_ingest.h"

namespace flightrec::fuzz {

void DecodePanicRegion(const uint8_t* data, size_t size) {
  using recorder::module::PanicCrc32;
  std::vector<uint8_t> b(data, data + size);
  const uint64_t h64 = XXH3_64bits(data, size);
  flightrec_panic_header h{};
  // An empty input's data() may be null, which memcpy may not be given.
  if (!b.empty()) std::memcpy(&h, b.data(), std::min(b.size(), sizeof(h)));
  auto in = [&](uint64_t off, uint64_t n) { return off <= b.size() && n <= b.size() - off; };
  if (b.size() >= sizeof(h) && (h64 & 3) != 0) {
    const uint64_t table = uint64_t{h.nr_cpus} * sizeof(flightrec_panic_cpu);
    if (h.nr_cpus <= 64 && in(h.cpu_off, table)) {
      for (uint32_t i = 0; i < h.nr_cpus; ++i) {
        flightrec_panic_cpu c{};
        uint8_t* at = b.data() + h.cpu_off + i * sizeof(c);
        std::memcpy(&c, at, sizeof(c));
        if (in(c.data_off, c.data_len)) c.data_crc = PanicCrc32(b.data() + c.data_off, c.data_len);
        std::memcpy(at, &c, sizeof(c));
      }
      h.cpu_crc = PanicCrc32(b.data() + h.cpu_off, table);
    }
    const uint64_t sb = uint64_t{h.sb_count} * sizeof(flightrec_sideband);
    if (in(h.sb_off, sb)) h.sb_crc = PanicCrc32(b.data() + h.sb_off, sb);
    const uint64_t mods = uint64_t{h.mod_count} * sizeof(flightrec_panic_module);
    if (in(h.mod_off, mods)) h.mod_crc = PanicCrc32(b.data() + h.mod_off, mods);
    if (in(h.rec_off, h.rec_size)) h.rec_crc = PanicCrc32(b.data() + h.rec_off, h.rec_size);
    h.header_crc = 0;
    h.header_crc = PanicCrc32(reinterpret_cast<const uint8_t*>(&h), sizeof(h));
    std::memcpy(b.data(), &h, sizeof(h));
  }
  auto region = recorder::module::ParsePanicRegion(b.data(), b.size());
  if (!region.ok()) return;
  // The same release as the region's (frames resolved through the KASLR
  // delta) or another (unresolved), by one bit of the input.
  recorder::module::KernelEnv env;
  env.release = (h64 & 4) ? region->release : "other";
  env.kallsyms =
      "ffffffff81000000 T _stext\nffffffff81100000 T panic\nffffffff81800000 T _etext\n"
      "ffffffffc0200100 t fr_fn\t[flightrec]\n";
  env.modules = "flightrec 65536 0 - Live 0xffffffffc0200000\n";
  auto dump = recorder::module::BuildPanicDump(
      *region, env, [](const recorder::MmapEvent&) { return std::string(); });
  if (dump.ok()) (void)json::Dump(dump->panic);
}

void DecodeInput(const uint8_t* data, size_t size, bool every_variant) {
  uint64_t magic = 0;
  if (size >= sizeof(magic)) std::memcpy(&magic, data, sizeof(magic));
  if (magic == FLIGHTREC_PANIC_MAGIC) {
    DecodePanicRegion(data, size);
    return;
  }
  DecodeRecordBytes(data, size, every_variant);
}

}  // namespace flightrec::fuzz
