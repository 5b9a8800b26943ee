// Daemon: recorderd's event loop. One Boost.Asio io_context on one thread
// runs everything: sideband draining (fd readiness + a 200 ms timer), the
// control socket, triggers (uprobes), signals (SIGTERM/SIGINT stop cleanly,
// SIGUSR2 dumps the default window) and dumps themselves. A dump freezes the
// rings for a few milliseconds; doing it on the loop thread keeps the process
// table and the rings consistent without locks.
#pragma once

#include <utility>  // before asio: Boost 1.74 needs std::exchange

#include <boost/asio.hpp>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "common/units.h"
#include "recorder/attribution/attribution.h"
#include "recorder/attribution/process_labels.h"
#include "recorder/backends/backend_factory.h"
#include "recorder/capture/capture_backend.h"
#include "recorder/daemon/death_watch.h"
#include "recorder/daemon/hang_trigger.h"
#include "recorder/daemon/hung_task_events.h"
#include "recorder/daemon/mem_growth.h"
#include "recorder/daemon/oom_watch.h"
#include "recorder/daemon/rate_limiter.h"
#include "recorder/daemon/uprobe_trigger.h"
#include "recorder/ipc/ipc.h"
#include "recorder/perf/aux_trace.h"
#include "recorder/record/dump_record.h"
#include "store/store.h"

namespace flightrec::recorder {

// The capture options (backend, event, rate, history, call graph) are the
// backend factory's; the rest are the daemon's own.
struct DaemonOptions : BackendOptions {
  std::string store_dir;
  std::string socket_path = "/run/flightrec/control.sock";
  std::string socket_group;
  int64_t default_last_ns = 5'000'000'000;
  // Dump budgets, per sliding hour: all dumps together (manual, SIGUSR2,
  // triggers, the coredump hook's history), and each uid's share. A dump is
  // charged to the requesting peer's uid; the hook (a root peer) names the
  // crashed process's uid with `for_uid`; SIGUSR2 is charged to the daemon.
  uint32_t dumps_per_hour = 60;
  uint32_t dumps_per_uid_per_hour = 20;
  // Uprobe triggers held at once: in total and per uid. Each holds one
  // descriptor per CPU.
  uint32_t max_triggers = 16;
  uint32_t max_triggers_per_uid = 4;
  // Descriptors that must stay free after a trigger is added: for
  // connections, dumps, the store and the index.
  uint32_t reserved_fds = 64;
  // Records for anyone but root (the hook's for_uid, non-root peers).
  KernelFrames kernel_frames_for_users = KernelFrames::kSymbolized;
  // Store a `death` record for each process killed by a signal without a
  // crash record (recorder/daemon/death_watch.h).
  bool record_deaths = true;
  // Sample memory growth (page faults with call chains) and RSS so that an
  // OOM kill's record names the stacks that grew the victim
  // (recorder/daemon/mem_growth.h).
  bool mem_growth = true;
  // `--aux-trace pt[,...]` (recorder/perf/aux_trace.h); "" = off.
  std::string aux_trace;
};

class Daemon {
 public:
  static StatusOr<std::unique_ptr<Daemon>> Create(const DaemonOptions& options);
  ~Daemon();
  // Runs until SIGTERM/SIGINT or Stop().
  Status Run();
  void Stop();
  // An object `status` adds under `name` (fleet mode's shipper counters),
  // read on the event loop's thread at each request. Set before Run().
  void AddStatusSection(std::string name, std::function<nlohmann::json()> section) {
    status_sections_.emplace_back(std::move(name), std::move(section));
  }

 private:
  struct Trigger {
    uint64_t id = 0;
    uid_t owner = 0;  // charged for the trigger and its dumps
    std::string spec;
    int64_t last_ns = 0;
    // One of: a uprobe; a hang (--blocked, checked on the timer against
    // the backend's blocked threads; --hung-task, the kernel's reports).
    std::unique_ptr<UprobeTrigger> uprobe;
    std::optional<HangSpec> hang;
    HangTracker hangs;
    std::unique_ptr<HungTaskEvents> hung_task;
    std::unique_ptr<RateLimiter> limiter;
    std::vector<std::unique_ptr<boost::asio::posix::stream_descriptor>> fds;
    uint64_t fired = 0;
    uint64_t dumps = 0;
    std::vector<std::string> records;  // the newest kMaxTriggerRecords
    uint64_t records_total = 0;
  };

