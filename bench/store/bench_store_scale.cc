// bench_store_scale: what the store's everyday commands cost as the store
// grows (issue 17: "vs records in the store", 100 -> 100 000).
//
//   bench_store_scale --dir DIR --recorder PATH [--counts 100,1000,10000,100000]
//                     [--runs 5]
//
// Fills DIR through the store library (the records the daemon and the hook
// write: 4 in 5 history dumps of a few processes, 1 in 5 a crash with its
// metadata; a 4 KiB section each; retention off while filling so that the
// fill is quick), and at each count times, median of RUNS:
//   list1      `recorder list -1` (the newest record)
//   listpid    `recorder list --pid P` (one process's records)
//   crashlist1 `recorder crash list -1`
//   info       `recorder crash info ID` (a crash from the middle, by full id)
//   infosub    `recorder crash info SUFFIX` (the same, by its random suffix)
//   vacuum     `recorder vacuum` (default limits: nothing to remove)
//   open       the hook's Store::Open (recovery included)
//   commit     the hook's BeginRecord + Commit of a crash (retention on)
//   list       `recorder list` (every record: its output is linear)
// Prints one line per count (milliseconds) to stdout; the first line names
// the columns. Put DIR on tmpfs (/dev/shm): the fill fsyncs every record.
#include <fcntl.h>
#include <spawn.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <string>
#include <vector>

#include "store/store.h"

extern char** environ;

using flightrec::Internal;
using flightrec::StatusOr;
using flightrec::store::RecordRow;
using flightrec::store::Store;
using flightrec::store::StoreOptions;

namespace {

double NowMs() {
  return std::chrono::duration<double, std::milli>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.size() % 2 ? v[v.size() / 2] : (v[v.size() / 2 - 1] + v[v.size() / 2]) / 2;
}

// Runs argv with stdout and stderr on /dev/null; returns wall ms (dies on
// failure: a bench of a failing command measures nothing).
double TimeCommand(const std::vector<std::string>& args) {
  std::vector<char*> argv;
  for (const auto& a : args) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_addopen(&fa, 1, "/dev/null", O_WRONLY, 0);
  posix_spawn_file_actions_addopen(&fa, 2, "/dev/null", O_WRONLY, 0);
  double t0 = NowMs();
  pid_t pid;
  if (posix_spawn(&pid, argv[0], &fa, nullptr, argv.data(), environ) != 0) {
    std::perror(argv[0]);
    std::exit(1);
  }
  int status = 0;
  waitpid(pid, &status, 0);
  double ms = NowMs() - t0;
  posix_spawn_file_actions_destroy(&fa);
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
    std::string cmd;
    for (const auto& a : args) cmd += a + " ";
    std::fprintf(stderr, "failed: %s\n", cmd.c_str());
    std::exit(1);
  }
  return ms;
}

nlohmann::json Meta(uint64_t i, bool crash) {
  uint32_t pid = 1000 + static_cast<uint32_t>(i % 30000);
  std::string exe = "/usr/bin/prog" + std::to_string(i % 50);
  nlohmann::json procs = nlohmann::json::array();
  procs.push_back({{"pid", pid}, {"exe", exe}, {"comm", "prog"}, {"uid", 0}});
  if (!crash) procs.push_back({{"pid", pid + 1}, {"exe", "/usr/bin/helper"}, {"comm", "helper"}});
  nlohmann::json m = {{"reason", crash ? "prog killed by SIGSEGV" : "history"},
                      {"pids", {pid}},
                      {"processes", procs},
                      {"start_ns", 1'700'000'000'000'000'000LL + static_cast<int64_t>(i) * 1000},
                      {"end_ns", 1'700'000'000'000'000'000LL + static_cast<int64_t>(i) * 1000}};
  if (crash) {
    m["crash"] = {{"pid", pid},         {"tid", pid},
                  {"global_tid", pid},  {"signal", 11},
                  {"uid", 0},           {"gid", 0},
                  {"exe", exe},         {"comm", "prog"},
                  {"dumpable", true},   {"core_size", 4096},
                  {"truncated", false}, {"core_stored", true},
                  {"history", ""},      {"notes", nlohmann::json::array()}};
  }
  return m;
}

