// A kernel panic's history (recorder/module/panic_ingest.h) written as a
// record of kind `panic` through the one dump writer, so report, script,
// timeline and export read it like any record; its `panic` section and index
// metadata say what crashed (docs/FORMAT.md). Once committed, it is logged
// to the journal (journal/journal_entry.h), as a crash is.
#pragma once

#include "common/status.h"
#include "recorder/module/panic_ingest.h"
#include "recorder/record/dump_record.h"
#include "store/store.h"

namespace flightrec::recorder {

StatusOr<DumpResult> WritePanicRecord(store::Store& store, module::PanicDump& dump);

}  // namespace flightrec::recorder
