// The OOM watch's parsers on the kernel's own texts (6.18's mark_victim
// format, a memcg OOM's kmsg line, v1 and v2 memcg files as fixtures) and
// on forged or odd ones: each is a clear error or nothing, never a crash.
#include "recorder/daemon/oom_watch.h"

#include <gtest/gtest.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <fstream>

namespace flightrec::recorder {
namespace {

// include/trace/events/oom.h, as 6.18's tracefs prints it.
constexpr const char* kFormat618 = R"(name: mark_victim
ID: 609
format:
	field:unsigned short common_type;	offset:0;	size:2;	signed:0;
	field:unsigned char common_flags;	offset:2;	size:1;	signed:0;
	field:unsigned char common_preempt_count;	offset:3;	size:1;	signed:0;
	field:int common_pid;	offset:4;	size:4;	signed:1;

	field:int pid;	offset:8;	size:4;	signed:1;
	field:__data_loc char[] comm;	offset:12;	size:4;	signed:0;
	field:unsigned long total_vm;	offset:16;	size:8;	signed:0;
	field:unsigned long anon_rss;	offset:24;	size:8;	signed:0;
	field:unsigned long file_rss;	offset:32;	size:8;	signed:0;
	field:unsigned long shmem_rss;	offset:40;	size:8;	signed:0;
	field:uid_t uid;	offset:48;	size:4;	signed:0;
	field:unsigned long pgtables;	offset:56;	size:8;	signed:0;
	field:short oom_score_adj;	offset:64;	size:2;	signed:1;

print fmt: "pid=%d comm=%s"
)";

std::string Replace(std::string s, const std::string& from, const std::string& to) {
  s.replace(s.find(from), from.size(), to);
  return s;
}

// A raw mark_victim record as the kernel writes it for the 6.18 layout.
std::string Raw(int32_t pid, const std::string& comm, uint32_t comm_loc = 0) {
  std::string r(72, '\0');
  auto put = [&r](size_t off, auto v) { std::memcpy(r.data() + off, &v, sizeof(v)); };
  put(8, pid);
  put(12, comm_loc ? comm_loc : static_cast<uint32_t>(72 | ((comm.size() + 1) << 16)));
  put(16, uint64_t{133500});
  put(24, uint64_t{130600});
  put(32, uint64_t{1536});
  put(40, uint64_t{0});
  put(48, uint32_t{1000});
  put(56, uint64_t{300});
  put(64, int16_t{-17});
  r += comm;
  r.push_back('\0');
  return r;
}

TEST(MarkVictimTest, ReadsThe618LayoutAndARecord) {
  auto l = ParseMarkVictimFormat(kFormat618);
  ASSERT_TRUE(l.ok()) << l.status().message();
  EXPECT_EQ(l->comm.offset, 12u);
  EXPECT_EQ(l->oom_score_adj.offset, 64u);
  ASSERT_TRUE(l->uid.has_value());
  auto v = DecodeMarkVictim(*l, Raw(4242, "fr_leak"));
  ASSERT_TRUE(v.ok()) << v.status().message();
  EXPECT_EQ(v->pid, 4242);
  EXPECT_EQ(v->comm, "fr_leak");
  EXPECT_EQ(v->total_vm_kb, 133500u);
  EXPECT_EQ(v->anon_rss_kb, 130600u);
  EXPECT_EQ(v->file_rss_kb, 1536u);
  EXPECT_EQ(v->uid, 1000);
  EXPECT_EQ(v->pgtables_kb, 300u);
  EXPECT_EQ(v->oom_score_adj, -17);
}

TEST(MarkVictimTest, OddFormatsAreErrorsNamingTheField) {
  struct Case {
    std::string format, names;
  };
  const std::string f = kFormat618;
  const std::vector<Case> cases = {
      {Replace(f, "field:int pid;", "field:int victim;"), "'pid'"},
      {Replace(f, "offset:16;\tsize:8", "offset:16;\tsize:4"), "'total_vm'"},
      {Replace(f, "offset:64;\tsize:2", "offset:99999999;\tsize:2"), "'oom_score_adj'"},
      {Replace(f, "offset:48;\tsize:4", "offset:48;\tsize:8"), "'uid'"},
      {Replace(f, "offset:24;", "offset:x;"), "'anon_rss'"},
      {"", "'pid'"},
      {std::string(100000, 'f'), "'pid'"},
  };
  for (const auto& c : cases) {
    auto l = ParseMarkVictimFormat(c.format);
    ASSERT_FALSE(l.ok()) << c.names;
    EXPECT_NE(l.status().message().find(c.names), std::string::npos) << l.status().message();
  }
}

TEST(MarkVictimTest, RecordsThatDoNotFitAreRefused) {
  auto l = ParseMarkVictimFormat(kFormat618);
  ASSERT_TRUE(l.ok());
  EXPECT_FALSE(DecodeMarkVictim(*l, "").ok());
  EXPECT_FALSE(DecodeMarkVictim(*l, Raw(1, "x").substr(0, 60)).ok());
  EXPECT_FALSE(DecodeMarkVictim(*l, Raw(0, "x")).ok());   // no such pid
  EXPECT_FALSE(DecodeMarkVictim(*l, Raw(-5, "x")).ok());  // negative
  // A comm whose __data_loc points past the record.
  auto far = DecodeMarkVictim(*l, Raw(7, "x", 0xfff0 | (0xffffu << 16)));
  ASSERT_FALSE(far.ok());
  EXPECT_NE(far.status().message().find("comm"), std::string::npos);
  // A comm without a NUL, longer than a comm: cut at 16 bytes.
  auto r = Raw(7, std::string(40, 'A'));
  auto v = DecodeMarkVictim(*l, r);
  ASSERT_TRUE(v.ok());
  EXPECT_EQ(v->comm.size(), 16u);
}

constexpr const char* kMemcgLine =
    "6,5512,9123456,-;oom-kill:constraint=CONSTRAINT_MEMCG,nodemask=(null),cpuset=/,"
    "mems_allowed=0,oom_memcg=/fr-oom-test-1,task_memcg=/fr-oom-test-1,task=fr_leak,pid=4242,"
    "uid=0\n";

TEST(OomKmsgTest, ReadsTheKernelsLine) {
  auto k = ParseOomKmsgRecord(kMemcgLine);
  ASSERT_TRUE(k.ok()) << k.status().message();
  ASSERT_TRUE(k->has_value());
  EXPECT_EQ((*k)->constraint, "memcg");
  EXPECT_EQ((*k)->pid, 4242);
  EXPECT_EQ((*k)->uid, 0);
  EXPECT_EQ((*k)->oom_memcg, "/fr-oom-test-1");
  auto g = ParseOomKmsgRecord(
      "6,1,2,-;oom-kill:constraint=CONSTRAINT_NONE,nodemask=(null),cpuset=/,mems_allowed=0-1,"
      "global_oom,task_memcg=/user.slice,task=python3,pid=77,uid=1000\n");
  ASSERT_TRUE(g.ok() && g->has_value());
  EXPECT_EQ((*g)->constraint, "global");
  EXPECT_EQ((*g)->oom_memcg, "");
}

TEST(OomKmsgTest, ForgedAndOddLinesAreNothingOrClearErrors) {
  // Other messages, and a user's write to /dev/kmsg (facility user, 1).
  for (const char* other : {"", "no semicolon", "6,1,2,-;Out of memory: Killed process 1",
                            "14,1,2,-;oom-kill:constraint=CONSTRAINT_MEMCG,pid=1,uid=0",
                            "x,1,2,-;oom-kill:constraint=CONSTRAINT_MEMCG,pid=1,uid=0"}) {
    auto k = ParseOomKmsgRecord(other);
    ASSERT_TRUE(k.ok()) << other;
    EXPECT_FALSE(k->has_value()) << other;
  }
  // A comm that names another pid and uid: the kernel's own fields come last.
  auto c = ParseOomKmsgRecord(
      "6,1,2,-;oom-kill:constraint=CONSTRAINT_MEMCG,nodemask=(null),cpuset=/,mems_allowed=0,"
      "oom_memcg=/a,task_memcg=/a,task=x,pid=1,uid=0,pid=99,uid=1000\n");
  ASSERT_TRUE(c.ok() && c->has_value());
  EXPECT_EQ((*c)->pid, 99);
  EXPECT_EQ((*c)->uid, 1000);
  // A cpuset named like the memcg field: which is which is unknown.
  auto a = ParseOomKmsgRecord(
      "6,1,2,-;oom-kill:constraint=CONSTRAINT_MEMCG,nodemask=(null),cpuset=/x,oom_memcg=/,"
      "mems_allowed=0,oom_memcg=/a,task_memcg=/a,task=x,pid=5,uid=0");
  ASSERT_TRUE(a.ok() && a->has_value());
  EXPECT_TRUE((*a)->memcg_ambiguous);
  EXPECT_EQ((*a)->oom_memcg, "");
  // A memcg path that climbs: never used.
  auto d = ParseOomKmsgRecord(
      "6,1,2,-;oom-kill:constraint=CONSTRAINT_MEMCG,oom_memcg=/../../etc,task_memcg=/a,task=x,"
      "pid=5,uid=0");
  ASSERT_TRUE(d.ok() && d->has_value());
  EXPECT_EQ((*d)->oom_memcg, "");
  struct Bad {
    const char* line;
    const char* says;
  };
  for (const Bad& b : std::vector<Bad>{
           {"6,1,2,-;oom-kill:constraint=CONSTRAINT_EVIL,pid=1,uid=0", "unknown constraint"},
           {"6,1,2,-;oom-kill:constraint=CONSTRAINT_MEMCG,task=x", "pid="},
           {"6,1,2,-;oom-kill:constraint=CONSTRAINT_MEMCG,pid=99999999999,uid=0", "range"},
           {"6,1,2,-;oom-kill:constraint=CONSTRAINT_MEMCG,pid=-1,uid=0", "range"},
           {"6,1,2,-;oom-kill:constraint=CONSTRAINT_MEMCG,pid=12,uid=", "range"},
           {"6,1,2,-;oom-kill:constraint=CONSTRAINT_MEMCG,pid=1x,uid=0", "range"},
       }) {
    auto k = ParseOomKmsgRecord(b.line);
    ASSERT_FALSE(k.ok()) << b.line;
    EXPECT_NE(k.status().message().find(b.says), std::string::npos) << k.status().message();
  }
}

TEST(MemcgTest, TheMemoryCgroupOfAProcCgroupText) {
  const char* v1 =
      "12:pids:/user.slice\n11:memory:/fr-oom-test-1\n1:name=systemd:/user.slice\n0::/\n";
  EXPECT_EQ(MemoryCgroupOf(v1, true), "/fr-oom-test-1");
  EXPECT_EQ(MemoryCgroupOf("4:cpu,memory:/a/b\n", true), "/a/b");
  EXPECT_EQ(MemoryCgroupOf("0::/system.slice/x.service\n", false), "/system.slice/x.service");
  EXPECT_EQ(MemoryCgroupOf("4:memoryx:/a\n", true), std::nullopt);
  EXPECT_EQ(MemoryCgroupOf("4:memory:/a/../../etc\n", true), std::nullopt);
  EXPECT_EQ(MemoryCgroupOf("4:memory:relative\n", true), std::nullopt);
  EXPECT_EQ(MemoryCgroupOf("", false), std::nullopt);
  EXPECT_EQ(MemoryCgroupOf(std::string(100000, ':'), true), std::nullopt);
}

class MemcgFilesTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char t[] = "/tmp/oom_watch_unittest.XXXXXX";
    ASSERT_NE(mkdtemp(t), nullptr);
    dir_ = t;
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }
  void Write(const std::string& rel, const std::string& text) {
    std::filesystem::create_directories(std::filesystem::path(dir_ + rel).parent_path());
    std::ofstream(dir_ + rel) << text;
  }
  std::string dir_;
};

