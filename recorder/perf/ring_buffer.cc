#include "recorder/perf/ring_buffer.h"

#include <sys/mman.h>
#include <unistd.h>

#include <cstring>

#include <fmt/format.h>

namespace flightrec::recorder::perf {

StatusOr<PerfRingBuffer> PerfRingBuffer::Allocate(int perf_fd, size_t data_pages, bool overwrite) {
  if (data_pages == 0 || (data_pages & (data_pages - 1)) != 0) {
    return InvalidArgument(fmt::format("ring of {} pages: must be a power of two", data_pages));
  }
  PerfRingBuffer rb;
  rb.page_size_ = static_cast<size_t>(sysconf(_SC_PAGESIZE));
  rb.data_size_ = data_pages * rb.page_size_;
  rb.overwrite_ = overwrite;
  size_t len = rb.page_size_ + rb.data_size_;
  // Without PROT_WRITE the kernel treats the ring as overwritable
  // (perf_mmap: `if (vma->vm_flags & VM_WRITE) flags |= RING_BUFFER_WRITABLE`).
  int prot = overwrite ? PROT_READ : (PROT_READ | PROT_WRITE);
  void* p = mmap(nullptr, len, prot, MAP_SHARED, perf_fd, 0);
  if (p == MAP_FAILED) {
    int err = errno;
    if (err == EPERM || err == ENOMEM) {
      return ErrnoStatus(err, fmt::format("mmap of a {} KiB perf ring: over the locked-memory "
                                          "limit; raise kernel.perf_event_mlock_kb or "
                                          "RLIMIT_MEMLOCK, or ask for less history",
                                          rb.data_size_ / 1024));
    }
    return ErrnoStatus(err, "mmap of a perf ring");
  }
  rb.map_ = ScopedMmap(p, len);
  return rb;
}

void PerfRingBuffer::CopyWrapped(uint64_t pos, size_t len, char* out) const {
  size_t off = static_cast<size_t>(pos & (data_size_ - 1));
  size_t first = std::min(len, data_size_ - off);
  std::memcpy(out, data() + off, first);
  if (first < len) std::memcpy(out + first, data(), len - first);
}

uint64_t PerfRingBuffer::BytesWritten() const {
  uint64_t head = __atomic_load_n(&meta()->data_head, __ATOMIC_ACQUIRE);
  return overwrite_ ? (0 - head) : head;
}

size_t PerfRingBuffer::ReadForward(const std::function<void(std::string_view)>& fn) {
  // data_head: load-acquire, pairing with the kernel's smp_wmb() before it
  // publishes head; data_tail: store-release after we are done with the
  // bytes (the A/B/C/D barrier diagram in kernel/events/ring_buffer.c).
  uint64_t head = __atomic_load_n(&meta()->data_head, __ATOMIC_ACQUIRE);
  uint64_t tail = meta()->data_tail;
  std::vector<char> scratch;
  size_t n = 0;
  while (tail + sizeof(perf_event_header) <= head) {
    perf_event_header hdr;
    CopyWrapped(tail, sizeof(hdr), reinterpret_cast<char*>(&hdr));
    if (hdr.size < sizeof(hdr) || tail + hdr.size > head) break;  // torn: stop
    size_t off = static_cast<size_t>(tail & (data_size_ - 1));
    if (off + hdr.size <= data_size_) {
      fn(std::string_view(data() + off, hdr.size));
    } else {
      scratch.resize(hdr.size);
      CopyWrapped(tail, hdr.size, scratch.data());
      fn(std::string_view(scratch.data(), hdr.size));
    }
    tail += hdr.size;
    ++n;
  }
  __atomic_store_n(&meta()->data_tail, tail, __ATOMIC_RELEASE);
  return n;
}

PerfRingBuffer::Copy PerfRingBuffer::CopyBackward() const {
  Copy c;
  // The event is paused (PERF_EVENT_IOC_PAUSE_OUTPUT), so head is stable.
  uint64_t head = __atomic_load_n(&meta()->data_head, __ATOMIC_ACQUIRE);
  c.total_written = 0 - head;  // a backward ring's head counts down from 0
  uint64_t limit = std::min<uint64_t>(c.total_written, data_size_);
  uint64_t walked = 0;
  while (walked + sizeof(perf_event_header) <= limit) {
    perf_event_header hdr;
    CopyWrapped(head + walked, sizeof(hdr), reinterpret_cast<char*>(&hdr));
    // A zero header is never-written space; a record that would cross the
    // ring's size from head has been partly overwritten by newer ones.
    if (hdr.size < sizeof(hdr) || walked + hdr.size > limit) break;
    c.at.emplace_back(static_cast<size_t>(walked), hdr.size);
    walked += hdr.size;
  }
  // walked <= limit <= data_size_: one wrap at most.
  c.bytes.resize(walked);
  if (walked > 0) CopyWrapped(head, walked, c.bytes.data());
  c.bytes_present = walked;
  return c;
}

}  // namespace flightrec::recorder::perf
