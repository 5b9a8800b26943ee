#include "recorder/daemon/panic_record.h"

#include "common/checked_json.h"
#include "common/units.h"
#include "journal/journal_entry.h"
#include "recorder/daemon/daemon.h"

#include <spdlog/spdlog.h>

namespace flightrec::recorder {

StatusOr<DumpResult> WritePanicRecord(store::Store& store, module::PanicDump& dump) {
  DumpRequest req;
  req.kind = RecordKind::kPanic;
  req.reason = "kernel panic";
  req.last_ns = dump.last_ns;
  // Root's record, like the kernel's own log: kernel addresses and the
  // symbols that name them.
  req.kernel_frames = KernelFrames::kAddresses;
  req.owner_uid = 0;
  req.mono_to_wall_ns = dump.mono_to_wall_ns;
  req.mono_to_boot_ns = dump.mono_to_boot_ns;
  req.extra_sections.emplace_back(kSectionPanic, json::Dump(dump.panic));
  req.extra_meta = {{kMetaPanic, dump.summary}};
  auto r = WriteDump(store, req, std::move(dump.snap), *dump.history, dump.ksyms, dump.backend,
                     MonotonicNs());
  if (r.ok()) {
    journal::JournalEntry e;
    e.kind = journal::RecordKind::kPanic;
    e.record_id = r->row.id;
    e.panic = json::RawText(dump.summary, "message");
    // The record is committed: without journald only the entry is missing.
    if (Status s = journal::LogRecordToJournal(e); !s.ok()) {
      spdlog::debug("{}: {}", e.record_id, s.message());
    }
  }
  return r;
}

// recorderd's claim at start (Daemon::Create), kept with the record it writes.
void Daemon::ClaimPanic() {
  const int64_t t0 = MonotonicNs();
  auto claim =
      module::ClaimPanicRegion(FLIGHTREC_DEVICE, module::KernelEnv::ReadRunning,
                               [this](module::PanicDump& dump) -> StatusOr<std::string> {
                                 ASSIGN_OR_RETURN(DumpResult r, WritePanicRecord(*store_, dump));
                                 return r.row.id;
                               });
  using O = module::PanicClaim::Outcome;
  if (claim.outcome == O::kStored) {
    spdlog::info("{} (claim took {} ms)", claim.message, (MonotonicNs() - t0) / 1'000'000);
  } else if (claim.outcome == O::kEmpty) {
    spdlog::info("{}", claim.message);
  } else if (claim.outcome != O::kNothing) {
    spdlog::warn("{}", claim.message);
  }
}

}  // namespace flightrec::recorder
