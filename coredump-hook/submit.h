// Storing the crash (systemd-coredump's coredump-submit): history from
// recorderd, the core streamed into a `crash` record, the commit (without
// the core when it cannot be written), the crashed user's read access and
// the crash's journal entry.
#pragma once

#include <memory>

#include "common/status.h"
#include "coredump-hook/context.h"
#include "coredump-hook/sandbox.h"
#include "store/store.h"

namespace flightrec::coredump {

// Asks recorderd for the process's last seconds: c->history_id and
// history_file, or why not in c->notes.
void RequestHistory(const HookOptions& o, Crash* c);

// Copies the core from core_fd into the record's "core" section (up to the
// size limit) and to the unwinder: by tee(2) when core_fd is a pipe (as
// under core_pattern), else by a copy. Starts the record's writeback as it
// grows. Returns the status of the record's writes (a failed write still
// reads the core to its end for the unwinder).
Status StreamCore(int core_fd, const HookOptions& o, store::PendingRecord* rec,
                  CoreCopyTarget* unwinder, Crash* c);

// Commits `rec` with the crash's metadata, maps and backtrace; without the
// core, in a fresh record, when core_io failed or the commit with the core
// does. *core_stored says which.
StatusOr<store::RecordRow> CommitCrash(store::Store& st, std::unique_ptr<store::PendingRecord> rec,
                                       const Status& core_io, bool* core_stored, Crash* c);

// The crashed user may read this record (and only this one).
void GrantCrashedUser(store::Store& st, const store::RecordRow& row, const Crash& c);

// One journal entry for the committed crash, as systemd-coredump logs one
// (journal/journal_entry.h); bounded in time, and a failure only logged.
void LogToJournal(const store::RecordRow& row, const Crash& c);

}  // namespace flightrec::coredump
