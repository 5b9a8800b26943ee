#include "recorder/record/aux_trace_section.h"

#include <fmt/format.h>

#include "common/leb128.h"

namespace flightrec::recorder {
namespace {

constexpr std::string_view kMagic{"FRAUX1\r\n", 8};

void PutBytes(std::string* out, std::string_view b) {
  AppendUleb128(out, b.size());
  out->append(b);
}

// Reads the section's fields in order; every failure names the field.
class Reader {
 public:
  explicit Reader(std::string_view b)
      : p_(reinterpret_cast<const uint8_t*>(b.data())), end_(p_ + b.size()) {}
  bool U64(uint64_t* v) { return ReadUleb128(&p_, end_, v); }
  bool U32(uint32_t* v) {
    uint64_t u = 0;
    if (!U64(&u) || u > UINT32_MAX) return false;
    *v = static_cast<uint32_t>(u);
    return true;
  }
  bool Bytes(std::string* s, uint64_t max) {
    uint64_t n = 0;
    if (!U64(&n) || n > max || n > static_cast<uint64_t>(end_ - p_)) return false;
    s->assign(reinterpret_cast<const char*>(p_), n);
    p_ += n;
    return true;
  }
  bool at_end() const { return p_ == end_; }

 private:
  const uint8_t* p_;
  const uint8_t* end_;
};

Status DecodeCpu(Reader& r, AuxCpuTrace* c, size_t i, const std::string& what) {
  auto bad = [&](const char* field) {
    return Corrupt(fmt::format("record {}: section '{}': CPU entry {}: bad or missing {}", what,
                               kSectionAuxTrace, i, field));
  };
  if (!r.U32(&c->cpu)) return bad("cpu");
  if (!r.U32(&c->pid) || !r.U32(&c->tid)) return bad("pid/tid");
  if (!r.U64(&c->aux_head)) return bad("aux_head");
  if (!r.U64(&c->aux_size)) return bad("aux_size");
  if (c->aux_size == 0 || c->aux_size > kMaxAuxAreaBytes || (c->aux_size & (c->aux_size - 1))) {
    return Corrupt(fmt::format(
        "record {}: section '{}': CPU {}: AUX area of {} bytes is not a power of two up to {}",
        what, kSectionAuxTrace, c->cpu, c->aux_size, kMaxAuxAreaBytes));
  }
  if (!r.U64(&c->flags)) return bad("flags");
  if (!r.U64(&c->cut_time_ns)) return bad("cut_time_ns");
  if (!r.Bytes(&c->data, c->aux_size)) return bad("data (longer than the AUX area or the section)");
  // The bytes end at aux_head, so there cannot be more than were written.
  if (c->data.size() > c->aux_head) {
    return Corrupt(fmt::format("record {}: section '{}': CPU {}: {} bytes but aux_head is {}", what,
                               kSectionAuxTrace, c->cpu, c->data.size(), c->aux_head));
  }
  return OkStatus();
}

}  // namespace

std::string AuxFlagNames(uint64_t flags) {
  std::string out;
  auto add = [&out](std::string_view n) {
    if (!out.empty()) out += '|';
    out += n;
  };
  if (flags & kAuxFlagTruncated) add("truncated");
  if (flags & kAuxFlagOverwrite) add("overwrite");
  if (flags & kAuxFlagPartial) add("partial");
  if (flags & kAuxFlagCollision) add("collision");
  if (uint64_t rest = flags & ~uint64_t{0xf}) add(fmt::format("{:#x}", rest));
  return out;
}

std::string EncodeAuxTrace(const AuxTrace& t) {
  std::string out(kMagic);
  PutBytes(&out, t.pmu);
  AppendUleb128(&out, t.pmu_type);
  AppendUleb128(&out, t.config);
  AppendUleb128(&out, t.config1);
  AppendUleb128(&out, t.config2);
  AppendUleb128(&out, t.time_mult);
  AppendUleb128(&out, t.time_shift);
  AppendUleb128(&out, t.time_zero);
  AppendUleb128(&out, t.cpus.size());
  for (const auto& c : t.cpus) {
    AppendUleb128(&out, c.cpu);
    AppendUleb128(&out, c.pid);
    AppendUleb128(&out, c.tid);
    AppendUleb128(&out, c.aux_head);
    AppendUleb128(&out, c.aux_size);
    AppendUleb128(&out, c.flags);
    AppendUleb128(&out, c.cut_time_ns);
    PutBytes(&out, c.data);
  }
  return out;
}

StatusOr<AuxTrace> DecodeAuxTrace(std::string_view bytes, const std::string& what) {
  auto bad = [&](const std::string& msg) {
    return Corrupt(fmt::format("record {}: section '{}': {}", what, kSectionAuxTrace, msg));
  };
  if (bytes.substr(0, kMagic.size()) != kMagic) return bad("does not start with FRAUX1");
  Reader r(bytes.substr(kMagic.size()));
  AuxTrace t;
  uint64_t count = 0;
  uint32_t shift = 0;
  if (!r.Bytes(&t.pmu, kMaxAuxPmuName)) return bad("bad PMU name");
  if (!r.U32(&t.pmu_type) || !r.U64(&t.config) || !r.U64(&t.config1) || !r.U64(&t.config2)) {
    return bad("bad PMU attributes");
  }
  if (!r.U32(&t.time_mult) || !r.U32(&shift) || shift > 63 || !r.U64(&t.time_zero)) {
    return bad("bad time conversion");
  }
  t.time_shift = static_cast<uint16_t>(shift);
  if (!r.U64(&count) || count > kMaxAuxCpus) {
    return bad(fmt::format("CPU count is not a number up to {}", kMaxAuxCpus));
  }
  t.cpus.resize(count);
  for (size_t i = 0; i < count; ++i) RETURN_IF_ERROR(DecodeCpu(r, &t.cpus[i], i, what));
  if (!r.at_end()) return bad("bytes after the last CPU entry");
  return t;
}

StatusOr<AuxTrace> LoadAuxTrace(const store::RecordReader& reader) {
  if (reader.FindSection(kSectionAuxTrace) == nullptr) {
    return NotFound(
        fmt::format("record {} has no hardware trace (section '{}'): it was written without "
                    "recorderd --aux-trace, or on a machine without a trace PMU",
                    reader.display_name(), kSectionAuxTrace));
  }
  ASSIGN_OR_RETURN(std::string bytes, reader.ReadSection(kSectionAuxTrace, kMaxAuxSectionBytes));
  return DecodeAuxTrace(bytes, reader.display_name());
}

}  // namespace flightrec::recorder