TEST_F(MemcgFilesTest, V1Figures) {
  Write("/memory/a/memory.limit_in_bytes", "134217728\n");
  Write("/memory/a/memory.usage_in_bytes", "134000000\n");
  Write("/memory/a/memory.max_usage_in_bytes", "134217728\n");
  Write("/memory/a/memory.failcnt", "812\n");
  Write("/memory/a/memory.oom_control", "oom_kill_disable 0\nunder_oom 0\noom_kill 1\n");
  Write("/memory/b/memory.limit_in_bytes", "9223372036854771712\n");  // unlimited
  Write("/memory/b/memory.usage_in_bytes", "12x\n");
  auto m = ReadMemcgFigures({dir_ + "/memory", ""}, "/a");
  EXPECT_EQ(m.version, "v1");
  EXPECT_EQ(m.limit_bytes, 134217728u);
  EXPECT_EQ(m.usage_bytes, 134000000u);
  EXPECT_EQ(m.peak_bytes, 134217728u);
  EXPECT_EQ(m.failcnt, 812u);
  EXPECT_EQ(m.events.at("oom_kill"), 1u);
  EXPECT_EQ(m.error, "");
  auto b = ReadMemcgFigures({dir_ + "/memory", ""}, "/b");
  EXPECT_FALSE(b.limit_bytes.has_value());
  EXPECT_FALSE(b.usage_bytes.has_value());
  EXPECT_NE(b.error, "");
}

