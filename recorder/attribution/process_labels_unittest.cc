#include "recorder/attribution/process_labels.h"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <string>

#include "common/read_file.h"

namespace flightrec::recorder::attribution {
namespace {

TEST(ProcessLabelsTest, NamespaceIdsAreReadFromTheKernelsSpelling) {
  EXPECT_EQ(NamespaceInode("pid:[4026531836]"), 4026531836u);
  EXPECT_EQ(NamespaceInode("user:[4026531837]"), 4026531837u);
  EXPECT_EQ(NamespaceInode("pid:[]"), 0u);
  EXPECT_EQ(NamespaceInode("pid:[12x]"), 0u);
  EXPECT_EQ(NamespaceInode("pid:[99999999999999999999999]"), 0u);
  EXPECT_EQ(NamespaceInode("garbage"), 0u);
  // NSpid: the pid in each namespace, the initial one first, its own last
  // (fs/proc/array.c, task_state).
  EXPECT_EQ(NamespacePid("Name:\tx\nNSpid:\t4242\t7\t1\nPPid:\t1\n"), 1u);
  EXPECT_EQ(NamespacePid("NSpid:\t4242\n"), 4242u);
  EXPECT_EQ(NamespacePid("Name:\tx\n"), 0u);
  EXPECT_EQ(NamespacePid("NSpid:\t12 abc\n"), 0u);
  EXPECT_EQ(NamespacePid("NSpid:\t99999999999\n"), 0u);
}

TEST(ProcessLabelsTest, ARunningProcessIsReadFromProc) {
  auto l = ReadProcessLabels(static_cast<uint32_t>(getpid()));
  ASSERT_TRUE(l.has_value());
  auto text = ReadFileToString("/proc/self/cgroup", 1 << 16);
  ASSERT_TRUE(text.ok());
  EXPECT_EQ(l->cgroup.path, cgroup::ParseProcCgroup(*text).path);
  EXPECT_FALSE(l->cgroup.path.empty());
  struct stat st {};
  ASSERT_EQ(stat("/proc/self/ns/pid", &st), 0);
  EXPECT_EQ(l->pid_ns, st.st_ino);
  ASSERT_EQ(stat("/proc/self/ns/user", &st), 0);
  EXPECT_EQ(l->user_ns, st.st_ino);
  EXPECT_EQ(l->ns_pid, static_cast<uint32_t>(getpid()));  // the test runs in the initial one
  EXPECT_FALSE(ReadProcessLabels(0).has_value());
}

TEST(ProcessLabelsTest, AForkedChildHasItsParentsLabelsUntilItExecs) {
  const auto self = static_cast<uint32_t>(getpid());
  LabelCache cache;
  cache.Observe(CommEvent{.time_ns = 1, .pid = self, .tid = self, .comm = "t", .exec = true});
  // A child the sideband saw fork and exit: its labels are its parent's,
  // copied without reading /proc (the pid may be gone or reused by then).
  const uint32_t child = 0x7ffffff0;
  cache.Observe(TaskEvent{.time_ns = 2, .pid = child, .ppid = self, .tid = child, .ptid = self});
  cache.Observe(TaskEvent{
      .time_ns = 3, .pid = child, .ppid = self, .tid = child, .ptid = self, .exit = true});
  auto l = cache.Labels(child, /*exited=*/true);
  ASSERT_TRUE(l.has_value());
  EXPECT_EQ(l->cgroup.path, ReadProcessLabels(self)->cgroup.path);
  EXPECT_EQ(l->pid_ns, ReadProcessLabels(self)->pid_ns);
  // A new thread (pid == ppid) is no new process.
  cache.Observe(TaskEvent{.time_ns = 4, .pid = self, .ppid = self, .tid = self + 1, .ptid = self});
  EXPECT_EQ(cache.size(), 2u);
  // Forgotten with the history window, not before.
  cache.Trim(3);
  EXPECT_TRUE(cache.Labels(child, true).has_value());
  cache.Trim(4);
  EXPECT_FALSE(cache.Labels(child, true).has_value());
  EXPECT_EQ(cache.size(), 1u);
}

TEST(ProcessLabelsTest, JsonOfAHostileRecordReadsAsUnknown) {
  ProcessLabels l;
  l.cgroup.path = std::string("/a\xff/b", 5);
  l.cgroup.unit = "b.service";
  l.cgroup.container_runtime = "docker";
  l.cgroup.container_id = std::string(64, 'a');
  l.cgroup.pod_uid = "u";
  l.cgroup.qos = "burstable";
  l.pid_ns = 4026531836;
  l.user_ns = 4026531837;
  l.ns_pid = 1;
  nlohmann::json j = nlohmann::json::object();
  AddLabelsToJson(l, &j);
  ProcessLabels back = LabelsFromJson(j);
  EXPECT_EQ(back.cgroup.path, l.cgroup.path);  // lossless through cgroup_hex
  EXPECT_EQ(back.cgroup.container_id, l.cgroup.container_id);
  EXPECT_EQ(back.cgroup.qos, "burstable");
  EXPECT_EQ(back.pid_ns, l.pid_ns);
  EXPECT_EQ(back.ns_pid, 1u);
  // Unknown labels are left out: a record without them reads as before.
  nlohmann::json empty = nlohmann::json::object();
  AddLabelsToJson(ProcessLabels{}, &empty);
  EXPECT_TRUE(empty.empty());
  for (const char* text : {R"({"cgroup":5,"unit":[],"container_id":{},"pid_ns":-1,"ns_pid":"x"})",
                           R"([1,2])", R"("x")", R"({"pid_ns":1e300,"user_ns":true})"}) {
    ProcessLabels h = LabelsFromJson(nlohmann::json::parse(text));
    EXPECT_EQ(h.cgroup.path, "") << text;
    EXPECT_EQ(h.cgroup.unit, "") << text;
    EXPECT_EQ(h.cgroup.container_id, "") << text;
    EXPECT_EQ(h.pid_ns, 0u) << text;
    EXPECT_EQ(h.user_ns, 0u) << text;
    EXPECT_EQ(h.ns_pid, 0u) << text;
  }
}

}  // namespace
}  // namespace flightrec::recorder::attribution
