// Processes named by where they run, end to end: real fr_spin processes moved
// into real cgroups this test creates — a v1 one (systemd's own hierarchy,
// as on these machines) named as docker's systemd driver names a container's
// scope, a v2 one (the unified hierarchy) named as kubelet's systemd driver
// and containerd name a burstable pod's container — and one in a pid
// namespace of its own; recorderd records them, and report/script find,
// sort and filter them by container, unit and cgroup.
#include <gtest/gtest.h>
#include <linux/magic.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <map>
#include <random>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "tests/support/daemon.h"
#include "tests/support/files.h"
#include "tests/support/proc.h"
#include "tests/support/protoc.h"
#include "tests/support/run.h"
#include "tests/support/wait.h"

namespace flightrec::testing {
namespace {

using std::chrono::seconds;

std::string RandomHex(size_t n) {
  std::random_device rd;
  std::string s;
  while (s.size() < n) s += fmt::format("{:08x}", rd());
  return s.substr(0, n);
}

// A cgroup directory made for the test (with the parents it had to make),
// removed in reverse order once its processes are gone.
class TestCgroup {
 public:
  TestCgroup(const std::string& root, const std::vector<std::string>& levels) : path_(root) {
    for (const auto& l : levels) {
      path_ += "/" + l;
      if (mkdir(path_.c_str(), 0755) == 0) made_.push_back(path_);
    }
  }
  ~TestCgroup() {
    for (auto it = made_.rbegin(); it != made_.rend(); ++it) rmdir(it->c_str());
  }
  bool Move(pid_t pid) const {
    std::ofstream procs(path_ + "/cgroup.procs");
    procs << pid << std::flush;
    return procs.good();
  }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
  std::vector<std::string> made_;
};

bool IsCgroup2(const std::string& dir) {
  struct statfs fs {};
  return statfs(dir.c_str(), &fs) == 0 && fs.f_type == CGROUP2_SUPER_MAGIC;
}

// The unified hierarchy: /sys/fs/cgroup on a v2 machine, .../unified on a
// hybrid one (as here).
std::string UnifiedRoot() {
  for (const char* d : {"/sys/fs/cgroup/unified", "/sys/fs/cgroup"}) {
    if (IsCgroup2(d)) return d;
  }
  return "";
}

nlohmann::json Json(const RunResult& r) {
  EXPECT_EQ(r.exit_code, 0) << r.err;
  auto j = nlohmann::json::parse(r.out, nullptr, false);
  EXPECT_FALSE(j.is_discarded()) << r.out;
  return j;
}

uint64_t Samples(const Daemon& d, const std::string& id, std::vector<std::string> filter) {
  std::vector<std::string> args = {"report", id, "--json", "--sort", "pid"};
  args.insert(args.end(), filter.begin(), filter.end());
  return Json(d.Cli(args)).value("samples", uint64_t{0});
}

// OTLP samples' attributes as text, by the published schema.
std::vector<std::map<std::string, std::string>> OtlpSampleAttributes(const std::string& file) {
  auto r = ProtocDecodeWith(SourcePath("third_party/opentelemetry-proto"),
                            "opentelemetry/proto/profiles/v1development/profiles.proto",
                            "opentelemetry.proto.profiles.v1development.ProfilesData", file);
  EXPECT_EQ(r.exit_code, 0) << r.err;
  const Node root = ParseText(r.out);
  const Node* dict = root.Name("dictionary");
  std::vector<std::map<std::string, std::string>> out;
  if (dict == nullptr) return out;
  std::vector<std::string> strings;
  for (const Node* s : dict->Named("string_table")) strings.push_back(s->text);
  const auto attrs = dict->Named("attribute_table");
  const auto index = [](const Node& n, const char* f) { return n.Name(f) ? n.Name(f)->U() : 0; };
  for (const Node* rp : root.Named("resource_profiles")) {
    for (const Node* sp : rp->Named("scope_profiles")) {
      for (const Node* p : sp->Named("profiles")) {
        for (const Node* sample : p->Named("samples")) {
          auto& m = out.emplace_back();
          for (const Node* i : sample->Named("attribute_indices")) {
            const Node& kv = *attrs.at(i->U());
            const Node* v = kv.Name("value");
            const Node* sv = v ? v->Name("string_value") : nullptr;
            const Node* iv = v ? v->Name("int_value") : nullptr;
            m[strings.at(index(kv, "key_strindex"))] = sv ? sv->text : iv ? iv->text : "";
          }
        }
      }
    }
  }
  return out;
}

// Perfetto's process descriptors: pid -> its process_labels.
std::map<uint64_t, std::set<std::string>> PerfettoProcessLabels(const std::string& file) {
  auto r = ProtocDecodeRaw(file);
  EXPECT_EQ(r.exit_code, 0) << r.err;
  std::map<uint64_t, std::set<std::string>> out;
  const Node root = ParseText(r.out);
  for (const Node* packet : root.All(1)) {
    const Node* td = packet->One(60);            // TracePacket.track_descriptor
    const Node* pd = td ? td->One(3) : nullptr;  // TrackDescriptor.process
    if (pd == nullptr || pd->One(1) == nullptr) continue;
    for (const Node* l : pd->All(8)) out[pd->One(1)->U()].insert(l->text);
  }
  return out;
}

struct Spinner {
  pid_t pid = -1;     // what samples name
  pid_t waited = -1;  // what the test reaps (unshare, for the one in a namespace)
  ~Spinner() {
    if (pid > 0) kill(pid, SIGKILL);
    if (waited > 0) WaitStatus(waited);
  }
};

// fr_spin as pid 1 of a new pid namespace (unshare(1) forks it there); its
// pid outside is unshare's only child.
void SpawnInPidNamespace(Spinner* s) {
  s->waited =
      Spawn({"/usr/bin/unshare", "--pid", "--fork", BuildPath("tests/programs/fr_spin"), "600"});
  const std::string children = fmt::format("/proc/{}/task/{}/children", s->waited, s->waited);
  ASSERT_TRUE(WaitFor(
      [&] {
        std::ifstream in(children);
        return static_cast<bool>(in >> s->pid);
      },
      std::chrono::milliseconds(20000)));
  // Until unshare's child has exec'd fr_spin it is still called unshare.
  ASSERT_TRUE(WaitFor([&] { return StatusField(s->pid, "Name") == "fr_spin"; },
                      std::chrono::milliseconds(20000)));
}

TEST(CgroupLabelsTest, ReportAndScriptFindProcessesByContainerUnitAndCgroup) {
  const std::string unified = UnifiedRoot();
  ASSERT_FALSE(unified.empty()) << "no cgroup2 hierarchy mounted";
  ASSERT_TRUE(std::filesystem::exists("/sys/fs/cgroup/systemd/cgroup.procs"))
      << "no name=systemd v1 hierarchy mounted";
  TempDir dir;
  Daemon d(dir.path());
  ASSERT_TRUE(d.ready()) << d.Log();

  // docker's systemd driver: <parent slice>/docker-<id>.scope
  // (libcontainer/cgroups/systemd getUnitName); the parent is a slice of the
  // test's own, as `docker run --cgroup-parent` would make it.
  const std::string slice = fmt::format("flightrec_test-{}.slice", getpid());
  const std::string docker_id = RandomHex(64);
  TestCgroup v1("/sys/fs/cgroup/systemd", {slice, "docker-" + docker_id + ".scope"});
  // kubelet's systemd driver (ToSystemd in pkg/kubelet/cm/cgroup_manager_linux.go)
  // and containerd's CRI plugin with SystemdCgroup.
  const std::string pod = RandomHex(8) + "-" + RandomHex(4) + "-" + RandomHex(4) + "-" +
                          RandomHex(4) + "-" + RandomHex(12);
  std::string pod_slice = pod;
  std::replace(pod_slice.begin(), pod_slice.end(), '-', '_');
  const std::string cri_id = RandomHex(64);
  TestCgroup v2(unified, {slice, "kubepods-burstable-pod" + pod_slice + ".slice",
                          "cri-containerd-" + cri_id + ".scope"});

  Spinner docker, kube, nsd;
  docker.pid = docker.waited = Spawn({BuildPath("tests/programs/fr_spin"), "600"});
  kube.pid = kube.waited = Spawn({BuildPath("tests/programs/fr_spin"), "600"});
  ASSERT_NO_FATAL_FAILURE(SpawnInPidNamespace(&nsd));
  ASSERT_TRUE(v1.Move(docker.pid)) << v1.path();
  ASSERT_TRUE(v2.Move(kube.pid)) << v2.path();
  // Enough CPU time for samples of each in the window (bounded: the machine
  // is shared).
  for (pid_t p : {docker.pid, kube.pid, nsd.pid}) {
    ASSERT_TRUE(WaitFor([&] { return CpuTicks(p) >= 30; }, std::chrono::milliseconds(60000))) << p;
  }
  auto dump = Json(d.Cli({"dump", "--last", "5s", "--pid", std::to_string(docker.pid), "--pid",
                          std::to_string(kube.pid), "--pid", std::to_string(nsd.pid), "--json"}));
  const std::string id = dump.value("id", "");
  ASSERT_FALSE(id.empty());

  // report --sort container: each container its own row, named as
  // Kubernetes names it; the process outside any container in its own.
  auto by_container = Json(d.Cli({"report", id, "--json", "--sort", "container"}));
  std::map<std::string, uint64_t> rows;
  for (const auto& r : by_container["rows"]) rows[r["key"]] = r["self"];
  EXPECT_GT(rows["docker://" + docker_id], 0u) << by_container.dump();
  EXPECT_GT(rows["containerd://" + cri_id], 0u) << by_container.dump();
  EXPECT_GT(rows["[no container]"], 0u) << by_container.dump();
  auto text = d.Cli({"report", id, "--sort", "container"});
  EXPECT_NE(text.out.find("docker://" + docker_id), std::string::npos) << text.out;
  auto by_unit = Json(d.Cli({"report", id, "--json", "--sort", "unit"}));
  std::map<std::string, uint64_t> units;
  for (const auto& r : by_unit["rows"]) units[r["key"]] = r["self"];
  EXPECT_GT(units["docker-" + docker_id + ".scope"], 0u) << by_unit.dump();
  EXPECT_GT(units["cri-containerd-" + cri_id + ".scope"], 0u) << by_unit.dump();

  // --container by docker ps's short id, --unit, --cgroup (both hierarchies
  // have the test's slice): exactly those processes' samples.
  const uint64_t docker_samples = Samples(d, id, {"--pid", std::to_string(docker.pid)});
  const uint64_t kube_samples = Samples(d, id, {"--pid", std::to_string(kube.pid)});
  ASSERT_GT(docker_samples, 0u);
  ASSERT_GT(kube_samples, 0u);
  EXPECT_EQ(Samples(d, id, {"--container", docker_id.substr(0, 12)}), docker_samples);
  EXPECT_EQ(Samples(d, id, {"--container", "containerd://" + cri_id}), kube_samples);
  EXPECT_EQ(Samples(d, id, {"--unit", "cri-containerd-" + cri_id + ".scope"}), kube_samples);
  EXPECT_EQ(Samples(d, id, {"--cgroup", "/" + slice}), docker_samples + kube_samples);
  auto none = d.Cli({"report", id, "--container", "0000000000ff"});
  EXPECT_EQ(none.exit_code, 1) << none.out;
  EXPECT_NE(none.err.find("no samples match --container 0000000000ff"), std::string::npos)
      << none.err;

  // script --json: each sample names where its process ran.
  auto script = d.Cli({"script", id, "--json", "--container", docker_id.substr(0, 12)});
  ASSERT_EQ(script.exit_code, 0) << script.err;
  std::istringstream lines(script.out);
  size_t n = 0;
  for (std::string line; std::getline(lines, line); ++n) {
    auto j = nlohmann::json::parse(line);
    EXPECT_EQ(j["pid"], docker.pid);
    EXPECT_EQ(j["container_runtime"], "docker");
    EXPECT_EQ(j["container_id"], docker_id);
    EXPECT_EQ(j["unit"], "docker-" + docker_id + ".scope");
    EXPECT_EQ(j["cgroup"], "/" + slice + "/docker-" + docker_id + ".scope");
  }
  EXPECT_EQ(n, docker_samples);
  auto kube_script = d.Cli({"script", id, "--json", "--pid", std::to_string(kube.pid)});
  ASSERT_EQ(kube_script.exit_code, 0) << kube_script.err;
  auto kube_line = nlohmann::json::parse(kube_script.out.substr(0, kube_script.out.find('\n')));
  EXPECT_EQ(kube_line["pod_uid"], pod);
  EXPECT_EQ(kube_line["pod_qos"], "burstable");
  EXPECT_EQ(kube_line["container_runtime"], "containerd");

  // The exports label each process with where it ran: Perfetto's process
  // descriptors and OTLP's sample attributes (pprof's labels are checked by
  // export_test with the real pprof).
  const std::string trace = dir.path() + "/trace.pftrace";
  ASSERT_EQ(d.Cli({"export", id, "-f", "perfetto", "-o", trace}).exit_code, 0);
  const auto labels = PerfettoProcessLabels(trace);
  ASSERT_TRUE(labels.count(docker.pid)) << "no labels on the docker process's track";
  EXPECT_TRUE(labels.at(docker.pid).count("container_id=" + docker_id));
  EXPECT_TRUE(labels.at(docker.pid).count("container_runtime=docker"));
  EXPECT_TRUE(labels.at(docker.pid).count("unit=docker-" + docker_id + ".scope"));
  ASSERT_TRUE(labels.count(kube.pid));
  EXPECT_TRUE(labels.at(kube.pid).count("pod_uid=" + pod));
  EXPECT_TRUE(labels.at(kube.pid).count("pod_qos=burstable"));
  const std::string otlp = dir.path() + "/profile.otlp";
  ASSERT_EQ(d.Cli({"export", id, "-f", "otlp", "-o", otlp}).exit_code, 0);
  size_t docker_seen = 0, kube_seen = 0;
  for (const auto& a : OtlpSampleAttributes(otlp)) {
    const std::string pid = a.count("process.pid") ? a.at("process.pid") : "";
    const std::string cid = a.count("container.id") ? a.at("container.id") : "";
    EXPECT_EQ(cid == docker_id, pid == std::to_string(docker.pid)) << pid << " " << cid;
    if (pid == std::to_string(docker.pid)) {
      ++docker_seen;
      EXPECT_EQ(a.at("container.runtime.name"), "docker");
      EXPECT_EQ(a.at("flightrec.systemd.unit"), "docker-" + docker_id + ".scope");
      EXPECT_EQ(a.at("flightrec.cgroup.path"), "/" + slice + "/docker-" + docker_id + ".scope");
    }
    if (pid == std::to_string(kube.pid)) {
      ++kube_seen;
      EXPECT_EQ(a.at("k8s.pod.uid"), pod);
      EXPECT_EQ(a.at("container.id"), cri_id);
    }
  }
  EXPECT_GT(docker_seen, 0u);
  EXPECT_GT(kube_seen, 0u);

  // The process in its own pid namespace keeps both pids: the global one
  // samples name, and 1, its pid inside; its namespace is not ours.
  struct stat own {};
  ASSERT_EQ(stat("/proc/self/ns/pid", &own), 0);
  bool found = false;
  const nlohmann::json info = Json(d.Cli({"info", id, "--json"}));
  for (const auto& p : info["meta"]["processes"]) {
    if (p["pid"] != nsd.pid) continue;
    found = true;
    EXPECT_EQ(p.value("ns_pid", 0), 1) << p.dump();
    EXPECT_NE(p.value("pid_ns", uint64_t{0}), 0u) << p.dump();
    EXPECT_NE(p.value("pid_ns", uint64_t{0}), own.st_ino) << p.dump();
  }
  EXPECT_TRUE(found) << info["meta"]["processes"].dump();
}

}  // namespace
}  // namespace flightrec::testing