TEST_F(MemcgFilesTest, V2Figures) {
  Write("/v2/a/memory.max", "134217728\n");
  Write("/v2/a/memory.current", "133999616\n");
  Write("/v2/a/memory.peak", "134217728\n");
  Write("/v2/a/memory.events", "low 0\nhigh 0\nmax 1412\noom 1\noom_kill 1\noom_group_kill 0\n");
  Write("/v2/b/memory.max", "max\n");
  Write("/v2/b/memory.current", "4096\n");
  Write("/v2/b/memory.events", std::string(1 << 20, 'x') + " 5\n");
  auto m = ReadMemcgFigures({"", dir_ + "/v2"}, "/a");
  EXPECT_EQ(m.version, "v2");
  EXPECT_EQ(m.limit_bytes, 134217728u);
  EXPECT_EQ(m.usage_bytes, 133999616u);
  EXPECT_EQ(m.events.at("max"), 1412u);
  EXPECT_EQ(m.events.at("oom_kill"), 1u);
  auto b = ReadMemcgFigures({"", dir_ + "/v2"}, "/b");
  EXPECT_FALSE(b.limit_bytes.has_value());  // "max"
  EXPECT_EQ(b.usage_bytes, 4096u);
  EXPECT_TRUE(b.events.empty());  // a huge key is no event
  // Paths that climb, or no hierarchy at all: an error, nothing read.
  EXPECT_NE(ReadMemcgFigures({"", dir_ + "/v2"}, "/a/../../etc").error, "");
  EXPECT_NE(ReadMemcgFigures({"", ""}, "/a").error, "");
}

TEST(OomJsonTest, NamesAreTextAndMissingFiguresAreSaid) {
  OomKill k;
  k.victim.pid = 5;
  k.victim.comm = "\xff\x1b]0;x";
  k.victim.trigger_pid = 6;
  k.memcg.error = "gone";
  auto j = OomJson(k);
  EXPECT_EQ(j["constraint"], "unknown");
  EXPECT_FALSE(j["notes"].empty());
  EXPECT_EQ(j["trigger"]["is_victim"], false);
  EXPECT_EQ(j["memcg"]["error"], "gone");
  EXPECT_NO_THROW((void)j.dump());
}

}  // namespace
}  // namespace flightrec::recorder
