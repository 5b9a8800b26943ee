#include "recorder/daemon/perf_ring.h"

#include <unistd.h>

namespace flightrec::recorder {

bool PerfRingPending(const ScopedMmap& ring) {
  const auto* meta = static_cast<const perf_event_mmap_page*>(ring.data());
  return __atomic_load_n(&meta->data_head, __ATOMIC_ACQUIRE) != meta->data_tail;
}

void DrainPerfRing(
    const ScopedMmap& ring,
    const std::function<void(const perf_event_header&, const std::vector<uint8_t>&)>& fn) {
  const long page = sysconf(_SC_PAGESIZE);
  auto* meta = static_cast<perf_event_mmap_page*>(ring.data());
  const auto* data = static_cast<const uint8_t*>(ring.data()) + page;
  const uint64_t size = meta->data_size;
  // data_head: acquire load pairs with the kernel's smp_wmb() before it
  // publishes head (kernel/events/ring_buffer.c, perf_output_put_handle).
  const uint64_t head = __atomic_load_n(&meta->data_head, __ATOMIC_ACQUIRE);
  uint64_t tail = meta->data_tail;
  std::vector<uint8_t> body;
  while (tail + sizeof(perf_event_header) <= head) {
    perf_event_header hdr;
    for (size_t i = 0; i < sizeof(hdr); ++i) {
      reinterpret_cast<uint8_t*>(&hdr)[i] = data[(tail + i) % size];
    }
    if (hdr.size < sizeof(hdr) || tail + hdr.size > head) break;
    body.resize(hdr.size - sizeof(hdr));
    for (size_t i = 0; i < body.size(); ++i) body[i] = data[(tail + sizeof(hdr) + i) % size];
    fn(hdr, body);
    tail += hdr.size;
  }
  // data_tail: release store so the kernel does not overwrite records we
  // are still reading (the "C/D" pairing in ring_buffer.c's comment).
  __atomic_store_n(&meta->data_tail, head, __ATOMIC_RELEASE);
}

}  // namespace flightrec::recorder
