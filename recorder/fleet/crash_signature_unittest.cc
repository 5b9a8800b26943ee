#include "recorder/fleet/crash_signature.h"

#include <stdlib.h>

#include <filesystem>

#include <gtest/gtest.h>

#include "recorder/fleet/fleet_index.h"
#include "store/store.h"
#include "tests/support/files.h"

namespace flightrec::fleet {
namespace {

using Json = nlohmann::json;

// A backtrace section as coredump::Backtrace writes it: frames of
// (function, dso, ip, offset), the crashing thread first.
Json Frame(const std::string& fn, const std::string& dso, uint64_t ip = 0x1000) {
  return {{"ip", ip}, {"function", fn}, {"dso", dso}, {"offset", ip & 0xfff}, {"status", "ok"}};
}
Json Backtrace(std::vector<Json> frames, int tid = 100) {
  return {{"threads", {{{"tid", tid}, {"index", 0}, {"frames", frames}}}}, {"crashing_tid", tid}};
}

TEST(CrashSignatureTest, AddressesOffsetsAndInstallPathsDoNotChangeTheSignature) {
  Json a = Backtrace({Frame("crash_here", "/usr/bin/fr_crash", 0x55550000123),
                      Frame("main", "/usr/bin/fr_crash", 0x55550000456),
                      Frame("__libc_start_call_main", "/lib/x86_64-linux-gnu/libc.so.6", 0x7f00)});
  Json b = Backtrace({Frame("crash_here", "/opt/build/fr_crash", 0x56660000999),
                      Frame("main", "/opt/build/fr_crash", 0x56660000aaa),
                      Frame("__libc_start_call_main", "/usr/lib/libc.so.6", 0x7e00)},
                     777);
  CrashSignature sa = ComputeSignature(a, "SIGSEGV", "/usr/bin/fr_crash");
  CrashSignature sb = ComputeSignature(b, "SIGSEGV", "/opt/build/fr_crash");
  EXPECT_EQ(sa.id, sb.id);
  EXPECT_EQ(sa.id.size(), 16u);
  EXPECT_EQ(sa.title, "SIGSEGV in crash_here ← main ← __libc_start_call_main (fr_crash)");
  ASSERT_EQ(sa.frames.size(), 3u);
  EXPECT_EQ(sa.frames[2], (SignatureFrame{"__libc_start_call_main", "libc.so"}));
}

TEST(CrashSignatureTest, DifferentBugsHaveDifferentSignatures) {
  Json a = Backtrace({Frame("crash_here", "/bin/p"), Frame("main", "/bin/p")});
  Json other_fn = Backtrace({Frame("parse", "/bin/p"), Frame("main", "/bin/p")});
  Json other_module = Backtrace({Frame("crash_here", "/bin/q"), Frame("main", "/bin/q")});
  Json other_caller = Backtrace({Frame("crash_here", "/bin/p"), Frame("run", "/bin/p")});
  const std::string id = ComputeSignature(a, "SIGSEGV", "p").id;
  EXPECT_NE(id, ComputeSignature(other_fn, "SIGSEGV", "p").id);
  EXPECT_NE(id, ComputeSignature(other_module, "SIGSEGV", "p").id);
  EXPECT_NE(id, ComputeSignature(other_caller, "SIGSEGV", "p").id);
  EXPECT_NE(id, ComputeSignature(a, "SIGBUS", "p").id) << "the signal is part of the failure";
}

TEST(CrashSignatureTest, OnlyTheTopFiveFramesCount) {
  std::vector<Json> frames;
  for (int i = 0; i < 5; ++i) frames.push_back(Frame("f" + std::to_string(i), "/bin/p"));
  Json a = Backtrace(frames);
  frames.push_back(Frame("deeper_caller_one", "/bin/p"));
  Json b = Backtrace(frames);
  frames.back() = Frame("deeper_caller_two", "/bin/p");
  Json c = Backtrace(frames);
  EXPECT_EQ(ComputeSignature(a, "SIGSEGV", "p").id, ComputeSignature(b, "SIGSEGV", "p").id);
  EXPECT_EQ(ComputeSignature(b, "SIGSEGV", "p").id, ComputeSignature(c, "SIGSEGV", "p").id);
  EXPECT_EQ(ComputeSignature(c, "SIGSEGV", "p").frames.size(), kSignatureFrames);
}

TEST(CrashSignatureTest, AbortRaiseAndAssertFramesAtTheTopAreSkipped) {
  const std::string libc = "/lib/x86_64-linux-gnu/libc.so.6";
  // glibc 2.36's assert() path, as the hook unwinds it.
  Json asserted = Backtrace(
      {Frame("__pthread_kill_implementation", libc), Frame("__pthread_kill_internal", libc),
       Frame("raise", libc), Frame("abort", libc), Frame("__assert_fail_base", libc),
       Frame("__assert_fail", libc), Frame("check_header", "/bin/svc"), Frame("main", "/bin/svc")});
  Json aborted = Backtrace({Frame("__restore_rt", libc), Frame("raise", libc), Frame("abort", libc),
                            Frame("check_header", "/bin/svc"), Frame("main", "/bin/svc")});
  CrashSignature s = ComputeSignature(asserted, "SIGABRT", "/bin/svc");
  ASSERT_FALSE(s.frames.empty());
  EXPECT_EQ(s.frames[0], (SignatureFrame{"check_header", "svc"}));
  EXPECT_EQ(s.id, ComputeSignature(aborted, "SIGABRT", "/bin/svc").id);
  EXPECT_EQ(s.title, "SIGABRT in check_header ← main (svc)");
  // Below the top, the same names are the program's own frames and count.
  Json middle = Backtrace(
      {Frame("check_header", "/bin/svc"), Frame("abort", libc), Frame("main", "/bin/svc")});
  EXPECT_EQ(ComputeSignature(middle, "SIGSEGV", "/bin/svc").frames.size(), 3u);
}

TEST(CrashSignatureTest, CompilerClonesAndSonameVersionsAreOneFunctionAndModule) {
  EXPECT_EQ(NormalizeFunction("parse.isra.0"), "parse");
  EXPECT_EQ(NormalizeFunction("parse.constprop.0.isra.0"), "parse");
  EXPECT_EQ(NormalizeFunction("parse.cold"), "parse");
  EXPECT_EQ(NormalizeFunction("ns::Parser::run(int) [clone .cold]"), "ns::Parser::run(int)");
  EXPECT_EQ(NormalizeFunction("f(std::vector<int, std::allocator<int> > const&)"),
            "f(std::vector<int, std::allocator<int> > const&)");
  EXPECT_EQ(NormalizeFunction(""), "?");
  EXPECT_EQ(NormalizeModule("/usr/lib/x86_64-linux-gnu/libssl.so.3"), "libssl.so");
  EXPECT_EQ(NormalizeModule("/usr/lib/libfoo.so.1.2.3"), "libfoo.so");
  EXPECT_EQ(NormalizeModule("/srv/app/bin/server (deleted)"), "server");
  EXPECT_EQ(NormalizeModule("[vdso]"), "[vdso]");
  EXPECT_EQ(NormalizeModule(""), "?");
  Json a = Backtrace({Frame("parse.isra.0", "/usr/lib/libp.so.1.0"), Frame("main", "/bin/p")});
  Json b = Backtrace({Frame("parse.isra.1", "/usr/lib/libp.so.1.1"), Frame("main", "/bin/p")});
  EXPECT_EQ(ComputeSignature(a, "SIGSEGV", "p").id, ComputeSignature(b, "SIGSEGV", "p").id);
}

TEST(CrashSignatureTest, TheCrashingThreadIsTheOneTheHookNames) {
  Json bt = {{"threads",
              {{{"tid", 5}, {"frames", {Frame("spin_a", "/bin/p")}}},
               {{"tid", 6}, {"frames", {Frame("worker_crash", "/bin/p")}}}}},
             {"crashing_tid", 6}};
  EXPECT_EQ(ComputeSignature(bt, "SIGSEGV", "p").frames[0].function, "worker_crash");
  bt.erase("crashing_tid");
  EXPECT_EQ(ComputeSignature(bt, "SIGSEGV", "p").frames[0].function, "spin_a");
}

TEST(CrashSignatureTest, WithoutABacktraceCrashesGroupByProgramAndSignal) {
  Json none = {{"error", "not a core file libunwind can read"}};
  CrashSignature a = ComputeSignature(none, "SIGSEGV", "/usr/bin/svc");
  EXPECT_TRUE(a.frames.empty());
  EXPECT_EQ(a.title, "SIGSEGV in svc (no backtrace)");
  EXPECT_EQ(a.id, ComputeSignature(Json::object(), "SIGSEGV", "/opt/svc").id);
  EXPECT_NE(a.id, ComputeSignature(none, "SIGSEGV", "/usr/bin/other").id);
  // Frames that name nothing say no more than none.
  Json unknown = Backtrace({Frame("", ""), Frame("", "")});
  EXPECT_EQ(ComputeSignature(unknown, "SIGSEGV", "/usr/bin/svc").id, a.id);
}

TEST(CrashSignatureTest, HostileBacktracesAreBoundedAndNeverThrow) {
  for (const Json& j : {Json(nullptr), Json("threads"), Json::array({1, 2}), Json{{"threads", "x"}},
                        Json{{"threads", {1, "a", nullptr}}},
                        Json{{"threads", {{{"frames", {1, "x", Json::array()}}}}}},
                        Json{{"threads", {{{"frames", {{{"function", 7}, {"dso", true}}}}}}}}}) {
    CrashSignature s = ComputeSignature(j, "SIGSEGV", "p");
    EXPECT_EQ(s.id.size(), 16u) << j.dump();
  }
  std::string longname(100000, 'x');
  std::string nasty = "evil\x1b]0;owned\x07\n\r" + std::string("\0", 1) + "\xff\xfe";
  Json bt = Backtrace({Frame(longname, "/bin/" + longname), Frame(nasty, "/bin/" + nasty)});
  CrashSignature s = ComputeSignature(bt, std::string(500, 'S'), nasty);
  ASSERT_EQ(s.frames.size(), 2u);
  EXPECT_LE(s.frames[0].function.size(), kMaxFunctionBytes);
  EXPECT_LE(s.frames[0].module.size(), kMaxModuleBytes);
  EXPECT_LE(s.title.size(), 512u);
  for (const auto& text : {s.frames[1].function, s.frames[1].module, s.title}) {
    for (char c : text) EXPECT_FALSE(static_cast<unsigned char>(c) < 0x20) << text;
  }
  EXPECT_EQ(BoundedText("aé", 2), "a") << "cut on a UTF-8 boundary";
}

TEST(CrashSignatureTest, TheDefinitionIsStableAcrossReleases) {
  // Ids are stored in every fleet's index: a change to the definition must
  // be deliberate (bump kVersion in crash_signature.cc and docs/FLEET.md),
  // never a side effect. v1's id of this stack, computed outside flightrec:
  //   printf 'flightrec-signature v1\nSIGSEGV\ncrash_here\tfr_crash\nmain\tfr_crash\n' |
  //     sha256sum | cut -c1-16
  Json bt =
      Backtrace({Frame("crash_here", "/usr/bin/fr_crash"), Frame("main", "/usr/bin/fr_crash")});
  EXPECT_EQ(ComputeSignature(bt, "SIGSEGV", "fr_crash").id, "9fd53af14c0a1eac");
}

using flightrec::testing::TempDir;

TEST(CrashSignatureTest, ACrashRecordGivesWhatTheIndexKeeps) {
  TempDir dir;
  auto st = store::Store::Open(dir.path(), {});
  ASSERT_TRUE(st.ok()) << st.status().ToString();
  auto rec = (*st)->BeginRecord("crash");
  ASSERT_TRUE(rec.ok());
  Json bt =
      Backtrace({Frame("raise", "/lib/libc.so.6"), Frame("abort", "/lib/libc.so.6"),
                 Frame("crash_here", "/usr/bin/fr_crash"), Frame("main", "/usr/bin/fr_crash")},
                4243);
  ASSERT_TRUE((*rec)->writer().AddSection("backtrace", bt.dump()).ok());
  ASSERT_TRUE((*rec)->writer().AddSection("metadata", Json{{"build_id", "deadbeef"}}.dump()).ok());
  // The hook's meta: comm and exe as the process's bytes (`_hex` when not UTF-8).
  Json meta = {
      {"crash",
       {{"pid", 4242},
        {"tid", 1},
        {"global_tid", 4243},
        {"signal", 6},
        {"signal_name", "SIGABRT"},
        {"comm", "fr_crash"},
        {"exe", "/usr/bin/fr_crash"}}},
      {"processes", {{{"pid", 4242}, {"comm", "fr_crash"}, {"exe", "/usr/bin/fr_crash"}}}}};
  auto row = (*st)->Commit(std::move(*rec), meta);
  ASSERT_TRUE(row.ok()) << row.status().ToString();
  auto reader = (*st)->OpenRecord(row->id);
  ASSERT_TRUE(reader.ok());
  auto c = CrashFromRecord(**reader);
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_EQ(c->pid, 4242u);
  EXPECT_EQ(c->signal, 6);
  EXPECT_EQ(c->signal_name, "SIGABRT");
  EXPECT_EQ(c->executable, "/usr/bin/fr_crash");
  EXPECT_EQ(c->build_id, "deadbeef");
  EXPECT_EQ(c->signature.title, "SIGABRT in crash_here ← main (fr_crash)");
  ASSERT_EQ(c->processes.size(), 1u);
  EXPECT_EQ(c->processes[0].build_id, "deadbeef");

  // A dump is not a crash.
  auto dump = (*st)->BeginRecord("dump");
  ASSERT_TRUE(dump.ok());
  auto drow = (*st)->Commit(std::move(*dump), Json::object());
  ASSERT_TRUE(drow.ok());
  auto dreader = (*st)->OpenRecord(drow->id);
  EXPECT_EQ(CrashFromRecord(**dreader).status().code(), StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace flightrec::fleet
