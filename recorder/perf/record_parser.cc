#include "recorder/perf/record_parser.h"

#include <cstring>

namespace flightrec::recorder::perf {
namespace {

// PERF_RECORD_MISC_MMAP_BUILD_ID (1 << 14): MMAP2 carries a build-id instead
// of maj/min/ino (kernel >= 5.12, attr.build_id).
constexpr uint16_t kMiscMmapBuildId = 1 << 14;

class Cursor {
 public:
  explicit Cursor(std::string_view s) : s_(s) {}
  bool U32(uint32_t* v) { return Get(v, 4); }
  bool U64(uint64_t* v) { return Get(v, 8); }
  bool Skip(size_t n) {
    if (n > s_.size() - pos_) return false;
    pos_ += n;
    return true;
  }
  bool CString(std::string* out, size_t max_end) {
    size_t end = std::min(max_end, s_.size());
    if (pos_ > end) return false;
    size_t nul = s_.find('\0', pos_);
    if (nul == std::string_view::npos || nul >= end) return false;
    out->assign(s_.substr(pos_, nul - pos_));
    pos_ = nul + 1;
    return true;
  }
  size_t pos() const { return pos_; }
  void Seek(size_t p) { pos_ = p; }
  size_t size() const { return s_.size(); }

 private:
  bool Get(void* v, size_t n) {
    if (n > s_.size() - pos_) return false;
    std::memcpy(v, s_.data() + pos_, n);
    pos_ += n;
    return true;
  }
  std::string_view s_;
  size_t pos_ = 0;
};

CpuMode ModeOf(uint16_t misc) {
  switch (misc & PERF_RECORD_MISC_CPUMODE_MASK) {
    case PERF_RECORD_MISC_KERNEL:
      return CpuMode::kKernel;
    case PERF_RECORD_MISC_USER:
      return CpuMode::kUser;
    case PERF_RECORD_MISC_HYPERVISOR:
      return CpuMode::kHypervisor;
    case PERF_RECORD_MISC_GUEST_KERNEL:
    case PERF_RECORD_MISC_GUEST_USER:
      return CpuMode::kGuest;
    default:
      return CpuMode::kUnknown;
  }
}

// The sample_id_all trailer (TID, TIME, CPU) sits at the end of non-sample
// records: 24 bytes.
constexpr size_t kTrailer = 24;
bool Trailer(std::string_view rec, uint32_t* pid, uint32_t* tid, uint64_t* time, uint32_t* cpu) {
  if (rec.size() < sizeof(perf_event_header) + kTrailer) return false;
  Cursor c(rec);
  c.Seek(rec.size() - kTrailer);
  uint32_t res = 0;
  return c.U32(pid) && c.U32(tid) && c.U64(time) && c.U32(cpu) && c.U32(&res);
}

}  // namespace

ParseResult ParsePerfRecord(std::string_view rec, uint64_t sample_type, uint32_t cpu_hint,
                            uint64_t regs_mask) {
  ParseResult r;
  if (rec.size() < sizeof(perf_event_header)) {
    r.malformed = true;
    return r;
  }
  perf_event_header hdr;
  std::memcpy(&hdr, rec.data(), sizeof(hdr));
  r.type = hdr.type;
  Cursor c(rec);
  c.Skip(sizeof(hdr));
  auto bad = [&r]() {
    r.malformed = true;
    return r;
  };
  switch (hdr.type) {
    case PERF_RECORD_SAMPLE: {
      Sample s;
      s.mode = ModeOf(hdr.misc);
      uint32_t res = 0;
      if (!c.U64(&s.ip) || !c.U32(&s.pid) || !c.U32(&s.tid) || !c.U64(&s.time_ns) ||
          !c.U32(&s.cpu) || !c.U32(&res) ||
          ((sample_type & PERF_SAMPLE_PERIOD) && !c.U64(&s.period))) {
        return bad();
      }
      if (sample_type & PERF_SAMPLE_CALLCHAIN) {
        uint64_t nr = 0;
        if (!c.U64(&nr) || nr > (c.size() - c.pos()) / 8) return bad();
        // Count each context's frames first: one allocation per chain, not
        // one per doubling of a chain grown frame by frame.
        size_t kernel_n = 0, user_n = 0;
        size_t* counted = nullptr;
        for (uint64_t i = 0; i < nr; ++i) {
          uint64_t ip = 0;
          std::memcpy(&ip, rec.data() + c.pos() + i * 8, sizeof(ip));
          if (ip >= PERF_CONTEXT_MAX) {
            counted = ip == PERF_CONTEXT_KERNEL ? &kernel_n
                      : ip == PERF_CONTEXT_USER ? &user_n
                                                : nullptr;
          } else if (counted != nullptr) {
            ++*counted;
          }
        }
        s.kernel_chain.reserve(kernel_n);
        s.user_chain.reserve(user_n);
        std::vector<uint64_t>* chain = nullptr;
        for (uint64_t i = 0; i < nr; ++i) {
          uint64_t ip = 0;
          c.U64(&ip);
          if (ip >= PERF_CONTEXT_MAX) {  // a context marker
            if (ip == PERF_CONTEXT_KERNEL)
              chain = &s.kernel_chain;
            else if (ip == PERF_CONTEXT_USER)
              chain = &s.user_chain;
            else
              chain = nullptr;  // guest/hypervisor frames: not attributed
            continue;
          }
          if (chain != nullptr) chain->push_back(ip);
        }
      }
      // { u32 size; char data[size]; } && PERF_SAMPLE_RAW, padded by the
      // kernel so that the record stays 8-byte aligned (size counts the pad).
      if (sample_type & PERF_SAMPLE_RAW) {
        uint32_t size = 0;
        if (!c.U32(&size) || size > c.size() - c.pos()) return bad();
        r.raw = rec.substr(c.pos(), size);
        c.Skip(size);
      }
      // include/uapi/linux/perf_event.h, PERF_RECORD_SAMPLE:
      //   { u64 abi; u64 regs[weight(mask)]; } && PERF_SAMPLE_REGS_USER
      //   { u64 size; char data[size]; u64 dyn_size; } && PERF_SAMPLE_STACK_USER
      // kernel/events/core.c perf_output_sample_regs writes no regs when abi is
      // PERF_SAMPLE_REGS_ABI_NONE (a kernel thread), and
      // perf_output_sample_ustack writes only `size` = 0 without user regs;
      // otherwise data[] always spans `size` bytes, of which the first
      // dyn_size were copied (the copy stops at the first unmapped page).
      bool regs64 = false;
      if (sample_type & PERF_SAMPLE_REGS_USER) {
        uint64_t abi = 0;
        if (!c.U64(&abi)) return bad();
        if (abi != PERF_SAMPLE_REGS_ABI_NONE) {
          size_t n = static_cast<size_t>(__builtin_popcountll(regs_mask));
          if (n > (c.size() - c.pos()) / 8) return bad();
          // A 32-bit task's registers (PERF_SAMPLE_REGS_ABI_32) have another
          // meaning: not unwound, like perf's x86-64-only unwinder.
          regs64 = abi == PERF_SAMPLE_REGS_ABI_64;
          if (regs64) {
            s.user_stack.regs_mask = regs_mask;
            s.user_stack.regs.resize(n);
            for (auto& v : s.user_stack.regs) c.U64(&v);
          } else {
            c.Skip(n * 8);
          }
        }
      }
      if (sample_type & PERF_SAMPLE_STACK_USER) {
        uint64_t size = 0;
        if (!c.U64(&size)) return bad();
        if (size > 0) {
          if (size > c.size() - c.pos()) return bad();
          size_t at = c.pos();
          uint64_t dyn = 0;
          if (!c.Skip(size) || !c.U64(&dyn) || dyn > size) return bad();
          // Only the bytes the kernel copied are kept: records stay compact.
          if (regs64) {
            const auto* p = reinterpret_cast<const uint8_t*>(rec.data() + at);
            s.user_stack.stack.assign(p, p + dyn);
            s.user_stack.dyn_size = dyn;
          }
        }
      }
      r.event = std::move(s);
      return r;
    }
    case PERF_RECORD_MMAP:
    case PERF_RECORD_MMAP2: {
      MmapEvent m;
      if (!c.U32(&m.pid) || !c.U32(&m.tid) || !c.U64(&m.start) || !c.U64(&m.len) ||
          !c.U64(&m.pgoff)) {
        return bad();
      }
      if (hdr.type == PERF_RECORD_MMAP2) {
        if (hdr.misc & kMiscMmapBuildId) {
          uint8_t idbuf[24];
          size_t at = c.pos();
          if (!c.Skip(24)) return bad();
          std::memcpy(idbuf, rec.data() + at, 24);
          uint8_t n = std::min<uint8_t>(idbuf[0], 20);
          m.build_id.assign(reinterpret_cast<const char*>(idbuf + 4), n);
        } else {
          uint64_t ino_gen = 0;
          if (!c.U32(&m.maj) || !c.U32(&m.min) || !c.U64(&m.ino) || !c.U64(&ino_gen)) return bad();
        }
        if (!c.U32(&m.prot) || !c.U32(&m.flags)) return bad();
      }
      if (!c.CString(&m.filename, rec.size() - kTrailer)) return bad();
      uint32_t cpu = 0;
      if (!Trailer(rec, &m.pid, &m.tid, &m.time_ns, &cpu)) return bad();
      m.kernel = (hdr.misc & PERF_RECORD_MISC_CPUMODE_MASK) == PERF_RECORD_MISC_KERNEL;
      if (m.kernel) m.pid = m.tid = UINT32_MAX;
      r.event = std::move(m);
      return r;
    }
    case PERF_RECORD_COMM: {
      CommEvent e;
      if (!c.U32(&e.pid) || !c.U32(&e.tid) || !c.CString(&e.comm, rec.size() - kTrailer)) {
        return bad();
      }
      uint32_t p, t, cpu;
      if (!Trailer(rec, &p, &t, &e.time_ns, &cpu)) return bad();
      e.exec = (hdr.misc & PERF_RECORD_MISC_COMM_EXEC) != 0;
      r.event = std::move(e);
      return r;
    }
    case PERF_RECORD_FORK:
    case PERF_RECORD_EXIT: {
      TaskEvent t;
      if (!c.U32(&t.pid) || !c.U32(&t.ppid) || !c.U32(&t.tid) || !c.U32(&t.ptid) ||
          !c.U64(&t.time_ns)) {
        return bad();
      }
      t.exit = hdr.type == PERF_RECORD_EXIT;
      r.event = t;
      return r;
    }
    case PERF_RECORD_LOST:
    case PERF_RECORD_LOST_SAMPLES: {
      LostEvent l;
      uint64_t id = 0;
      if (hdr.type == PERF_RECORD_LOST && !c.U64(&id)) return bad();
      if (!c.U64(&l.count)) return bad();
      uint32_t p, t, cpu = cpu_hint;
      if (!Trailer(rec, &p, &t, &l.time_ns, &cpu)) return bad();
      l.cpu = cpu;
      l.cause = sample_type == kSideSampleType ? LossCause::kSidebandLost : LossCause::kRingLost;
      r.event = l;
      return r;
    }
    default:
      return r;  // throttle, itrace, ... not needed
  }
}

}  // namespace flightrec::recorder::perf
