// EventEncoder / EventDecoder: the byte format of a record's `events` section.
//
// Why its own format: a record stores the raw event stream (not perf.data),
// so that `recorder report` replays it through the same attribution pipeline
// the daemon uses live, whichever backend captured it. Encoding is compact
// (LEB128 varints, times delta-coded per stream) because zstd compresses what
// is left; decoding treats every byte as hostile: a bad tag, an overlong
// varint or a length past the end is a kCorrupt Status, never a crash or an
// unbounded allocation. Layout: docs/FORMAT.md, "events section".
//
// Thread: none of its own; an encoder or decoder is used by one thread.
#pragma once

#include <cstdint>
#include <functional>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "common/leb128.h"
#include "common/status.h"
#include "recorder/model/events.h"

namespace flightrec::recorder {

// Version of the events-section encoding; bumped on incompatible changes.
// 2: a stack table (tag 6 defines a stack, tag 7 is a sample that refers to
// one). Version 1 streams (tag 1 samples only) still decode.
inline constexpr uint32_t kEventCodecVersion = 2;

class EventEncoder {
 public:
  // Appends the encoding of `event` to the internal buffer. A sample without
  // a user stack copy is written as a reference into the stream's stack
  // table (its pid, mode, ip and call chains, defined where first used):
  // samples repeat a few thousand stacks, and a reference is a few bytes.
  void Add(const Event& event);
  // True when the sample's stack is new to this stream (a table entry was
  // defined, or the sample carries a stack copy): a caller that collects
  // what stacks refer to looks at the others no more.
  bool Add(const Sample& sample);
  const std::string& buffer() const { return buf_; }
  // Hands the bytes to the caller (e.g. to stream a chunk into the store) and
  // starts a new chunk; delta coding continues across chunks.
  std::string Take();
  size_t size() const { return buf_.size(); }

 private:
  void PutTime(uint64_t t);

  std::string buf_;
  uint64_t last_time_ = 0;
  uint64_t last_period_ = 0;
  // Looked up by string_view (the key is built in scratch space).
  struct KeyHash {
    using is_transparent = void;
    size_t operator()(std::string_view s) const { return std::hash<std::string_view>{}(s); }
  };
  std::string stack_key_;  // scratch, never shrinks
  std::unordered_map<std::string, uint32_t, KeyHash, std::equal_to<>>
      stack_ids_;  // encoded stack -> id
};

class EventDecoder {
 public:
  enum class Skim {
    kNone,      // not a sample without a stack copy (or malformed): use Next()
    kBytes,     // a version 1 sample: *key holds its stack's encoded bytes
    kStackRef,  // a sample referring to stack table entry *stack_id
  };
  // Fast path for replay: if the next event is a sample without a user
  // stack copy, reads its per-sample fields into *head and says how its
  // stack is identified — by the stack table id it refers to, or (version 1
  // streams) by the encoded bytes of its pid, mode, ip and call chains (the
  // encoding is canonical, so equal bytes mean equal values). Otherwise
  // returns kNone with nothing consumed; Next() then decodes it, or reports
  // what is wrong with it.
  Skim SkimSample(SampleHead* head, std::string* key, uint32_t* stack_id);
  explicit EventDecoder(std::string_view data) : data_(data) {}
  size_t position() const { return pos_; }  // bytes consumed so far
  // Upper bound of one encoded event (two maximal chains, registers and a
  // maximal stack copy): a streaming reader keeps at least this much ahead.
  static constexpr size_t kMaxEventBytes = 3u << 20;
  // Decoder state, to retry an event that ran past the end of a partial
  // buffer once more bytes are there.
  struct State {
    size_t pos;
    uint64_t last_time;
    uint64_t last_period;
    size_t stacks;
  };
  State Save() const { return {pos_, last_time_, last_period_, stacks_.size()}; }
  void Restore(const State& s) {
    pos_ = s.pos;
    last_time_ = s.last_time;
    last_period_ = s.last_period;
    stacks_.resize(s.stacks);  // a definition decoded since is decoded again
  }
  // Continues on a new buffer holding the bytes that follow position(), for
  // streaming: the time-delta state carries over.
  void Rebase(std::string_view data) {
    data_ = data;
    pos_ = 0;
  }
  // Decodes the next event into *out. Returns false at a clean end; a
  // malformed stream yields a kCorrupt status naming the byte offset.
  StatusOr<bool> Next(Event* out);
  size_t offset() const { return pos_; }
  // The stack table id of the sample Next() returned last, 0 if it carried
  // its stack itself (a version 1 sample, or one with a stack copy).
  uint32_t last_stack_id() const { return last_stack_id_; }
  // With borrow on, a sample's user stack copy is not copied into
  // Sample::user_stack.stack (left empty) but viewed by last_stack(), which
  // stays valid until the decoder is rebased or its bytes change: for replay,
  // which unwinds each copy as it is decoded (kilobytes a sample).
  void set_borrow_stacks(bool borrow) { borrow_stacks_ = borrow; }
  // The user stack copy of the sample Next() returned last: a view of the
  // decoded bytes when borrowing, else of the sample's own copy.
  std::span<const uint8_t> last_stack() const { return last_stack_; }
  // Upper bound of a stream's stack table: a hostile stream cannot make the
  // decoder hold more.
  static constexpr size_t kMaxStacks = 1u << 24;

