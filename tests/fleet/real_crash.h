// A real crash record of tests/programs/fr_crash, made without
// kernel.core_pattern (other tests own it): gdb runs fr_crash to its SIGSEGV
// and writes the core of the stopped process (generate-core-file) and its
// /proc/PID/maps. The hook's own unwinder (coredump::Backtrace: libunwind
// over the core, symbolized by the attribution pipeline) turns them into the
// `backtrace` section, and the record is committed into a store the way the
// hook commits one. The hook itself is not run on that core: its CoreReducer
// refuses gdb's core layout ("segment 1 at offset 1128 overlaps the headers
// and notes"), and only the kernel writes the layout it expects.
#pragma once

#include <sys/types.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>

#include <fmt/format.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "coredump-hook/coredump.h"
#include "store/store.h"
#include "tests/support/files.h"
#include "tests/support/run.h"

namespace flightrec::testing {

struct RealCrash {
  std::string id;            // the committed record's id; "" if a step failed
  nlohmann::json backtrace;  // its `backtrace` section
};

// Crashes fr_crash under gdb (scratch files in `tmp`, named after `tag`) and
// commits the crash record into the store at `store_dir`. A failed step is
// reported as a test failure and leaves id empty.
inline RealCrash CommitRealCrash(const std::string& tmp, const std::string& store_dir,
                                 const std::string& tag) {
  RealCrash out;
  const std::string prog = BuildPath("tests/programs/fr_crash");
  const std::string core = tmp + "/core-" + tag, maps = core + ".maps";
  const std::string script = tmp + "/gdb-" + tag + ".py";
  std::ofstream(script) << fmt::format(
      "import gdb\n"
      "pid = gdb.selected_inferior().pid\n"
      "gdb.execute('generate-core-file {0}', to_string=True)\n"
      "open('{1}', 'w').write(open('/proc/%d/maps' % pid).read())\n"
      "print('PID', pid)\n",
      core, maps);
  auto r = RunCommand(
      {"/usr/bin/gdb", "-nx", "-batch", "-ex", "run", "-x", script, "--args", prog, "segv", "10"});
  auto at = r.out.find("PID ");
  EXPECT_NE(at, std::string::npos) << r.out << r.err;
  if (at == std::string::npos) return out;
  const pid_t pid = std::atoi(r.out.c_str() + at + 4);
  out.backtrace = coredump::Backtrace(core, ReadFile(maps), pid, pid, {{pid, pid}});
  std::filesystem::remove(core);
  auto st = store::Store::Open(store_dir, {});
  EXPECT_TRUE(st.ok()) << st.status().ToString();
  if (!st.ok()) return out;
  auto rec = (*st)->BeginRecord("crash");
  EXPECT_TRUE(rec.ok());
  if (!rec.ok()) return out;
  EXPECT_TRUE((*rec)->writer().AddSection("backtrace", out.backtrace.dump()).ok());
  nlohmann::json meta = {{"crash",
                          {{"pid", pid},
                           {"signal", 11},
                           {"signal_name", "SIGSEGV"},
                           {"comm", "fr_crash"},
                           {"exe", prog}}},
                         {"processes", {{{"pid", pid}, {"comm", "fr_crash"}, {"exe", prog}}}}};
  auto row = (*st)->Commit(std::move(*rec), meta);
  EXPECT_TRUE(row.ok()) << row.status().ToString();
  if (row.ok()) out.id = row->id;
  return out;
}

}  // namespace flightrec::testing
