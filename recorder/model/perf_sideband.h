// The perf records behind the model's sideband events, as perf_event_attr
// bits: PERF_RECORD_MMAP2 (MmapEvent), PERF_RECORD_COMM with the exec flag
// (CommEvent), PERF_RECORD_FORK/EXIT (TaskEvent), each with the
// sample_id_all trailer (time, tid, cpu). The perf backend asks the kernel
// for exactly these, and the perf.data exporter declares the same records
// it writes, so the two cannot drift apart.
#pragma once

#include <linux/perf_event.h>

namespace flightrec::recorder {

inline void SetSidebandRecordBits(perf_event_attr* attr) {
  attr->mmap = 1;  // with mmap2 set, the kernel writes these as MMAP2 records
  attr->mmap2 = 1;
  attr->comm = 1;
  attr->comm_exec = 1;
  attr->task = 1;
  attr->sample_id_all = 1;
}

}  // namespace flightrec::recorder
