#include "recorder/model/event_codec.h"

#include <cstring>

#include <fmt/format.h>

#include "common/leb128.h"

namespace flightrec::recorder {
namespace {

enum Tag : uint8_t {
  kTagSample = 1,
  kTagMmap = 2,
  kTagComm = 3,
  kTagTask = 4,
  kTagLost = 5,
  kTagStack = 6,      // defines the next stack table entry
  kTagSampleRef = 7,  // a sample whose stack is a table entry
};

// Bounds that keep a hostile stream from making us allocate without limit.
// perf caps callchains at PERF_MAX_STACK_DEPTH (127 by default, sysctl up to
// ~64k); 65535 frames covers any real chain. A user stack copy is at most
// 65528 bytes in perf (PERF_SAMPLE_STACK_USER is u16-sized) — we allow 1 MiB
// for the module's AUX copies.
constexpr uint64_t kMaxChain = 65535;
constexpr uint64_t kMaxRegs = 64;
constexpr size_t kMaxString = 64 * 1024;
constexpr size_t kMaxStack = 1 << 20;

uint64_t ZigZag(int64_t v) {
  return (static_cast<uint64_t>(v) << 1) ^ static_cast<uint64_t>(v >> 63);
}

void PutVarint(std::string* out, uint64_t v) { AppendUleb128(out, v); }

void PutSigned(std::string* out, int64_t v) { PutVarint(out, ZigZag(v)); }

void PutBytes(std::string* out, std::string_view s) {
  PutVarint(out, s.size());
  out->append(s);
}

char* SignedAt(char* p, int64_t v) { return WriteUleb128(p, ZigZag(v)); }

// Frames are coded relative to the previous one: neighbouring return
// addresses share their high bits. Written at p, which has room for
// kMaxUleb128Bytes per frame and one more (the count); returns the end.
char* ChainAt(char* p, const std::vector<uint64_t>& chain, uint64_t ip) {
  p = WriteUleb128(p, chain.size());
  uint64_t prev = ip;
  for (uint64_t f : chain) {
    p = SignedAt(p, static_cast<int64_t>(f - prev));
    prev = f;
  }
  return p;
}

void PutChain(std::string* out, const std::vector<uint64_t>& chain, uint64_t ip) {
  const size_t at = out->size();
  out->resize(at + kMaxUleb128Bytes * (1 + chain.size()));
  char* end = ChainAt(out->data() + at, chain, ip);
  out->resize(static_cast<size_t>(end - out->data()));
}

}  // namespace

void EventEncoder::PutTime(uint64_t t) {
  // Events arrive nearly sorted; a signed delta keeps out-of-order ones small.
  PutSigned(&buf_, static_cast<int64_t>(t - last_time_));
  last_time_ = t;
}

bool EventEncoder::Add(const Sample& e) {
  if (e.user_stack.regs.empty() && e.user_stack.stack.empty()) {
    // The stack's identity: pid, mode, ip, call chains (tag 6's fields),
    // written into scratch space that only grows (no allocation per sample).
    const size_t bound = kMaxUleb128Bytes * (5 + e.kernel_chain.size() + e.user_chain.size());
    if (stack_key_.size() < bound) stack_key_.resize(bound);
    char* const k = stack_key_.data();
    char* p = WriteUleb128(k, e.pid);
    p = WriteUleb128(p, static_cast<uint8_t>(e.mode));
    p = WriteUleb128(p, e.ip);
    p = ChainAt(p, e.kernel_chain, e.ip);
    p = ChainAt(p, e.user_chain, e.ip);
    const std::string_view key(k, static_cast<size_t>(p - k));
    uint32_t id = 0;
    bool fresh = false;
    if (auto it = stack_ids_.find(key); it != stack_ids_.end()) {
      id = it->second;
    } else {
      fresh = true;
      id = static_cast<uint32_t>(stack_ids_.size() + 1);
      stack_ids_.emplace(std::string(key), id);
      buf_.push_back(static_cast<char>(kTagStack));
      buf_.append(key);
    }
    // Tag, time delta, cpu, tid, period delta, stack id: one append.
    char head[1 + 5 * kMaxUleb128Bytes];
    char* h = head;
    *h++ = static_cast<char>(kTagSampleRef);
    h = SignedAt(h, static_cast<int64_t>(e.time_ns - last_time_));
    last_time_ = e.time_ns;
    h = WriteUleb128(h, e.cpu);
    h = WriteUleb128(h, e.tid);
    h = SignedAt(h, static_cast<int64_t>(e.period - last_period_));
    last_period_ = e.period;
    h = WriteUleb128(h, id);
    buf_.append(head, static_cast<size_t>(h - head));
    return fresh;
  }
  buf_.push_back(static_cast<char>(kTagSample));
  PutTime(e.time_ns);
  PutVarint(&buf_, e.cpu);
  PutVarint(&buf_, e.pid);
  PutVarint(&buf_, e.tid);
  PutVarint(&buf_, static_cast<uint8_t>(e.mode));
  PutVarint(&buf_, e.ip);
  PutVarint(&buf_, e.period);
  PutChain(&buf_, e.kernel_chain, e.ip);
  PutChain(&buf_, e.user_chain, e.ip);
  PutVarint(&buf_, e.user_stack.regs_mask);
  PutVarint(&buf_, e.user_stack.regs.size());
  for (uint64_t r : e.user_stack.regs) PutVarint(&buf_, r);
  PutBytes(&buf_, std::string_view(reinterpret_cast<const char*>(e.user_stack.stack.data()),
                                   e.user_stack.stack.size()));
  PutVarint(&buf_, e.user_stack.dyn_size);
  return true;
}

void EventEncoder::Add(const Event& event) {
  std::visit(
      [this](const auto& e) {
        using T = std::decay_t<decltype(e)>;
        if constexpr (std::is_same_v<T, Sample>) {
          Add(e);
        } else if constexpr (std::is_same_v<T, MmapEvent>) {
          buf_.push_back(static_cast<char>(kTagMmap));
          PutTime(e.time_ns);
          PutVarint(&buf_, e.pid);
          PutVarint(&buf_, e.tid);
          PutVarint(&buf_, e.start);
          PutVarint(&buf_, e.len);
          PutVarint(&buf_, e.pgoff);
          PutVarint(&buf_, e.maj);
          PutVarint(&buf_, e.min);
          PutVarint(&buf_, e.ino);
          PutVarint(&buf_, e.prot);
          PutVarint(&buf_, e.flags);
          PutBytes(&buf_, e.build_id);
          PutBytes(&buf_, e.filename);
          PutVarint(&buf_, e.kernel ? 1 : 0);
        } else if constexpr (std::is_same_v<T, CommEvent>) {
          buf_.push_back(static_cast<char>(kTagComm));
          PutTime(e.time_ns);
          PutVarint(&buf_, e.pid);
          PutVarint(&buf_, e.tid);
          PutBytes(&buf_, e.comm);
          PutVarint(&buf_, e.exec ? 1 : 0);
        } else if constexpr (std::is_same_v<T, TaskEvent>) {
          buf_.push_back(static_cast<char>(kTagTask));
          PutTime(e.time_ns);
          PutVarint(&buf_, e.pid);
          PutVarint(&buf_, e.ppid);
          PutVarint(&buf_, e.tid);
          PutVarint(&buf_, e.ptid);
          PutVarint(&buf_, e.exit ? 1 : 0);
        } else if constexpr (std::is_same_v<T, LostEvent>) {
          buf_.push_back(static_cast<char>(kTagLost));
          PutTime(e.time_ns);
          PutVarint(&buf_, e.cpu);
          PutVarint(&buf_, static_cast<uint8_t>(e.cause));
          PutVarint(&buf_, e.count);
        }
      },
      event);
}

std::string EventEncoder::Take() {
  std::string out;
  out.swap(buf_);
  return out;
}

bool EventDecoder::GetVarintSlow(uint64_t* v) {
  const auto* begin = reinterpret_cast<const uint8_t*>(data_.data());
  const uint8_t* p = begin + pos_;
  bool ok = ReadUleb128(&p, begin + data_.size(), v);
  pos_ = static_cast<size_t>(p - begin);
  return ok;
}

bool EventDecoder::GetBytes(std::string* s, size_t max) {
  uint64_t n = 0;
  if (!GetVarint(&n) || n > max || n > data_.size() - pos_) return false;
  s->assign(data_.substr(pos_, n));
  pos_ += n;
  return true;
}

bool EventDecoder::GetChain(std::vector<uint64_t>* chain) {
  uint64_t n = 0;
  // Each frame takes at least one byte: a count beyond the bytes left is a lie.
  if (!GetVarint(&n) || n > kMaxChain || n > data_.size() - pos_) return false;
  chain->resize(n);
  for (auto& f : *chain) {
    int64_t d = 0;
    if (!GetSigned(&d)) return false;
    f = static_cast<uint64_t>(d);
  }
  return true;
}

bool EventDecoder::GetStackDef() {
  if (stacks_.size() >= kMaxStacks) return false;
  StackDef& d = stacks_.emplace_back();
  uint64_t mode = 0;
  bool ok = GetU32(&d.pid) && GetVarint(&mode) && mode <= 4 && GetVarint(&d.ip) &&
            GetChain(&d.kernel_chain) && GetChain(&d.user_chain);
  if (!ok) {
    stacks_.pop_back();
    return false;
  }
  d.mode = static_cast<CpuMode>(mode);
  for (auto* chain : {&d.kernel_chain, &d.user_chain}) {
    uint64_t prev = d.ip;
    for (auto& f : *chain) {
      f += prev;
      prev = f;
    }
  }
  return true;
}

EventDecoder::Skim EventDecoder::SkimSample(SampleHead* head, std::string* key,
                                            uint32_t* stack_id) {
  if (pos_ >= data_.size()) return Skim::kNone;
  const uint8_t tag = static_cast<uint8_t>(data_[pos_]);
  if (tag != kTagSample && tag != kTagSampleRef) return Skim::kNone;
  const State start = Save();
  auto fail = [&] {
    Restore(start);
    return Skim::kNone;
  };
  ++pos_;
  if (tag == kTagSampleRef) {
    int64_t dperiod = 0;
    uint64_t id = 0;
    if (!GetTime(&head->time_ns) || !GetU32(&head->cpu) || !GetU32(&head->tid) ||
        !GetSigned(&dperiod) || !GetVarint(&id) || id == 0 || id > stacks_.size()) {
      return fail();
    }
    last_period_ += static_cast<uint64_t>(dperiod);
    head->period = last_period_;
    head->pid = stacks_[id - 1].pid;
    *stack_id = static_cast<uint32_t>(id);
    return Skim::kStackRef;
  }
  uint64_t mode = 0, ip = 0, v = 0;
  if (!GetTime(&head->time_ns) || !GetU32(&head->cpu)) return fail();
  const size_t pid0 = pos_;
  if (!GetU32(&head->pid)) return fail();
  const size_t pid1 = pos_;
  if (!GetU32(&head->tid)) return fail();
  const size_t ip0 = pos_;
  if (!GetVarint(&mode) || mode > 4 || !GetVarint(&ip)) return fail();
  const size_t ip1 = pos_;
  if (!GetVarint(&head->period)) return fail();
  const size_t chain0 = pos_;
  for (int c = 0; c < 2; ++c) {
    uint64_t n = 0;
    if (!GetVarint(&n) || n > kMaxChain || n > data_.size() - pos_) return fail();
    for (uint64_t i = 0; i < n; ++i) {  // skip a varint: up to its last byte
      while (pos_ < data_.size() && (static_cast<uint8_t>(data_[pos_]) & 0x80)) ++pos_;
      if (pos_ >= data_.size()) return fail();
      ++pos_;
    }
  }
  const size_t chain1 = pos_;
  uint64_t nregs = 0, stack = 0;
  if (!GetVarint(&v) || !GetVarint(&nregs) || nregs != 0 || !GetVarint(&stack) || stack != 0 ||
      !GetVarint(&v) || v != 0) {
    return fail();  // a DWARF sample: decoded in full
  }
  key->assign(data_.data() + pid0, pid1 - pid0);
  key->append(data_.data() + ip0, ip1 - ip0);
  key->append(data_.data() + chain0, chain1 - chain0);
  return Skim::kBytes;
}

StatusOr<bool> EventDecoder::Next(Event* out) {
  size_t start = pos_;
  auto corrupt = [&](const char* what) {
    return Corrupt(fmt::format("events section: malformed {} at byte {}", what, start));
  };
  // Stack definitions are the decoder's own state, not events: read them and
  // go on to the event that follows.
  while (pos_ < data_.size() && static_cast<uint8_t>(data_[pos_]) == kTagStack) {
    start = pos_++;
    if (!GetStackDef()) {
      return stacks_.size() >= kMaxStacks ? corrupt("stack (more than the table's bound)")
                                          : corrupt("stack");
    }
  }
  if (pos_ >= data_.size()) return false;
  start = pos_;
  last_stack_id_ = 0;
  last_stack_ = {};
  uint8_t tag = static_cast<uint8_t>(data_[pos_++]);
  switch (tag) {
    case kTagSampleRef: {
      Sample& s = out->index() == 0 ? std::get<Sample>(*out) : out->emplace<Sample>();
      int64_t dperiod = 0;
      uint64_t id = 0;
      if (!GetTime(&s.time_ns) || !GetU32(&s.cpu) || !GetU32(&s.tid) || !GetSigned(&dperiod) ||
          !GetVarint(&id)) {
        return corrupt("sample");
      }
      if (id == 0 || id > stacks_.size()) return corrupt("sample (undefined stack)");
      last_period_ += static_cast<uint64_t>(dperiod);
      s.period = last_period_;
      const StackDef& d = stacks_[id - 1];
      s.pid = d.pid;
      s.mode = d.mode;
      s.ip = d.ip;
      s.kernel_chain.assign(d.kernel_chain.begin(), d.kernel_chain.end());
      s.user_chain.assign(d.user_chain.begin(), d.user_chain.end());
      s.user_stack.regs_mask = 0;
      s.user_stack.regs.clear();
      s.user_stack.stack.clear();
      s.user_stack.dyn_size = 0;
      last_stack_id_ = static_cast<uint32_t>(id);
      return true;
    }
    case kTagSample: {
      // Decode into the caller's Sample when it holds one, reusing its
      // vectors: replaying a million samples should not allocate a million
      // times.
      Sample& s = out->index() == 0 ? std::get<Sample>(*out) : out->emplace<Sample>();
      uint64_t mode = 0;
      if (!GetTime(&s.time_ns) || !GetU32(&s.cpu) || !GetU32(&s.pid) || !GetU32(&s.tid) ||
          !GetVarint(&mode) || mode > 4 || !GetVarint(&s.ip) || !GetVarint(&s.period)) {
        return corrupt("sample");
      }
      s.mode = static_cast<CpuMode>(mode);
      for (auto* chain : {&s.kernel_chain, &s.user_chain}) {
        if (!GetChain(chain)) return corrupt("sample callchain");
        uint64_t prev = s.ip;
        for (auto& f : *chain) {
          f += prev;
          prev = f;
        }
      }
      uint64_t nregs = 0;
      if (!GetVarint(&s.user_stack.regs_mask) || !GetVarint(&nregs) || nregs > kMaxRegs) {
        return corrupt("sample registers");
      }
      s.user_stack.regs.resize(nregs);
      for (auto& r : s.user_stack.regs) {
        if (!GetVarint(&r)) return corrupt("sample registers");
      }
      uint64_t n = 0;
      if (!GetVarint(&n) || n > kMaxStack || n > data_.size() - pos_) {
        return corrupt("sample stack");
      }
      const auto* bytes = reinterpret_cast<const uint8_t*>(data_.data()) + pos_;
      if (borrow_stacks_) {
        s.user_stack.stack.clear();
        last_stack_ = {bytes, n};
      } else {
        // memcpy, not assign(char iterators): from char to uint8_t the
        // library copies byte by byte, and stack copies are kilobytes.
        s.user_stack.stack.resize(n);
        if (n) std::memcpy(s.user_stack.stack.data(), bytes, n);
        last_stack_ = s.user_stack.stack;
      }
      pos_ += n;
      if (!GetVarint(&s.user_stack.dyn_size) || s.user_stack.dyn_size > n) {
        return corrupt("sample stack");
      }
      return true;
    }
    case kTagMmap: {
      MmapEvent m;
      uint64_t kernel = 0;
      if (!GetTime(&m.time_ns) || !GetU32(&m.pid) || !GetU32(&m.tid) || !GetVarint(&m.start) ||
          !GetVarint(&m.len) || !GetVarint(&m.pgoff) || !GetU32(&m.maj) || !GetU32(&m.min) ||
          !GetVarint(&m.ino) || !GetU32(&m.prot) || !GetU32(&m.flags) ||
          !GetBytes(&m.build_id, 64) || !GetBytes(&m.filename, kMaxString) || !GetVarint(&kernel) ||
          kernel > 1) {
        return corrupt("mmap");
      }
      m.kernel = kernel != 0;
      *out = std::move(m);
      return true;
    }
    case kTagComm: {
      CommEvent c;
      uint64_t exec = 0;
      if (!GetTime(&c.time_ns) || !GetU32(&c.pid) || !GetU32(&c.tid) ||
          !GetBytes(&c.comm, kMaxString) || !GetVarint(&exec) || exec > 1) {
        return corrupt("comm");
      }
      c.exec = exec != 0;
      *out = std::move(c);
      return true;
    }
    case kTagTask: {
      TaskEvent t;
      uint64_t exit = 0;
      if (!GetTime(&t.time_ns) || !GetU32(&t.pid) || !GetU32(&t.ppid) || !GetU32(&t.tid) ||
          !GetU32(&t.ptid) || !GetVarint(&exit) || exit > 1) {
        return corrupt("task");
      }
      t.exit = exit != 0;
      *out = t;
      return true;
    }
    case kTagLost: {
      LostEvent l;
      uint64_t cause = 0;
      if (!GetTime(&l.time_ns) || !GetU32(&l.cpu) || !GetVarint(&cause) || cause < 1 || cause > 8 ||
          !GetVarint(&l.count)) {
        return corrupt("lost");
      }
      l.cause = static_cast<LossCause>(cause);
      *out = l;
      return true;
    }
    default:
      return Corrupt(fmt::format("events section: unknown event tag {} at byte {}", tag, start));
  }
}

}  // namespace flightrec::recorder
