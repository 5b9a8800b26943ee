// PerfRingBuffer: owns one perf mmap (control page + 2^n data pages) and
// nothing else; built by Allocate(), which can fail. Two modes:
//
// * forward (sideband): mapped PROT_READ|PROT_WRITE; the reader publishes
//   data_tail so the kernel never overwrites unread records (seed 003's
//   reader-feedback mode: what cannot be written is counted as LOST).
// * overwrite (samples): attr.write_backward = 1 and mapped PROT_READ only,
//   so the kernel ignores data_tail and keeps overwriting the oldest records
//   (kernel/events/ring_buffer.c: rb->overwrite = !(flags & RING_BUFFER_WRITABLE)).
//   The daemon never reads it until a dump, when the event is paused.
//
// Records are read "peek, then consume"; a record that wraps the end of the
// ring is copied into a scratch buffer so callers always see contiguous
// bytes (as Perfetto's PerfRingBuffer does).
//
// Thread: owned and used by the daemon's io thread.
#pragma once

#include <linux/perf_event.h>

#include <cstdint>
#include <functional>
#include <string_view>
#include <utility>
#include <vector>

#include "common/scoped_fd.h"
#include "common/status.h"

namespace flightrec::recorder::perf {

class PerfRingBuffer {
 public:
  // data_pages must be a power of two.
  static StatusOr<PerfRingBuffer> Allocate(int perf_fd, size_t data_pages, bool overwrite);

  PerfRingBuffer(PerfRingBuffer&&) = default;
  PerfRingBuffer& operator=(PerfRingBuffer&&) = default;

  size_t data_size() const { return data_size_; }
  bool overwrite() const { return overwrite_; }

  // Forward mode: visits every complete record between tail and head, then
  // publishes the new tail. Returns the number of records visited.
  size_t ReadForward(const std::function<void(std::string_view record)>& fn);

  // Overwrite mode, event paused: copies the records that are still intact,
  // newest first, walking headers from data_head (tools/lib/perf/mmap.c,
  // perf_mmap__read_init / overwrite_rb_find_range). total_written is the
  // number of bytes the kernel has ever written to this ring (-data_head for a
  // backward ring), bytes_present the bytes of the intact records.
  //
  // The intact bytes are copied at once into one buffer (two memcpys at most)
  // and the records are views into it: a dump copies ~100 000 records, and a
  // buffer each cost as much as the rest of the copy.
  struct Copy {
    std::vector<char> bytes;                      // the intact records, newest first
    std::vector<std::pair<size_t, uint32_t>> at;  // each record's offset and size in bytes
    uint64_t total_written = 0;
    uint64_t bytes_present = 0;
    size_t size() const { return at.size(); }
    // Record i (0 = newest).
    std::string_view record(size_t i) const { return {bytes.data() + at[i].first, at[i].second}; }
  };
  Copy CopyBackward() const;

  // Bytes written since the mapping was made (for rate estimates).
  uint64_t BytesWritten() const;

 private:
  PerfRingBuffer() = default;
  perf_event_mmap_page* meta() const { return static_cast<perf_event_mmap_page*>(map_.data()); }
  const char* data() const { return static_cast<const char*>(map_.data()) + page_size_; }
  void CopyWrapped(uint64_t pos, size_t len, char* out) const;

  ScopedMmap map_;
  size_t page_size_ = 0;
  size_t data_size_ = 0;
  bool overwrite_ = false;
};

}  // namespace flightrec::recorder::perf
