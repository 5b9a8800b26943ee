// Reading a normal (not overwrite) perf ring, as the daemon's own small
// events (uprobe triggers, the signal tracepoint of the death watch) use one:
// the records between data_tail and data_head, then data_tail moved on.
#pragma once

#include <linux/perf_event.h>

#include <cstdint>
#include <functional>
#include <vector>

#include "common/scoped_fd.h"

namespace flightrec::recorder {

// Hands each whole record's body (the bytes after its header, unwrapped) to
// `fn`, then frees them all for the kernel. A record whose size does not fit
// between tail and head ends the walk (the rest is dropped with it).
void DrainPerfRing(
    const ScopedMmap& ring,
    const std::function<void(const perf_event_header&, const std::vector<uint8_t>&)>& fn);

// True if the ring holds records not yet drained.
bool PerfRingPending(const ScopedMmap& ring);

}  // namespace flightrec::recorder
