#include "journal/journal_entry.h"

#include <string.h>
#include <sys/uio.h>
// CODE_FILE/LINE/FUNC would name this file for every entry: no news.
#define SD_JOURNAL_SUPPRESS_LOCATION
#include <systemd/sd-journal.h>

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <system_error>
#include <thread>

#include <fmt/format.h>

#include "common/terminal_escape.h"

namespace flightrec::journal {
namespace {

// Bounds on the crashed process's text: PATH_MAX for a path, the kernel's
// TASK_COMM_LEN with room for %e, systemd's UNIT_NAME_MAX, and four times
// the 256 bytes of panic message flightrec.ko's region keeps.
constexpr size_t kMaxExe = 4096;
constexpr size_t kMaxComm = 64;
constexpr size_t kMaxUnit = 256;
constexpr size_t kMaxPanic = 1024;
constexpr size_t kMaxId = 128;

// At most `max` bytes of `s`, up to its first NUL: exe and comm come from
// C strings, and a NUL in a field would be kept as data by journald but cut
// by most readers.
std::string Bounded(std::string_view s, size_t max) {
  s = s.substr(0, std::min(s.find('\0'), max));
  return std::string(s);
}

std::string SignalName(int sig) {
  const char* abbrev = sig > 0 ? sigabbrev_np(sig) : nullptr;
  return abbrev ? fmt::format("SIG{}", abbrev) : fmt::format("signal {}", sig);
}

// MESSAGE: one line, every byte a terminal could act on spelled out.
std::string Message(const JournalEntry& e) {
  const std::string tail =
      "; history: recorder crash info " + EscapeForTerminal(Bounded(e.record_id, kMaxId));
  if (e.kind == RecordKind::kPanic) {
    return "Kernel panic: " + EscapeForTerminal(Bounded(e.panic, kMaxPanic)) + tail;
  }
  std::string who = fmt::format("Process {} ({}) of user {}", e.pid,
                                EscapeForTerminal(Bounded(e.comm, kMaxComm)), e.uid);
  if (e.kind == RecordKind::kCrash)
    return fmt::format("{} crashed with {}{}", who, SignalName(e.signal), tail);
  if (e.signal > 0) return fmt::format("{} died of {}{}", who, SignalName(e.signal), tail);
  return who + " died" + tail;
}

// A field without a value says nothing (a panic has no exe, a crash deeper
// than PATH_MAX none either): it is left out.
void Add(std::vector<std::string>* f, std::string_view name, std::string_view value) {
  if (!value.empty()) f->push_back(fmt::format("{}={}", name, value));
}

}  // namespace

std::vector<std::string> JournalFields(const JournalEntry& e) {
  std::vector<std::string> f;
  Add(&f, "MESSAGE_ID", kRecordMessageId);
  Add(&f, "MESSAGE", Message(e));
  // LOG_CRIT, as systemd-coredump logs a core.
  Add(&f, "PRIORITY", "2");
  Add(&f, "FLIGHTREC_KIND", recorder::RecordKindName(e.kind));
  Add(&f, "FLIGHTREC_RECORD_ID", Bounded(e.record_id, kMaxId));
  Add(&f, "FLIGHTREC_HISTORY_ID", Bounded(e.history_id, kMaxId));
  if (e.pid > 0) Add(&f, "FLIGHTREC_PID", std::to_string(e.pid));
  if (e.uid >= 0) Add(&f, "FLIGHTREC_UID", std::to_string(e.uid));
  if (e.signal > 0) {
    Add(&f, "FLIGHTREC_SIGNAL", std::to_string(e.signal));
    Add(&f, "FLIGHTREC_SIGNAL_NAME", SignalName(e.signal));
  }
  // The exact bytes (a newline in them is framed by length, never a field
  // boundary); only MESSAGE is meant for a terminal as it is.
  Add(&f, "FLIGHTREC_EXE", Bounded(e.exe, kMaxExe));
  Add(&f, "FLIGHTREC_COMM", Bounded(e.comm, kMaxComm));
  Add(&f, "FLIGHTREC_UNIT", Bounded(e.unit, kMaxUnit));
  if (e.kind == RecordKind::kPanic) Add(&f, "FLIGHTREC_PANIC_MESSAGE", Bounded(e.panic, kMaxPanic));
  return f;
}

namespace {

// One send in flight per process: a send blocked on a journald that stopped
// reading (its socket's queue full) keeps its thread, and later entries are
// refused at once rather than piling up threads.
std::atomic<bool> g_sending{false};

struct PendingSend {
  std::vector<std::string> fields;
  std::mutex mu;
  std::condition_variable cv;
  bool done = false;
  int rc = 0;
};

void Send(const std::shared_ptr<PendingSend>& p) {
  std::vector<iovec> iov;
  for (auto& s : p->fields) iov.push_back({s.data(), s.size()});
  // A value holding '\n' is sent as NAME '\n' <64-bit length> <bytes>
  // (journal-send.c), so no byte of it is read as a field boundary.
  int rc = sd_journal_sendv(iov.data(), static_cast<int>(iov.size()));
  // Free before the caller wakes: its next entry must not find this one
  // still in flight.
  g_sending.store(false);
  {
    std::lock_guard lock(p->mu);
    p->done = true;
    p->rc = rc;
  }
  p->cv.notify_all();
}

}  // namespace

Status LogRecordToJournal(const JournalEntry& e, std::chrono::milliseconds timeout) {
  if (g_sending.exchange(true)) {
    return Unavailable("journal: an earlier entry is still waiting for journald's socket");
  }
  auto p = std::make_shared<PendingSend>();
  p->fields = JournalFields(e);
  try {
    std::thread(Send, p).detach();
  } catch (const std::system_error& err) {
    g_sending.store(false);
    return Unavailable(std::string("journal: no thread for the send: ") + err.what());
  }
  std::unique_lock lock(p->mu);
  if (!p->cv.wait_for(lock, timeout, [&] { return p->done; })) {
    return Unavailable(
        fmt::format("journal: journald did not take the entry within {} ms", timeout.count()));
  }
  if (p->rc < 0) return ErrnoStatus(-p->rc, "journal: sd_journal_sendv");
  return OkStatus();
}

}  // namespace flightrec::journal
