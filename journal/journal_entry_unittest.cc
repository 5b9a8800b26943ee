#include "journal/journal_entry.h"

#include <gtest/gtest.h>

#include <map>
#include <set>
#include <string>

namespace flightrec::journal {
namespace {

// Field name -> value; a name twice fails the test.
std::map<std::string, std::string> Fields(const JournalEntry& e) {
  std::map<std::string, std::string> m;
  for (const std::string& f : JournalFields(e)) {
    size_t eq = f.find('=');
    EXPECT_NE(eq, std::string::npos) << f;
    EXPECT_TRUE(m.emplace(f.substr(0, eq), f.substr(eq + 1)).second) << f;
  }
  return m;
}

JournalEntry Crash() {
  JournalEntry e;
  e.kind = RecordKind::kCrash;
  e.record_id = "20261129-053000-000001a";
  e.history_id = "20261129-053000-000000f";
  e.exe = "/usr/bin/fr_crash";
  e.comm = "fr_crash";
  e.unit = "fr.service";
  e.signal = 11;
  e.pid = 4242;
  e.uid = 1000;
  return e;
}

TEST(JournalEntryTest, ACrashNamesItsRecordAndTheCommandThatShowsIt) {
  auto f = Fields(Crash());
  EXPECT_EQ(f["MESSAGE_ID"], kRecordMessageId);
  EXPECT_EQ(f["MESSAGE"],
            "Process 4242 (fr_crash) of user 1000 crashed with SIGSEGV; history: recorder crash "
            "info 20261129-053000-000001a");
  EXPECT_EQ(f["PRIORITY"], "2");
  EXPECT_EQ(f["FLIGHTREC_KIND"], "crash");
  EXPECT_EQ(f["FLIGHTREC_RECORD_ID"], "20261129-053000-000001a");
  EXPECT_EQ(f["FLIGHTREC_HISTORY_ID"], "20261129-053000-000000f");
  EXPECT_EQ(f["FLIGHTREC_EXE"], "/usr/bin/fr_crash");
  EXPECT_EQ(f["FLIGHTREC_COMM"], "fr_crash");
  EXPECT_EQ(f["FLIGHTREC_UNIT"], "fr.service");
  EXPECT_EQ(f["FLIGHTREC_SIGNAL"], "11");
  EXPECT_EQ(f["FLIGHTREC_SIGNAL_NAME"], "SIGSEGV");
  EXPECT_EQ(f["FLIGHTREC_PID"], "4242");
  EXPECT_EQ(f["FLIGHTREC_UID"], "1000");
}

TEST(JournalEntryTest, ADeathAndAPanicSayWhatHappened) {
  JournalEntry d = Crash();
  d.kind = RecordKind::kDeath;
  d.signal = 9;
  EXPECT_EQ(Fields(d)["MESSAGE"],
            "Process 4242 (fr_crash) of user 1000 died of SIGKILL; history: recorder crash info "
            "20261129-053000-000001a");
  EXPECT_EQ(Fields(d)["FLIGHTREC_KIND"], "death");

  JournalEntry p;
  p.kind = RecordKind::kPanic;
  p.record_id = "20261129-053000-0000020";
  p.panic = "Kernel BUG at\nfoo\x1b[2J";
  auto f = Fields(p);
  EXPECT_EQ(f["MESSAGE"],
            "Kernel panic: Kernel BUG at\\nfoo\\x1b[2J; history: recorder crash info "
            "20261129-053000-0000020");
  EXPECT_EQ(f["FLIGHTREC_KIND"], "panic");
  EXPECT_EQ(f["FLIGHTREC_PANIC_MESSAGE"], "Kernel BUG at\nfoo\x1b[2J");
  // No process: no pid, uid or signal fields rather than zeros.
  EXPECT_EQ(f.count("FLIGHTREC_PID") + f.count("FLIGHTREC_UID") + f.count("FLIGHTREC_SIGNAL"), 0u);
}

TEST(JournalEntryTest, HostileTextStaysInItsFieldAndOffTheTerminal) {
  JournalEntry e = Crash();
  e.comm = "x\nMESSAGE_ID=0\x1b]0;pwn\x07";
  e.exe = "/tmp/a\nFLIGHTREC_RECORD_ID=forged\n\x1b[31m\xff\xfe";
  auto f = Fields(e);
  // Only the fields the entry defines; the values keep their exact bytes
  // (sd_journal_sendv frames a value with a newline by its length).
  std::set<std::string> names;
  for (const auto& [k, v] : f) names.insert(k);
  EXPECT_EQ(names,
            (std::set<std::string>{"MESSAGE_ID", "MESSAGE", "PRIORITY", "FLIGHTREC_KIND",
                                   "FLIGHTREC_RECORD_ID", "FLIGHTREC_HISTORY_ID", "FLIGHTREC_PID",
                                   "FLIGHTREC_UID", "FLIGHTREC_SIGNAL", "FLIGHTREC_SIGNAL_NAME",
                                   "FLIGHTREC_EXE", "FLIGHTREC_COMM", "FLIGHTREC_UNIT"}));
  EXPECT_EQ(f["FLIGHTREC_EXE"], e.exe);
  EXPECT_EQ(f["FLIGHTREC_COMM"], e.comm);
  EXPECT_EQ(f["MESSAGE"],
            "Process 4242 (x\\nMESSAGE_ID=0\\x1b]0;pwn\\x07) of user 1000 crashed with SIGSEGV; "
            "history: recorder crash info 20261129-053000-000001a");
  for (unsigned char c : f["MESSAGE"]) EXPECT_TRUE(c >= 0x20 && c != 0x7f) << int(c);
}

TEST(JournalEntryTest, EveryFieldIsBounded) {
  JournalEntry e = Crash();
  e.exe = "/" + std::string(1 << 20, 'a');
  e.comm = std::string(1 << 20, 'c');
  e.unit = std::string(1 << 20, 'u');
  e.record_id = std::string(1 << 20, 'r');
  size_t total = 0;
  for (const std::string& s : JournalFields(e)) total += s.size();
  EXPECT_LT(total, 8u << 10);
  EXPECT_EQ(Fields(e)["FLIGHTREC_EXE"].size(), 4096u);
  // A NUL ends a C string: nothing after it is sent.
  e.exe = std::string("/bin/a\0FLIGHTREC_KIND=x", 23);
  EXPECT_EQ(Fields(e)["FLIGHTREC_EXE"], "/bin/a");
}

}  // namespace
}  // namespace flightrec::journal