  Daemon() = default;
  void ArmSideband(size_t i);
  void ArmTrigger(Trigger* t, size_t i);
  void OnTrigger(Trigger* t);
  void OnHits(Trigger* t, const std::vector<UprobeHit>& hits);
  // --blocked triggers: the backend's blocked threads against each trigger
  // (on the timer: a hang is learnt while it lasts).
  void CheckBlocked();
  void OnHungTasks(Trigger* t, const std::vector<uint32_t>& tids);
  void FireHang(Trigger* t, const Hang& h);
  // Dumps for trigger t (charged to its owner) and keeps the record's id.
  void TriggerDump(Trigger* t, DumpRequest req);
  Status ArmHangTrigger(Trigger* t, const nlohmann::json& params);
  void Drain();
  void Tick();
  void ArmDeaths(size_t i);
  // Takes every death the watch has and records each (or counts why not).
  void OnDeaths();
  void LogOffCpuCapacityOnce();
  bool off_cpu_capacity_logged_ = false;
  int64_t started_ns_ = MonotonicNs();
  // An OOM kill (`oom` non-null) is stored as a record of kind oom.
  void RecordDeath(const Death& d, const OomKill* oom);
  // Sections `oom` and `mem_growth` and the index's "oom" summary.
  void AddOomSections(const Death& d, const OomKill& k, const Snapshot& snap, DumpRequest* req);
  // A crash record exists, or the core hook asked for the history of this
  // process: the death is that crash's, not a record of its own.
  bool CrashRecorded(const Death& d);
  void NoteCrashRequest(uint32_t pid);
  void AwaitSignal();
  // `budget_uid`: whose dump budget pays for it.
  StatusOr<DumpResult> Dump(const DumpRequest& req, uid_t budget_uid);
  Status ChargeDump(uid_t uid, int64_t now_ns);
  nlohmann::json StatusJson() const;
  nlohmann::json TriggersJson() const;
  nlohmann::json DeathsJson() const;
  StatusOr<nlohmann::json> AddTrigger(const ipc::Peer& peer, const nlohmann::json& params);
  StatusOr<UprobeTarget> ResolveForPeer(const ipc::Peer& peer, const std::string& spec);
  StatusOr<nlohmann::json> RemoveTrigger(const ipc::Peer& peer, const nlohmann::json& params);
  void RegisterHandlers();

  DaemonOptions options_;
  boost::asio::io_context io_;
  std::unique_ptr<boost::asio::signal_set> signals_;
  std::unique_ptr<boost::asio::steady_timer> tick_;
  std::unique_ptr<CaptureBackend> backend_;
  std::unique_ptr<store::Store> store_;
  std::unique_ptr<ipc::Server> server_;
  attribution::CookieTable cookies_;
  // Mappings and process lifetimes over the history window (attribution).
  std::unique_ptr<attribution::SidebandHistory> history_;
  attribution::LabelCache labels_;  // cgroup, unit, container per process
  attribution::KernelSymbols ksyms_;
  std::string modules_text_;  // /proc/modules when ksyms_ was read
  void RefreshKernelSymbols();
  // Stores an earlier boot's kernel panic held by flightrec.ko as a record of
  // kind panic, then releases the region (recorder/module/panic_ingest.h);
  // logs the outcome in one line.
  void ClaimPanic();
  std::vector<std::unique_ptr<boost::asio::posix::stream_descriptor>> side_fds_;
  std::vector<std::unique_ptr<Trigger>> triggers_;
  uint64_t next_trigger_id_ = 1;
  RateLimiter dump_limiter_{60, 3600'000'000'000};          // all uids together
  RateLimiter nonroot_dump_limiter_{40, 3600'000'000'000};  // all but root's share
  std::map<uid_t, RateLimiter> uid_dump_limiters_;
  uint64_t dumps_refused_uid_ = 0;
  std::map<std::string, std::string> build_id_cache_;
  uint64_t sideband_events_ = 0;
  uint64_t dumps_ = 0;
  uint64_t dump_failures_ = 0;
  std::string last_dump_error_;
  int64_t start_ns_ = 0;
  std::vector<std::pair<std::string, std::function<nlohmann::json()>>> status_sections_;
  std::unique_ptr<DeathWatch> death_watch_;
  // Hardware trace: the capture when on, else why it is off (status).
  std::unique_ptr<perf::AuxTraceCapture> aux_trace_;
  nlohmann::json aux_trace_off_;
  void StartAuxTrace();
  std::string death_watch_error_;
  std::vector<std::unique_ptr<boost::asio::posix::stream_descriptor>> death_fds_;
  // crash_pid of the hook's history requests, when asked (CLOCK_MONOTONIC).
  std::map<uint32_t, int64_t> crash_requests_;
  // Every death is counted once: seen = recorded + crash_record +
  // rate_limited + failed.
  struct DeathCounts {
    uint64_t seen = 0, recorded = 0, crash_record = 0, rate_limited = 0, failed = 0;
  } death_counts_;
  std::string last_death_error_;
  std::unique_ptr<OomWatch> oom_watch_;
  std::string oom_watch_error_;
  std::unique_ptr<MemGrowth> mem_growth_;
  std::string mem_growth_error_;
  uint64_t oom_recorded_ = 0;
};

int RecorderdMain(int argc, char** argv);

}  // namespace flightrec::recorder
