#include "recorder/analysis/pt_decode.h"

#include <intel-pt.h>

#include <cstring>
#include <memory>

#include <fmt/format.h>

namespace flightrec::recorder::analysis {
namespace {

struct ImageDeleter {
  void operator()(pt_image* i) const { pt_image_free(i); }
};
struct DecoderDeleter {
  void operator()(pt_insn_decoder* d) const { pt_insn_free_decoder(d); }
};

// Collects steps and instructions; bounds what it keeps.
class FlowBuilder {
 public:
  FlowBuilder(const PtDecodeOptions& opts, PtDecoded* out) : opts_(opts), out_(out) {}
  void Step(PtStep::Kind kind, uint64_t ip, std::string note = "") {
    PtStep s;
    s.kind = kind;
    s.ip = ip;
    s.tsc = tsc_;
    s.has_tsc = has_tsc_;
    s.note = std::move(note);
    if (kind == PtStep::Kind::kCall) s.depth = depth_++;
    if (kind == PtStep::Kind::kReturn) s.depth = --depth_;
    if (kind != PtStep::Kind::kCall && kind != PtStep::Kind::kReturn) s.depth = depth_;
    // Only a call or return right before the next instruction has a target.
    pending_target_ = kind == PtStep::Kind::kCall || kind == PtStep::Kind::kReturn;
    if (out_->steps.size() >= opts_.max_steps) {
      out_->steps.pop_front();
      ++out_->steps_dropped;
    }
    out_->steps.push_back(std::move(s));
  }
  void Insn(const pt_insn& in) {
    if (pending_target_) out_->steps.back().target = in.ip;
    pending_target_ = false;
    ++out_->instructions;
    PtInsn k;
    k.ip = in.ip;
    k.size = in.size;
    std::memcpy(k.raw, in.raw, sizeof k.raw);
    k.iclass = in.iclass;
    k.tsc = tsc_;
    k.has_tsc = has_tsc_;
    if (opts_.last_insns > 0) {
      if (out_->last.size() >= opts_.last_insns) out_->last.pop_front();
      out_->last.push_back(k);
    }
    if (in.iclass == ptic_call || in.iclass == ptic_far_call) Step(PtStep::Kind::kCall, in.ip);
    if (in.iclass == ptic_return || in.iclass == ptic_far_return) {
      Step(PtStep::Kind::kReturn, in.ip);
    }
  }
  void Time(pt_insn_decoder* dec) {
    uint64_t t = 0;
    if (pt_insn_time(dec, &t, nullptr, nullptr) >= 0) {
      tsc_ = t;
      has_tsc_ = true;
    }
  }
  void Event(const pt_event& ev) {
    // Tracing stopped right after a call or return (a fault at the first
    // instruction of the callee): the stop is where it went.
    if (pending_target_ && ev.type == ptev_async_disabled) {
      out_->steps.back().target = ev.variant.async_disabled.at;
    }
    switch (ev.type) {
      case ptev_enabled:
        Step(PtStep::Kind::kEnabled, ev.variant.enabled.ip);
        break;
      case ptev_disabled:
        Step(PtStep::Kind::kDisabled, ev.ip_suppressed ? 0 : ev.variant.disabled.ip);
        break;
      case ptev_async_disabled:
        Step(PtStep::Kind::kDisabled, ev.variant.async_disabled.at);
        break;
      case ptev_overflow:
        Step(PtStep::Kind::kOverflow, ev.ip_suppressed ? 0 : ev.variant.overflow.ip);
        break;
      default:
        break;
    }
  }

