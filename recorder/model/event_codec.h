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
#include <string>
#include <string_view>

#include "common/status.h"
#include "recorder/model/events.h"

namespace flightrec::recorder {

// Version of the events-section encoding; bumped on incompatible changes.
inline constexpr uint32_t kEventCodecVersion = 1;

class EventEncoder {
 public:
  // Appends the encoding of `event` to the internal buffer.
  void Add(const Event& event);
  const std::string& buffer() const { return buf_; }
  // Hands the bytes to the caller (e.g. to stream a chunk into the store) and
  // starts a new chunk; delta coding continues across chunks.
  std::string Take();
  size_t size() const { return buf_.size(); }

 private:
  void PutVarint(uint64_t v);
  void PutSigned(int64_t v);
  void PutBytes(std::string_view s);
  void PutTime(uint64_t t);

  std::string buf_;
  uint64_t last_time_ = 0;
};

// The per-sample fields of a sample that SkimSample reads; the rest
// (mode, ip, call chains) is left encoded, as its identity key.
struct SampleHead {
  uint64_t time_ns = 0;
  uint32_t cpu = 0;
  uint32_t pid = 0;
  uint32_t tid = 0;
  uint64_t period = 0;
};

class EventDecoder {
 public:
  // Fast path for replay: if the next event is a sample without a user
  // stack copy, reads its per-sample fields into *head, sets *key to the
  // encoded bytes that identify its stack (pid, mode, ip, call chains — the
  // encoding is canonical, so equal bytes mean equal values) and returns
  // true. Otherwise (another event, a sample with a stack copy, bytes that do
  // not parse) returns false with nothing consumed; Next() then decodes it,
  // or reports what is wrong with it.
  bool SkimSample(SampleHead* head, std::string* key);
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
  };
  State Save() const { return {pos_, last_time_}; }
  void Restore(const State& s) {
    pos_ = s.pos;
    last_time_ = s.last_time;
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

 private:
  // Most values (deltas, small ids) fit one byte: that path is inline.
  bool GetVarint(uint64_t* v) {
    if (pos_ < data_.size() && static_cast<uint8_t>(data_[pos_]) < 0x80) {
      *v = static_cast<uint8_t>(data_[pos_++]);
      return true;
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
  bool GetU32(uint32_t* v);
  bool GetBytes(std::string* s, size_t max);
  bool GetTime(uint64_t* t);
  bool GetChain(std::vector<uint64_t>* chain);

  std::string_view data_;
  size_t pos_ = 0;
  uint64_t last_time_ = 0;
};

}  // namespace flightrec::recorder
