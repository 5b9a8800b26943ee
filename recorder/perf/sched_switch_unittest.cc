// ParseSchedSwitchFormat on the tracepoint's real format text (this kernel's
// tracefs) and on hostile ones; SchedSwitchFormat::Read on short records.
#include "recorder/perf/sched_switch.h"

#include <gtest/gtest.h>

#include <cstring>

namespace flightrec::recorder::perf {
namespace {

// events/sched/sched_switch/format of Linux 6.18 (x86-64).
constexpr const char* kFormat618 =
    "name: sched_switch\n"
    "ID: 372\n"
    "format:\n"
    "\tfield:unsigned short common_type;\toffset:0;\tsize:2;\tsigned:0;\n"
    "\tfield:unsigned char common_flags;\toffset:2;\tsize:1;\tsigned:0;\n"
    "\tfield:unsigned char common_preempt_count;\toffset:3;\tsize:1;\tsigned:0;\n"
    "\tfield:int common_pid;\toffset:4;\tsize:4;\tsigned:1;\n"
    "\n"
    "\tfield:char prev_comm[16];\toffset:8;\tsize:16;\tsigned:0;\n"
    "\tfield:pid_t prev_pid;\toffset:24;\tsize:4;\tsigned:1;\n"
    "\tfield:int prev_prio;\toffset:28;\tsize:4;\tsigned:1;\n"
    "\tfield:long prev_state;\toffset:32;\tsize:8;\tsigned:1;\n"
    "\tfield:char next_comm[16];\toffset:40;\tsize:16;\tsigned:0;\n"
    "\tfield:pid_t next_pid;\toffset:56;\tsize:4;\tsigned:1;\n"
    "\tfield:int next_prio;\toffset:60;\tsize:4;\tsigned:1;\n"
    "\n"
    "print fmt: \"prev_comm=%s prev_pid=%d\", REC->prev_comm, REC->prev_pid\n";

TEST(SchedSwitchFormatTest, ReadsOffsetsFromTheFormatText) {
  auto f = ParseSchedSwitchFormat(kFormat618);
  ASSERT_TRUE(f.ok()) << f.status().message();
  EXPECT_EQ(f->id, 372u);
  EXPECT_EQ(f->prev_pid.offset, 24u);
  EXPECT_EQ(f->prev_state.offset, 32u);
  EXPECT_EQ(f->prev_state.size, 8u);
  EXPECT_EQ(f->next_pid.offset, 56u);
  char raw[64] = {};
  int32_t prev = 41, next = 42;
  int64_t state = 2;
  std::memcpy(raw + 24, &prev, 4);
  std::memcpy(raw + 32, &state, 8);
  std::memcpy(raw + 56, &next, 4);
  SchedSwitchFormat::Values v;
  ASSERT_TRUE(f->Read(std::string_view(raw, sizeof(raw)), &v));
  EXPECT_EQ(v.prev_pid, 41u);
  EXPECT_EQ(v.prev_state, 2u);
  EXPECT_EQ(v.next_pid, 42u);
  // A record too short for next_pid is refused, not read past.
  EXPECT_FALSE(f->Read(std::string_view(raw, 59), &v));
}

TEST(SchedSwitchFormatTest, HostileFormatTextIsAnErrorNamingTheField) {
  std::string no_next = kFormat618;
  no_next.replace(no_next.find("next_pid"), 8, "next_pix");
  auto r = ParseSchedSwitchFormat(no_next);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("next_pid"), std::string::npos) << r.status().message();

  std::string wide = kFormat618;
  wide.replace(wide.find("offset:24;\tsize:4"), 17, "offset:24;\tsize:8");
  r = ParseSchedSwitchFormat(wide);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("prev_pid"), std::string::npos) << r.status().message();

  std::string far = kFormat618;
  far.replace(far.find("offset:56"), 9, "offset:99999999999");
  EXPECT_FALSE(ParseSchedSwitchFormat(far).ok());
  EXPECT_FALSE(ParseSchedSwitchFormat("").ok());
  std::string no_id = kFormat618;
  no_id.erase(no_id.find("ID: 372\n"), 8);
  r = ParseSchedSwitchFormat(no_id);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("ID"), std::string::npos) << r.status().message();
}

TEST(SchedSwitchFormatTest, ThisKernelsTracepointParses) {
  auto f = LoadSchedSwitchFormat();
  ASSERT_TRUE(f.ok()) << f.status().message();
  EXPECT_GT(f->id, 0u);
}

}  // namespace
// Another tracepoint's field (sched_process_hang's pid, for hung-task
// triggers; Linux 6.18's text, where comm is a __data_loc and pid sits at 12,
// not after a 16-byte comm as in 6.1): read from its format text; a missing
// field or ID is an error.
TEST(TracepointFieldTest, ReadsOneFieldAndRefusesWhatIsMissing) {
  const std::string hang =
      "name: sched_process_hang\nID: 361\nformat:\n"
      "\tfield:unsigned short common_type;\toffset:0;\tsize:2;\tsigned:0;\n"
      "\tfield:__data_loc char[] comm;\toffset:8;\tsize:4;\tsigned:0;\n"
      "\tfield:pid_t pid;\toffset:12;\tsize:4;\tsigned:1;\n";
  auto f = ParseTracepointField(hang, "pid");
  ASSERT_TRUE(f.ok()) << f.status().message();
  EXPECT_EQ(f->id, 361u);
  EXPECT_EQ(f->field.offset, 12u);
  EXPECT_EQ(f->field.size, 4u);
  auto missing = ParseTracepointField(hang, "prev_pid");
  ASSERT_FALSE(missing.ok());
  EXPECT_NE(missing.status().message().find("no field prev_pid"), std::string::npos);
  EXPECT_FALSE(ParseTracepointField("format:\n", "pid").ok());
  // A huge offset is no field.
  EXPECT_FALSE(ParseTracepointField(
                   "ID: 1\n\tfield:pid_t pid;\toffset:99999999;\tsize:4;\tsigned:1;\n", "pid")
                   .ok());
}

}  // namespace flightrec::recorder::perf
