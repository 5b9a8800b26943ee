// One structured journal entry per stored crash, death or kernel panic, as
// systemd-coredump logs one per core: `journalctl` shows what happened and the
// command that shows the record, and MESSAGE_ID finds every such entry
// (`journalctl MESSAGE_ID=...`, docs/ARCHITECTURE.md "The journal").
//
// Every text field comes from the crashed process (or the crashed kernel's
// panic message) and is hostile: each is bounded, sent so that no byte of it
// can end its field or start another (sd_journal_sendv's length-prefixed
// form for values with a newline), and MESSAGE, which journalctl prints on
// terminals, is escaped.
//
// Thread: any. The send runs on a helper thread that the caller waits on for
// a bounded time, so a journald that stopped reading never holds the caller.
#pragma once

#include <chrono>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"
#include "recorder/record/record_kind.h"

namespace flightrec::journal {

// MESSAGE_ID of every entry flightrec logs for a stored record (made with
// `systemd-id128 new`; docs/ARCHITECTURE.md and journal/flightrec.catalog).
inline constexpr std::string_view kRecordMessageId = "3f6c137aee6a487bbccc368e30b24fb9";

// The store's record kinds, spelled by their one table.
using recorder::RecordKind;

struct JournalEntry {
  RecordKind kind = RecordKind::kCrash;
  std::string record_id;   // what `recorder crash info` takes
  std::string history_id;  // the history record, "" if none
  std::string exe;         // bytes, as /proc gave them; "" unknown
  std::string comm;        // bytes
  std::string unit;        // the process's systemd unit, "" unknown
  int signal = 0;          // 0: none (a panic, a death by exit)
  int64_t pid = 0;         // 0: none (a panic)
  int64_t uid = -1;        // -1: none (a panic)
  std::string panic;       // kind panic: the kernel's panic message
};

// The entry's fields, "NAME=value" each, exactly as they are sent.
std::vector<std::string> JournalFields(const JournalEntry& e);

// Sends the entry to journald's socket (/run/systemd/journal/socket). The
// record it names is already committed: a failure here loses nothing and the
// caller logs it at debug level. Returns within about `timeout` whatever
// journald does; while an earlier send is still blocked, fails at once.
Status LogRecordToJournal(const JournalEntry& e,
                          std::chrono::milliseconds timeout = std::chrono::milliseconds(500));

}  // namespace flightrec::journal