void AddRecord(Store& st, uint64_t i, bool crash, const std::string& payload, std::string* id_out) {
  // Ids are the second plus 24 random bits: thousands of records in one
  // second (only this fill makes them) may draw the same id, which the
  // commit refuses (RENAME_NOREPLACE); such a record is written again.
  StatusOr<RecordRow> row = Internal("no attempt");
  for (int attempt = 0; attempt < 5 && !row.ok(); ++attempt) {
    auto rec = st.BeginRecord(crash ? "crash" : "dump");
    if (!rec.ok() || !(*rec)->writer().AddSection(crash ? "core" : "events", payload).ok()) {
      std::fprintf(stderr, "writing a record failed\n");
      std::exit(1);
    }
    row = st.Commit(std::move(*rec), Meta(i, crash));
  }
  if (!row.ok()) {
    std::fprintf(stderr, "commit failed: %s\n", row.status().message().c_str());
    std::exit(1);
  }
  if (id_out) *id_out = row->id;
}

}  // namespace

int main(int argc, char** argv) {
  std::string dir, recorder, counts = "100,1000,10000,100000";
  int runs = 5;
  for (int i = 1; i + 1 < argc; i += 2) {
    std::string a = argv[i];
    if (a == "--dir")
      dir = argv[i + 1];
    else if (a == "--recorder")
      recorder = argv[i + 1];
    else if (a == "--counts")
      counts = argv[i + 1];
    else if (a == "--runs")
      runs = std::atoi(argv[i + 1]);
  }
  if (dir.empty() || recorder.empty()) {
    std::fprintf(stderr, "usage: bench_store_scale --dir DIR --recorder PATH [--counts ...]\n");
    return 2;
  }
  std::vector<uint64_t> targets;
  for (size_t p = 0; p < counts.size();) {
    size_t q = counts.find(',', p);
    targets.push_back(std::stoull(counts.substr(p, q - p)));
    p = q == std::string::npos ? counts.size() : q + 1;
  }
  StoreOptions fill_opts;
  fill_opts.apply_retention_on_commit = false;
  fill_opts.writer.workers = 0;
  auto filler = Store::Open(dir, fill_opts);
  if (!filler.ok()) {
    std::fprintf(stderr, "%s\n", filler.status().message().c_str());
    return 1;
  }
  std::string payload(4096, '\0');
  for (size_t k = 0; k < payload.size(); ++k) payload[k] = static_cast<char>("abcdxyz\n"[k % 8]);
  std::printf("# records list1 listpid crashlist1 info infosub vacuum open commit list (ms)\n");
  uint64_t n = 0;
  std::vector<std::string> crash_ids;
  for (uint64_t target : targets) {
    double t0 = NowMs();
    for (; n < target; ++n) {
      std::string id;
      bool crash = n % 5 == 0;
      AddRecord(**filler, n, crash, payload, crash ? &id : nullptr);
      if (crash) crash_ids.push_back(id);
    }
    std::fprintf(stderr, "filled to %llu records in %.1f s\n", static_cast<unsigned long long>(n),
                 (NowMs() - t0) / 1000);
    const std::string mid = crash_ids[crash_ids.size() / 2];
    const std::string suffix = mid.substr(mid.rfind('-') + 1);
    const std::string pid = std::to_string(1000 + (n / 2) % 30000);
    auto cli = [&](std::vector<std::string> rest) {
      std::vector<std::string> a = {recorder, "--store", dir};
      a.insert(a.end(), rest.begin(), rest.end());
      std::vector<double> t;
      for (int r = 0; r < runs; ++r) t.push_back(TimeCommand(a));
      return Median(t);
    };
    double list1 = cli({"list", "-1"});
    double listpid = cli({"list", "--pid", pid});
    double crashlist1 = cli({"crash", "list", "-1"});
    double info = cli({"crash", "info", mid});
    double infosub = cli({"crash", "info", suffix});
    double vacuum = cli({"vacuum"});
    // The hook: open (with recovery) and commit one crash, retention on.
    std::vector<double> open_ms, commit_ms;
    for (int r = 0; r < runs; ++r) {
      double a = NowMs();
      auto st = Store::Open(dir, StoreOptions{});
      double b = NowMs();
      if (!st.ok()) return 1;
      std::string id;
      AddRecord(**st, n, true, payload, &id);
      crash_ids.push_back(id);
      ++n;
      open_ms.push_back(b - a);
      commit_ms.push_back(NowMs() - b);
    }
    double list = cli({"list"});
    std::printf("%llu %.2f %.2f %.2f %.2f %.2f %.2f %.2f %.2f %.2f\n",
                static_cast<unsigned long long>(target), list1, listpid, crashlist1, info, infosub,
                vacuum, Median(open_ms), Median(commit_ms), list);
    std::fflush(stdout);
  }
  return 0;
}