 private:
  // With ten bytes left (the longest varint) a value is read without a
  // bounds check per byte: the common case, and the one DWARF samples' 17
  // registers (five to eight bytes each) take. Same results as
  // ReadUleb128, which the last bytes of a buffer go through.
  bool GetVarint(uint64_t* v) {
    if (data_.size() - pos_ >= kMaxUleb128Bytes) {
      const auto* p = reinterpret_cast<const uint8_t*>(data_.data()) + pos_;
      uint64_t r = p[0];
      if (r < 0x80) {
        *v = r;
        pos_ += 1;
        return true;
      }
      // Deltas, ids and thread ids mostly fit two or three bytes.
      r = (r & 0x7f) | static_cast<uint64_t>(p[1] & 0x7f) << 7;
      if (p[1] < 0x80) {
        *v = r;
        pos_ += 2;
        return true;
      }
      r |= static_cast<uint64_t>(p[2] & 0x7f) << 14;
      if (p[2] < 0x80) {
        *v = r;
        pos_ += 3;
        return true;
      }
      for (size_t i = 3; i < kMaxUleb128Bytes; ++i) {
        const uint64_t b = p[i];
        r |= (b & 0x7f) << (7 * i);
        if (b < 0x80) {
          if (i == kMaxUleb128Bytes - 1 && b > 1) return false;  // over 64 bits
          *v = r;
          pos_ += i + 1;
          return true;
        }
      }
      return false;  // longer than any 64-bit value
    }
    return GetVarintSlow(v);
  }
  bool GetVarintSlow(uint64_t* v);
  bool GetSigned(int64_t* v) {
    uint64_t u = 0;
    if (!GetVarint(&u)) return false;
    *v = static_cast<int64_t>(u >> 1) ^ -static_cast<int64_t>(u & 1);  // zigzag
    return true;
  }
  bool GetU32(uint32_t* v) {
    uint64_t u = 0;
    if (!GetVarint(&u) || u > UINT32_MAX) return false;
    *v = static_cast<uint32_t>(u);
    return true;
  }
  bool GetBytes(std::string* s, size_t max);
  bool GetTime(uint64_t* t) {
    int64_t d = 0;
    if (!GetSigned(&d)) return false;
    last_time_ += static_cast<uint64_t>(d);
    *t = last_time_;
    return true;
  }
  bool GetChain(std::vector<uint64_t>* chain);
  bool GetStackDef();

  struct StackDef {
    uint32_t pid = 0;
    CpuMode mode = CpuMode::kUnknown;
    uint64_t ip = 0;
    std::vector<uint64_t> kernel_chain, user_chain;
  };
  std::string_view data_;
  size_t pos_ = 0;
  uint64_t last_time_ = 0;
  uint64_t last_period_ = 0;
  uint32_t last_stack_id_ = 0;
  bool borrow_stacks_ = false;
  std::span<const uint8_t> last_stack_;
  std::vector<StackDef> stacks_;  // id = index + 1
};

}  // namespace flightrec::recorder