 private:
  const PtDecodeOptions& opts_;
  PtDecoded* out_;
  int depth_ = 0;
  uint64_t tsc_ = 0;
  bool has_tsc_ = false;
  bool pending_target_ = false;
};

// Decodes from one sync point until an error or the end; returns the status
// that stopped it (-pte_eos at the end).
int DecodeFromSync(pt_insn_decoder* dec, int status, FlowBuilder& fb, PtDecoded* out,
                   const PtDecodeOptions& opts) {
  for (;;) {
    while (status & pts_event_pending) {
      pt_event ev;
      status = pt_insn_event(dec, &ev, sizeof ev);
      if (status < 0) return status;
      fb.Event(ev);
    }
    if (status & pts_eos) return -pte_eos;
    if (out->instructions >= opts.max_insns) {
      out->insn_limit_hit = true;
      return -pte_eos;
    }
    pt_insn insn;
    status = pt_insn_next(dec, &insn, sizeof insn);
    if (status < 0) return status;
    fb.Time(dec);
    fb.Insn(insn);
  }
}

}  // namespace

const char* PtStepName(PtStep::Kind k) {
  switch (k) {
    case PtStep::Kind::kEnabled:
      return "enabled";
    case PtStep::Kind::kCall:
      return "call";
    case PtStep::Kind::kReturn:
      return "return";
    case PtStep::Kind::kDisabled:
      return "disabled";
    case PtStep::Kind::kOverflow:
      return "overflow";
    case PtStep::Kind::kGap:
      return "gap";
  }
  return "?";
}

const char* PtInsnClassName(int iclass) {
  switch (iclass) {
    case ptic_other:
      return "other";
    case ptic_call:
      return "call";
    case ptic_return:
      return "return";
    case ptic_jump:
      return "jump";
    case ptic_cond_jump:
      return "cond_jump";
    case ptic_far_call:
      return "far_call";
    case ptic_far_return:
      return "far_return";
    case ptic_far_jump:
      return "far_jump";
    case ptic_ptwrite:
      return "ptwrite";
    default:
      return "unknown";
  }
}

uint64_t TscToPerfTime(uint64_t tsc, uint32_t mult, uint16_t shift, uint64_t zero) {
  if (mult == 0) return tsc;
  const uint64_t quot = tsc >> shift;
  const uint64_t rem = tsc & ((uint64_t{1} << shift) - 1);
  return zero + quot * mult + ((rem * mult) >> shift);
}

StatusOr<PtDecoded> DecodePt(std::string_view trace, const std::vector<PtImageFile>& image,
                             const PtDecodeOptions& opts) {
  PtDecoded out;
  std::unique_ptr<pt_image, ImageDeleter> img(pt_image_alloc("flightrec"));
  if (!img) return Internal("libipt: cannot allocate an image");
  for (const auto& f : image) {
    int err = pt_image_add_file(img.get(), f.path.c_str(), f.pgoff, f.len, nullptr, f.start);
    if (err < 0) {
      out.image_notes.push_back(
          fmt::format("{} at {:#x}: {}", f.path, f.start, pt_errstr(pt_errcode(err))));
    }
  }
  if (trace.empty()) return out;  // libipt refuses an empty buffer
  // libipt reads the buffer through a non-const pointer but never writes it.
  std::vector<uint8_t> bytes(trace.begin(), trace.end());
  pt_config config;
  pt_config_init(&config);
  config.begin = bytes.data();
  config.end = bytes.data() + bytes.size();
  std::unique_ptr<pt_insn_decoder, DecoderDeleter> dec(pt_insn_alloc_decoder(&config));
  if (!dec) return Internal("libipt: cannot allocate an instruction decoder");
  if (pt_insn_set_image(dec.get(), img.get()) < 0) return Internal("libipt: cannot set the image");
  FlowBuilder fb(opts, &out);
  for (;;) {
    int status = pt_insn_sync_forward(dec.get());
    if (status < 0) break;  // no further PSB: the end
    status = DecodeFromSync(dec.get(), status, fb, &out, opts);
    if (status == -pte_eos) {
      if (out.insn_limit_hit) break;
      continue;  // a later PSB may follow (the end of the buffer, else)
    }
    uint64_t at = 0;
    pt_insn_get_offset(dec.get(), &at);
    ++out.gaps;
    fb.Step(PtStep::Kind::kGap, 0,
            fmt::format("{} at trace offset {:#x}", pt_errstr(pt_errcode(status)), at));
  }
  return out;
}

}  // namespace flightrec::recorder::analysis
