#include "recorder/daemon/daemon.h"

#include <signal.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include "common/cgroup.h"
#include "common/checked_json.h"
#include "common/read_file.h"
#include "common/terminal_escape.h"
#include "common/units.h"
#include "journal/journal_entry.h"
#include "recorder/backends/backend_factory.h"
#include "recorder/daemon/death_record.h"
#include "recorder/daemon/panic_record.h"
#include "recorder/daemon/resolve_as_peer.h"
#include "recorder/fleet/fleet_config.h"
#include "recorder/fleet/fleet_glue.h"
#include "recorder/fleet/shipper.h"
#include "recorder/perf/perf_backend.h"
#include "recorder/record/mem_growth_section.h"

#include <map>
#include <optional>

namespace flightrec::recorder {

namespace asio = boost::asio;

StatusOr<std::unique_ptr<Daemon>> Daemon::Create(const DaemonOptions& options) {
  std::unique_ptr<Daemon> d(new Daemon());
  d->options_ = options;
  d->start_ns_ = MonotonicNs();
  d->dump_limiter_ = RateLimiter(options.dumps_per_hour, 3600'000'000'000LL);
  uint32_t root_share = std::min(options.dumps_per_uid_per_hour, options.dumps_per_hour / 2);
  d->nonroot_dump_limiter_ = RateLimiter(options.dumps_per_hour - root_share, 3600'000'000'000LL);
  d->history_ = std::make_unique<attribution::SidebandHistory>(&d->cookies_);

  ASSIGN_OR_RETURN(d->backend_, CreateBackend(options));

  store::StoreOptions so;
  // Once per start, the whole directory against the index: what a change
  // the reconcile stamp could not see (store/reconcile.cc) left is found.
  so.full_recovery = true;
  ASSIGN_OR_RETURN(d->store_, store::Store::Open(options.store_dir, so));

  // Processes that already exist have no mmap events coming: read them now.
  for (const Event& e : attribution::ScanProc(static_cast<uint64_t>(MonotonicNs()))) {
    d->history_->base().Apply(e);
    d->labels_.Observe(e);
  }
  d->RefreshKernelSymbols();

  // An earlier boot's kernel panic that flightrec.ko kept across the reboot:
  // stored, and only then released, before this boot's recording is served
  // (whatever the backend: the region is the module's, not the backend's).
  if (access(FLIGHTREC_DEVICE, F_OK) == 0) d->ClaimPanic();

  if (options.record_deaths) {
    auto w = DeathWatch::Create();
    if (w.ok()) {
      d->death_watch_ = std::move(*w);
    } else {
      // Recording goes on; `status` says why deaths are not.
      d->death_watch_error_ = w.status().message();
      spdlog::warn("deaths without a core are not recorded: {}", d->death_watch_error_);
    }
    // OOM kills are deaths: without the watch they stay `death` records.
    auto o = OomWatch::Create();
    if (o.ok()) {
      d->oom_watch_ = std::move(*o);
    } else {
      d->oom_watch_error_ = o.status().message();
      spdlog::warn("OOM kills are recorded as plain deaths: {}", d->oom_watch_error_);
    }
  }
  // A record sampled on page faults already holds every fault's stack; a
  // second page-fault event beside it also put that ring's loss accounting
  // off by up to ~150 samples in ~150 000 (recorder_e2e_test, cause not
  // found), so the growth sampler stays closed then.
  if (options.mem_growth && options.event == "page-faults") {
    d->mem_growth_error_ = "the sampling event is page-faults: its samples are the growth stacks";
    spdlog::info("memory growth: not sampled separately ({})", d->mem_growth_error_);
  } else if (options.mem_growth) {
    auto g = MemGrowth::Create();
    if (g.ok()) {
      d->mem_growth_ = std::move(*g);
    } else {
      d->mem_growth_error_ = g.status().message();
      spdlog::warn("memory growth is not sampled: {}", d->mem_growth_error_);
    }
  }

  d->StartAuxTrace();

  ipc::ServerOptions io_opts;
  io_opts.path = options.socket_path;
  io_opts.group = options.socket_group;
  ASSIGN_OR_RETURN(d->server_, ipc::Server::Create(d->io_, io_opts));
  d->RegisterHandlers();
  return d;
}

Daemon::~Daemon() = default;

void Daemon::StartAuxTrace() {
  const std::string& spec_text = options_.aux_trace;
  auto spec = perf::ParseAuxTraceSpec(spec_text.empty() ? "pt" : spec_text);  // checked at parse
  const perf::TracePmu pmu = perf::ProbeTracePmu(spec.ok() ? spec->kind : "pt");
  if (spec_text.empty()) {
    aux_trace_off_ = perf::AuxTraceOffJson(
        pmu, false,
        pmu.present ? fmt::format("off: recorderd --aux-trace {} turns it on", spec->kind)
                    : "off, and " + pmu.why);
    return;
  }
  auto c = spec.ok() ? perf::AuxTraceCapture::Open(*spec)
                     : StatusOr<std::unique_ptr<perf::AuxTraceCapture>>(spec.status());
  if (!c.ok()) {
    // Recording goes on without the trace; status says why.
    spdlog::warn("--aux-trace {}: hardware trace is off: {}", spec_text, c.status().message());
    aux_trace_off_ = perf::AuxTraceOffJson(pmu, true, c.status().message());
    return;
  }
  aux_trace_ = std::move(*c);
  spdlog::info("hardware trace on: {}", json::Dump(aux_trace_->Describe()));
}

namespace {

// The coredump hook's `crash_pid`: a process id, or the request is refused.
Status ParseCrashPid(const nlohmann::json& params, DumpRequest* req) {
  if (!params.contains("crash_pid")) return OkStatus();
  const auto& c = params["crash_pid"];
  if (!c.is_number_integer() || c.get<int64_t>() <= 0 || c.get<int64_t>() > INT32_MAX) {
    return InvalidArgument("crash_pid must be a process id (1..2^31-1)");
  }
  req->crash_pid = c.get<uint32_t>();
  return OkStatus();
}

// `for_uid`: the uid whose dump budget pays for a dump. Only a root peer
// (the coredump hook, naming the crashed process's owner) may name another
// uid; anyone else is charged for their own dumps whatever they say.
StatusOr<uid_t> BudgetUid(const ipc::Peer& peer, const nlohmann::json& params) {
  if (!params.contains("for_uid")) return peer.uid;
  const auto& u = params["for_uid"];
  if (!u.is_number_integer() || u.get<int64_t>() < 0 || u.get<int64_t>() >= int64_t{UINT32_MAX}) {
    return InvalidArgument("for_uid must be a uid (0..2^32-2)");
  }
  return peer.uid == 0 ? static_cast<uid_t>(u.get<int64_t>()) : peer.uid;
}

// Open descriptors of this process (for the reserve kept free of triggers).
size_t OpenFdCount() {
  size_t n = 0;
  std::error_code ec;
  for (auto it = std::filesystem::directory_iterator("/proc/self/fd", ec);
       !ec && it != std::filesystem::directory_iterator(); it.increment(ec))
    ++n;
  return n;
}

// `status`'s "fleet" object: the shipper's counters (docs/ARCHITECTURE.md,
// "Fleet mode"). Times are Unix seconds (0: never).
nlohmann::json FleetStatusJson(const fleet::ShipperStats& s, const std::string& host,
                               const std::string& bucket, const std::string& endpoint, bool indexed,
                               const std::string& store_dir) {
  // Written by whichever process's retention removed them (store/store.cc).
  auto evicted = store::ReadUnshippedEvictions(store_dir);
  if (!evicted.ok()) spdlog::warn("fleet: {}", evicted.status().message());
  const store::UnshippedEvictions ev = evicted.ok() ? *evicted : store::UnshippedEvictions{};
  return {{"host_id", host},
          {"bucket", bucket},
          {"endpoint", endpoint},
          {"index", indexed ? "postgresql" : "none"},
          {"pending_records", s.pending},
          {"pending_bytes", s.pending_bytes},
          {"shipped_records", s.uploaded + s.already_present},
          {"shipped_bytes", s.shipped_bytes},
          {"uploaded", s.uploaded},
          {"already_present", s.already_present},
          {"confirmed_total", s.confirmed},
          {"retries", s.failures},
          {"consecutive_failures", s.consecutive_failures},
          {"backoff_ms", s.backoff_ms},
          {"uploading", s.uploading},
          {"last_error", s.last_error},
          {"last_error_time", s.last_error_unix_ns / 1'000'000'000},
          {"last_success_time", s.last_success_unix_ns / 1'000'000'000},
          {"unshipped_evicted_records", ev.records},
          {"unshipped_evicted_bytes", ev.bytes}};
}

constexpr size_t kMaxTriggerRecords = 16;    // per trigger, in status
constexpr size_t kMaxTriggersInStatus = 64;  // the rest are counted
constexpr size_t kMaxTriggerSpec = 8192;     // PATH_MAX + a symbol name
constexpr size_t kMaxUidLimiters = 4096;     // idle ones are forgotten beyond this
// Opening and parsing a trigger's file as a peer (in a child process) takes
// milliseconds for a local file; past this the io thread moves on.
constexpr std::chrono::milliseconds kResolveAsPeerTimeout{2000};

// How long a crash_pid dump waits for the crash marker: the kernel takes it
// before it starts the hook that asks, so a marker still missing after this
// was dropped (every slot in use) or never taken.
constexpr int64_t kCrashMarkerWaitNs = 250'000'000;

// How far back a crash (its hook's request, or its record) may be and still
// be the one of a death: the hook runs before the process exits (the kernel
// waits for it, core_pipe_limit), so seconds are plenty.
constexpr int64_t kCrashMatchNs = 60'000'000'000;
constexpr size_t kMaxCrashRequests = 1024;

}  // namespace

void Daemon::RegisterHandlers() {
  server_->Handle("status",
                  [this](const ipc::Peer&, const nlohmann::json&) -> StatusOr<nlohmann::json> {
                    return StatusJson();
                  });
  server_->Handle(
      "dump", [this](const ipc::Peer& peer, const nlohmann::json& p) -> StatusOr<nlohmann::json> {
        DumpRequest req;
        req.last_ns = p.value("last_ns", options_.default_last_ns);
        if (req.last_ns <= 0) return InvalidArgument("last_ns must be positive");
        req.reason = p.value("reason", std::string("manual"));
        if (p.contains("pids")) req.pids = p["pids"].get<std::vector<uint32_t>>();
        req.live_attribution = p.value("live_attribution", false);
        RETURN_IF_ERROR(ParseCrashPid(p, &req));
        ASSIGN_OR_RETURN(uid_t budget, BudgetUid(peer, p));
        // The hook's request arrives while the process is still in its core
        // dump: its exit must not also become a `death` record.
        if (req.crash_pid && peer.uid == 0) NoteCrashRequest(req.crash_pid);
        // The record is owned by (and, for anyone but root, redacted of kernel
        // addresses for) the uid that pays for it.
        req.owner_uid = budget;
        if (budget != 0) req.kernel_frames = options_.kernel_frames_for_users;
        ASSIGN_OR_RETURN(DumpResult r, Dump(req, budget));
        nlohmann::json j = r.ToJson();
        j["summary"] = r.Summary();
        return j;
      });
  server_->Handle("trigger_add", [this](const ipc::Peer& peer, const nlohmann::json& p) {
    return AddTrigger(peer, p);
  });
  server_->Handle("trigger_list",
                  [this](const ipc::Peer&, const nlohmann::json&) -> StatusOr<nlohmann::json> {
                    return TriggersJson();
                  });
  server_->Handle("trigger_remove", [this](const ipc::Peer& peer, const nlohmann::json& p) {
    return RemoveTrigger(peer, p);
  });
}

void Daemon::ArmSideband(size_t i) {
  side_fds_[i]->async_wait(asio::posix::stream_descriptor::wait_read,
                           [this, i](const boost::system::error_code& ec) {
                             if (ec) return;
                             Drain();
                             ArmSideband(i);
                           });
}

void Daemon::Drain() {
  flightrec::Status st = backend_->DrainSideband([this](const Event& e) {
    ++sideband_events_;
    labels_.Observe(e);
    if (auto* m = std::get_if<MmapEvent>(&e);
        m != nullptr && m->build_id.empty() && !m->filename.empty() && m->filename[0] == '/') {
      // The kernel gave no build-id: read it now, while the file on disk is
      // the one that was mapped (capture time, as seed 000 does).
      MmapEvent copy = *m;
      auto key = fmt::format("{}:{}:{}", copy.filename, copy.ino, copy.maj);
      auto it = build_id_cache_.find(key);
      if (it == build_id_cache_.end()) {
        it = build_id_cache_.emplace(key, attribution::ReadBuildId(copy.filename)).first;
      }
      copy.build_id = it->second;
      history_->Add(copy);
      return;
    }
    history_->Add(e);
  });
  if (!st.ok()) spdlog::warn("sideband: {}", st.message());
}

void Daemon::Tick() {
  tick_->expires_after(std::chrono::milliseconds(200));
  tick_->async_wait([this](const boost::system::error_code& ec) {
    if (ec) return;
    Drain();
    OnDeaths();
    LogOffCpuCapacityOnce();
    if (mem_growth_) mem_growth_->SampleRss(static_cast<uint64_t>(MonotonicNs()));
    // A hit that landed between the last drain and re-arming the wait has
    // no edge left to report it: pick it up here, 200 ms late at most.
    for (auto& t : triggers_) {
      if ((t->uprobe && t->uprobe->Pending()) || (t->hung_task && t->hung_task->Pending())) {
        OnTrigger(t.get());
      }
    }
    CheckBlocked();
    // Mapping changes (and exited processes) stay replayable for twice the
    // history window: a dump may ask for more than --history when the rings
    // were sized larger (--ring-pages).
    int64_t cutoff = MonotonicNs() - 2 * options_.history_ns;
    if (cutoff > 0) {
      history_->Trim(static_cast<uint64_t>(cutoff));
      labels_.Trim(static_cast<uint64_t>(cutoff));
    }
    Tick();
  });
}

void Daemon::AwaitSignal() {
  signals_->async_wait([this](const boost::system::error_code& ec, int sig) {
    if (ec) return;
    if (sig == SIGUSR2) {
      DumpRequest req;
      req.last_ns = options_.default_last_ns;
      req.reason = "SIGUSR2";
      auto r = Dump(req, geteuid());
      if (r.ok())
        spdlog::info("dump {}", r->Summary());
      else
        spdlog::error("dump on SIGUSR2 failed: {}", r.status().message());
      AwaitSignal();
      return;
    }
    spdlog::info("signal {}: stopping", sig);
    Stop();
  });
}

void Daemon::RefreshKernelSymbols() {
  // Modules loaded since the last read have symbols of their own: reload
  // when /proc/modules changed (or on the first call).
  // Empty when unreadable (no module support): compared like any other text.
  std::string text = ReadFileToString("/proc/modules", 16 << 20).value_or("");
  if (!ksyms_.empty() && text == modules_text_) return;
  auto ks = attribution::KernelSymbols::Load();
  if (!ks.ok()) {
    spdlog::warn("kernel symbols unavailable: {}", ks.status().message());
    return;
  }
  ksyms_ = std::move(*ks);
  modules_text_ = std::move(text);
}

// Both budgets must have room; a refusal by one spends nothing of the other.
Status Daemon::ChargeDump(uid_t uid, int64_t now) {
  if (uid_dump_limiters_.size() >= kMaxUidLimiters) {
    for (auto it = uid_dump_limiters_.begin(); it != uid_dump_limiters_.end();) {
      it = it->second.Idle(now) ? uid_dump_limiters_.erase(it) : std::next(it);
    }
  }
  auto& mine =
      uid_dump_limiters_.try_emplace(uid, options_.dumps_per_uid_per_hour, 3600'000'000'000LL)
          .first->second;
  if (!mine.Check(now)) {
    mine.Suppress();
    ++dumps_refused_uid_;
    return Status(StatusCode::kResourceExhausted,
                  fmt::format("dump refused: uid {} has had {} dumps in the last hour "
                              "(--max-dumps-per-uid-per-hour)",
                              uid, mine.max_events()));
  }
  // Non-root uids together stop short of the ceiling by root's share, so
  // that several users (or one with several accounts) cannot starve root's
  // crashes of history.
  if (uid != 0 && !nonroot_dump_limiter_.Check(now)) {
    nonroot_dump_limiter_.Suppress();
    return Status(StatusCode::kResourceExhausted,
                  fmt::format("dump refused: {} dumps in the last hour by all users but root "
                              "together (--max-dumps-per-hour {} less root's reserved {})",
                              nonroot_dump_limiter_.max_events(), dump_limiter_.max_events(),
                              dump_limiter_.max_events() - nonroot_dump_limiter_.max_events()));
  }
  if (!dump_limiter_.Check(now)) {
    dump_limiter_.Suppress();
    return Status(StatusCode::kResourceExhausted,
                  fmt::format("dump refused: {} dumps in the last hour for all users together "
                              "(--max-dumps-per-hour)",
                              dump_limiter_.max_events()));
  }
  mine.Record(now);
  if (uid != 0) nonroot_dump_limiter_.Record(now);
  dump_limiter_.Record(now);
  return OkStatus();
}

StatusOr<DumpResult> Daemon::Dump(const DumpRequest& req, uid_t budget_uid) {
  int64_t t0 = MonotonicNs();
  RETURN_IF_ERROR(ChargeDump(budget_uid, t0));
  // First: disabling the trace is the cut, and everything the CPUs run until
  // then (this dump's own work included) pushes older trace out.
  std::optional<AuxTrace> aux;
  if (aux_trace_) aux = aux_trace_->Snapshot();
  Drain();  // the newest mappings must be in the table before we snapshot it
  std::string fallback;
  auto snap = req.crash_pid ? TakeCrashHistory(*backend_, req.crash_pid, req.last_ns,
                                               kCrashMarkerWaitNs, &fallback)
                            : backend_->TakeSnapshot(req.last_ns);
  if (!fallback.empty()) {
    spdlog::warn("history of pid {}: {}; using the live rings", req.crash_pid, fallback);
  }
  if (!snap.ok()) {
    ++dump_failures_;
    return snap.status();
  }
  Drain();  // sideband written up to the freeze instant
  // A request's mistake, not a failed dump: not counted in dump_failures.
  if (!req.crash_pid) RETURN_IF_ERROR(CheckRequestedPids(req, *snap, *history_));
  RefreshKernelSymbols();
  DumpRequest labelled = req;
  labelled.labels = [this](uint32_t pid, bool exited) { return labels_.Labels(pid, exited); };
  if (aux) {
    perf::AssignTracedTasks(snap->samples, req.crash_pid, &*aux);
    labelled.extra_sections.emplace_back(kSectionAuxTrace, EncodeAuxTrace(*aux));
  }
  auto r =
      WriteDump(*store_, labelled, std::move(*snap), *history_, ksyms_, backend_->Describe(), t0);
  if (!r.ok()) {
    ++dump_failures_;
    last_dump_error_ = r.status().message();
    return r.status();
  }
  ++dumps_;
  return r;
}

void Daemon::NoteCrashRequest(uint32_t pid) {
  const int64_t now = MonotonicNs();
  if (crash_requests_.size() >= kMaxCrashRequests) {
    std::erase_if(crash_requests_, [now](const auto& e) { return e.second + kCrashMatchNs < now; });
  }
  if (crash_requests_.size() < kMaxCrashRequests) crash_requests_[pid] = now;
}

// The off-CPU rings hold a number of switch-outs, not seconds: once the
// machine's rate is known (2 s after start), say how long that is.
void Daemon::LogOffCpuCapacityOnce() {
  if (off_cpu_capacity_logged_ || !options_.off_cpu || MonotonicNs() < started_ns_ + 2'000'000'000)
    return;
  off_cpu_capacity_logged_ = true;
  const nlohmann::json oc = json::Object(backend_->Describe(), "off_cpu");
  const nlohmann::json& cap = json::Field(oc, "capacity");
  if (!cap.is_object()) return;
  const double held = json::Get<double>(cap, "ring_holds_s", 0);
  spdlog::log(held * 1e9 < static_cast<double>(options_.history_ns) ? spdlog::level::warn
                                                                    : spdlog::level::info,
              "off-CPU history: at the {:.0f} blocking switches/s per CPU of the last {:.1f} s "
              "({:.0f} bytes each), the switch-out rings ({} per CPU) hold ~{:.1f} s "
              "(--off-cpu-ring-pages, --off-cpu-stack-bytes)",
              json::Get<double>(cap, "switch_outs_per_s_per_cpu", 0),
              json::Get<double>(cap, "measured_over_s", 0),
              json::Get<double>(cap, "bytes_per_switch_out", 0),
              FormatBytes(json::Get<uint64_t>(oc, "ring_bytes_per_cpu", 0)), held);
}

void Daemon::ArmDeaths(size_t i) {
  death_fds_[i]->async_wait(asio::posix::stream_descriptor::wait_read,
                            [this, i](const boost::system::error_code& ec) {
                              if (ec) return;
                              OnDeaths();
                              ArmDeaths(i);
                            });
}

void Daemon::OnDeaths() {
  if (!death_watch_) return;
  // The kill is seen before the exit it causes.
  if (oom_watch_) oom_watch_->Poll();
  for (const Death& d : death_watch_->Poll()) {
    std::optional<OomKill> k;
    if (oom_watch_) {
      // The kernel may have picked another thread of the process.
      k = oom_watch_->Take(d.pid);
      for (size_t i = 0; !k && i < d.other_tids.size(); ++i) k = oom_watch_->Take(d.other_tids[i]);
    }
    RecordDeath(d, k ? &*k : nullptr);
  }
}

// Only a death by a signal that dumps core can have gone to the core hook.
// The hook asks for the history before it reads the core, and the kernel
// keeps the process until the hook is done (core_pipe_limit), so its request
// or its record (a rate-limited crash asks for no history) exists by now.
bool Daemon::CrashRecorded(const Death& d) {
  if (!IsCoreSignal(d.signal)) return false;
  auto it = crash_requests_.find(static_cast<uint32_t>(d.pid));
  if (it != crash_requests_.end() &&
      it->second + kCrashMatchNs >= static_cast<int64_t>(d.time_ns)) {
    crash_requests_.erase(it);
    return true;
  }
  store::ListQuery q;
  q.kind = RecordKindName(RecordKind::kCrash);
  q.pid = static_cast<uint32_t>(d.pid);
  q.since_ns = WallClockNs() - kCrashMatchNs;
  auto rows = store_->List(q);
  return rows.ok() && !rows->empty();
}

void Daemon::RecordDeath(const Death& d, const OomKill* oom) {
  ++death_counts_.seen;
  if (CrashRecorded(d)) {
    ++death_counts_.crash_record;
    return;
  }
  const int64_t t0 = MonotonicNs();
  // Charged like the hook's history of a crash: to the dead process's uid.
  const int64_t uid = d.info ? d.info->uid : -1;
  const uid_t budget = uid >= 0 ? static_cast<uid_t>(uid) : static_cast<uid_t>(65534);
  if (Status st = ChargeDump(budget, t0); !st.ok()) {
    if (death_counts_.rate_limited++ == 0) spdlog::warn("death of pid {}: {}", d.pid, st.message());
    return;
  }
  Drain();
  auto snap = backend_->TakeSnapshot(options_.default_last_ns);
  Drain();
  // The executable's build-id as its mapping reported it (the file on disk
  // may have been replaced since).
  std::string build_id;
  if (d.info && !d.info->exe.empty()) {
    for (const Event& e : history_->EventsFor({static_cast<uint32_t>(d.pid)}, 0, UINT64_MAX)) {
      const auto* m = std::get_if<MmapEvent>(&e);
      if (m != nullptr && m->filename == d.info->exe && !m->build_id.empty())
        build_id = ToHex(m->build_id);
    }
  }
  StatusOr<DumpResult> r = snap.status();
  if (snap.ok()) {
    DumpRequest req;
    req.kind = oom ? RecordKind::kOom : RecordKind::kDeath;
    req.last_ns = options_.default_last_ns;
    req.pids = {static_cast<uint32_t>(d.pid)};
    req.reason = ToValidUtf8(DeathReason(d) + (oom ? " (OOM kill)" : ""));
    if (oom) AddOomSections(d, *oom, *snap, &req);
    req.owner_uid = budget;
    if (budget != 0) req.kernel_frames = options_.kernel_frames_for_users;
    req.extra_sections.emplace_back("metadata", json::Dump(DeathMetadata(d, build_id)));
    req.extra_meta["crash"] = DeathCrashMeta(d, MonotonicToWallOffset());
    // Where it ran, as for any dump. For the dead process the watch's read
    // at its exec (from the connector, before the exit) is preferred: the
    // sideband's exec may be drained only after /proc is gone, leaving the
    // labels copied from its parent at fork.
    req.labels = [this, &d](uint32_t pid, bool exited) {
      auto l = labels_.Labels(pid, exited);
      if (static_cast<int32_t>(pid) == d.pid && d.info && !d.info->cgroup.empty()) {
        if (!l) l.emplace();
        l->cgroup = cgroup::ParseProcCgroup(d.info->cgroup);
      }
      return l;
    };
    RefreshKernelSymbols();
    r = WriteDump(*store_, req, std::move(*snap), *history_, ksyms_, backend_->Describe(), t0);
  }
  if (!r.ok()) {
    ++death_counts_.failed;
    last_death_error_ = r.status().message();
    spdlog::error("death of pid {}: not recorded: {}", d.pid, last_death_error_);
    return;
  }
  ++death_counts_.recorded;
  if (oom) ++oom_recorded_;
  spdlog::info("{} {}: {}", oom ? "oom" : "death", r->row.id, EscapeForTerminal(DeathReason(d)));
  journal::JournalEntry e;
  e.kind = journal::RecordKind::kDeath;
  e.record_id = r->row.id;
  e.signal = d.signal;
  e.pid = d.pid;
  if (d.info) {
    e.exe = d.info->exe;
    e.comm = d.info->comm;
    e.uid = d.info->uid;
    e.unit = cgroup::ParseProcCgroup(d.info->cgroup).unit;
  }
  // The record is committed: without journald only the entry is missing.
  if (Status s = journal::LogRecordToJournal(e); !s.ok()) {
    spdlog::debug("{}: {}", e.record_id, s.message());
  }
}

void Daemon::AddOomSections(const Death& d, const OomKill& k, const Snapshot& snap,
                            DumpRequest* req) {
  nlohmann::json oom = OomJson(k);
  const uint32_t pid = static_cast<uint32_t>(d.pid);
  nlohmann::json growth = {{"sampled", mem_growth_ != nullptr}};
  nlohmann::json rss = nlohmann::json::array();
  if (mem_growth_) {
    std::vector<Sample> samples = mem_growth_->Take(pid, snap.window_start_ns, snap.freeze_time_ns);
    growth.update({{"event", "page-faults"},
                   {"faults_per_sample", kFaultsPerSample},
                   {"samples", samples.size()}});
    req->extra_sections.emplace_back(kSectionMemGrowth, EncodeMemGrowth(samples));
    // Up to the kill: later reads are of a process being torn down.
    const uint64_t end = std::min<uint64_t>(snap.freeze_time_ns, k.victim.time_ns);
    for (const RssPoint& p : mem_growth_->Rss(pid, snap.window_start_ns, end)) {
      rss.push_back({{"time_mono_ns", p.time_ns}, {"rss_bytes", p.rss_bytes}});
    }
  } else {
    growth["unavailable"] =
        mem_growth_error_.empty() ? "recorderd --mem-growth off" : mem_growth_error_;
  }
  // The kernel's own figure at the kill ends the curve.
  const OomVictim& v = k.victim;
  rss.push_back({{"time_mono_ns", v.time_ns},
                 {"rss_bytes", (v.anon_rss_kb + v.file_rss_kb + v.shmem_rss_kb) * 1024},
                 {"source", "oom:mark_victim"}});
  oom["growth"] = std::move(growth);
  oom["rss"] = std::move(rss);
  req->extra_sections.emplace_back(kSectionOom, json::Dump(oom));
  req->extra_meta["oom"] = {{"constraint", oom["constraint"]},
                            {"anon_rss_kb", v.anon_rss_kb},
                            {"trigger_pid", v.trigger_pid},
                            {"memcg_limit_bytes", json::Field(oom["memcg"], "limit_bytes")}};
}

// At most kMaxTriggersInStatus triggers (each with its newest
// kMaxTriggerRecords records), so that the answer stays far below the
// frame limit whatever --max-triggers says.
nlohmann::json Daemon::TriggersJson() const {
  nlohmann::json triggers = nlohmann::json::array();
  for (const auto& t : triggers_) {
    if (triggers.size() >= kMaxTriggersInStatus) break;
    nlohmann::json j = {{"id", t->id},
                        {"owner_uid", t->owner},
                        {"kind", t->uprobe                                   ? "uprobe"
                                 : t->hang->kind == HangSpec::Kind::kBlocked ? "blocked"
                                                                             : "hung_task"},
                        {"what", t->spec},
                        {"last_ns", t->last_ns},
                        {"max_per_hour", t->limiter->max_events()},
                        {"fired", t->fired},
                        {"dumps", t->dumps},
                        {"suppressed", t->limiter->suppressed()},
                        {"records", t->records},
                        {"records_total", t->records_total}};
    if (t->uprobe) j["uprobe"] = t->spec;
    if (t->hang) j.update(t->hang->ToJson());
    triggers.push_back(std::move(j));
  }
  return triggers;
}

// Every death seen is in exactly one of the other counts.
nlohmann::json Daemon::DeathsJson() const {
  nlohmann::json j = {{"enabled", death_watch_ != nullptr},
                      {"seen", death_counts_.seen},
                      {"recorded", death_counts_.recorded},
                      {"crash_record", death_counts_.crash_record},
                      {"rate_limited", death_counts_.rate_limited},
                      {"failed", death_counts_.failed},
                      {"last_error", last_death_error_}};
  if (death_watch_) j["watch"] = death_watch_->Status();
  j["oom_recorded"] = oom_recorded_;
  if (oom_watch_) j["oom_watch"] = oom_watch_->Status();
  if (!oom_watch_error_.empty()) j["oom_watch_unavailable"] = oom_watch_error_;
  if (mem_growth_) j["mem_growth"] = mem_growth_->Status();
  if (!mem_growth_error_.empty()) j["mem_growth_unavailable"] = mem_growth_error_;
  if (!death_watch_error_.empty()) j["unavailable"] = death_watch_error_;
  return j;
}

nlohmann::json Daemon::StatusJson() const {
  nlohmann::json triggers = TriggersJson();
  auto stats = backend_->Stats();
  uint64_t store_bytes = 0;
  auto tb = store_->TotalBytes();
  if (tb.ok()) store_bytes = *tb;
  nlohmann::json j = {
      {"pid", getpid()},
      {"uptime_s", (MonotonicNs() - start_ns_) / 1e9},
      {"backend", backend_->Describe()},
      {"history_requested_s", options_.history_ns / 1e9},
      {"history_held_s", stats.value("history_held_s", 0.0)},
      {"history_capacity_s", nullptr},
      {"rings", stats},
      {"sideband_events", sideband_events_},
      {"processes_tracked", history_->base().size()},
      {"sideband_held", history_->held()},
      {"sideband_trimmed_early", history_->trimmed_early()},
      {"dumps", dumps_},
      {"dump_failures", dump_failures_},
      {"last_dump_error", last_dump_error_},
      {"dumps_rate_limited",
       dump_limiter_.suppressed() + nonroot_dump_limiter_.suppressed() + dumps_refused_uid_},
      {"dumps_refused_uid_budget", dumps_refused_uid_},
      {"triggers", triggers},
      {"triggers_total", triggers_.size()},
      {"deaths", DeathsJson()},
      {"aux_trace", aux_trace_ ? aux_trace_->Describe() : aux_trace_off_},
      {"limits",
       {{"max_dumps_per_hour", options_.dumps_per_hour},
        {"max_dumps_per_uid_per_hour", options_.dumps_per_uid_per_hour},
        {"max_dumps_per_hour_non_root", nonroot_dump_limiter_.max_events()},
        {"max_triggers", options_.max_triggers},
        {"max_triggers_per_uid", options_.max_triggers_per_uid},
        {"reserved_fds", options_.reserved_fds},
        {"max_message_bytes", ipc::kMaxMessage},
        {"max_json_depth", ipc::kMaxJsonDepth}}},
      {"store", {{"dir", store_->dir()}, {"bytes", store_bytes}}},
      {"socket",
       {{"path", options_.socket_path},
        {"requests", server_->requests()},
        {"rejected", server_->rejected()},
        {"connections", server_->connections()},
        {"shed", server_->shed()},
        {"accept_backoffs", server_->accept_backoffs()}}}};
  // What the rings hold at the configured rate (null: not known in advance).
  if (auto plan = backend_->PlannedHistory()) {
    j["history_capacity_s"] = plan->held_s;
    j["history_capacity"] = plan->text;
  }
  for (const auto& [name, section] : status_sections_) j[name] = section();
  return j;
}

StatusOr<nlohmann::json> Daemon::AddTrigger(const ipc::Peer& peer, const nlohmann::json& p) {
  // Each trigger holds a descriptor per CPU: without limits one user's
  // triggers exhaust the daemon's descriptors (and nobody's crash is dumped).
  size_t mine = 0;
  for (const auto& t : triggers_) mine += t->owner == peer.uid;
  if (mine >= options_.max_triggers_per_uid) {
    return Status(StatusCode::kResourceExhausted,
                  fmt::format("trigger refused: uid {} already has {} triggers, the limit per uid "
                              "(--max-triggers-per-uid); remove one first",
                              peer.uid, mine));
  }
  if (triggers_.size() >= options_.max_triggers) {
    return Status(StatusCode::kResourceExhausted,
                  fmt::format("trigger refused: {} triggers in total, the limit (--max-triggers)",
                              triggers_.size()));
  }
  auto t = std::make_unique<Trigger>();
  t->owner = peer.uid;
  const bool is_hang = p.contains("blocked_ns") || p.contains("hung_task");
  if (is_hang == p.contains("uprobe")) {
    return InvalidArgument("a trigger takes exactly one of uprobe, blocked_ns, hung_task");
  }
  t->last_ns =
      p.contains("last_ns") ? json::As<int64_t>(p["last_ns"], -1) : options_.default_last_ns;
  if (t->last_ns <= 0) return InvalidArgument("last_ns must be a positive number of nanoseconds");
  const int64_t per_hour_asked =
      p.contains("max_per_hour") ? json::As<int64_t>(p["max_per_hour"], -1) : 6;
  if (per_hour_asked < 0 || per_hour_asked > 3600) {
    return InvalidArgument("max_per_hour must be an integer from 0 to 3600");
  }
  const auto per_hour = static_cast<uint32_t>(per_hour_asked);
  if (is_hang) {
    RETURN_IF_ERROR(ArmHangTrigger(t.get(), p));
  } else {
    if (!p["uprobe"].is_string()) return InvalidArgument("uprobe must be a string");
    t->spec = p["uprobe"].get<std::string>();
    if (t->spec.size() > kMaxTriggerSpec) {
      return InvalidArgument(
          fmt::format("uprobe spec of {} bytes (at most {})", t->spec.size(), kMaxTriggerSpec));
    }
    ASSIGN_OR_RETURN(UprobeTarget target, ResolveForPeer(peer, t->spec));
    ASSIGN_OR_RETURN(t->uprobe, UprobeTrigger::Create(std::move(target), t->spec));
  }
  rlimit nofile{};
  if (getrlimit(RLIMIT_NOFILE, &nofile) == 0 && nofile.rlim_cur != RLIM_INFINITY) {
    size_t open_fds = OpenFdCount();
    if (open_fds + options_.reserved_fds > nofile.rlim_cur) {
      return Status(StatusCode::kResourceExhausted,
                    fmt::format("trigger refused: it would leave {} of {} file descriptors free, "
                                "fewer than the {} kept for connections and dumps "
                                "(--reserved-fds; raise LimitNOFILE)",
                                nofile.rlim_cur - std::min<size_t>(open_fds, nofile.rlim_cur),
                                nofile.rlim_cur, options_.reserved_fds));
    }
  }
  t->limiter = std::make_unique<RateLimiter>(per_hour, 3600'000'000'000LL);
  t->id = next_trigger_id_++;
  Trigger* raw = t.get();
  const std::vector<int> fds = raw->uprobe      ? raw->uprobe->fds()
                               : raw->hung_task ? raw->hung_task->fds()
                                                : std::vector<int>{};
  for (int fd : fds) t->fds.push_back(std::make_unique<asio::posix::stream_descriptor>(io_, fd));
  triggers_.push_back(std::move(t));
  for (size_t i = 0; i < raw->fds.size(); ++i) ArmTrigger(raw, i);
  nlohmann::json j = {{"id", raw->id}, {"what", raw->spec}, {"max_per_hour", per_hour}};
  if (raw->uprobe) {
    j["uprobe"] = raw->spec;
    j["file_offset"] = raw->uprobe->target().file_offset;
  }
  if (raw->hang) j.update(raw->hang->ToJson());
  return j;
}

// A --blocked trigger reads the threads the backend sees blocked (off-CPU
// capture); a --hung-task trigger opens the kernel's hung-task tracepoint.
Status Daemon::ArmHangTrigger(Trigger* t, const nlohmann::json& p) {
  ASSIGN_OR_RETURN(HangSpec spec, ParseHangSpec(p));
  if (spec.kind == HangSpec::Kind::kBlocked && backend_->blocked_threads() == nullptr) {
    return Unsupported(
        "a --blocked trigger needs recorderd --off-cpu (the perf backend's sched_switch "
        "capture tells which threads are blocked, and since when)");
  }
  if (spec.kind == HangSpec::Kind::kHungTask) {
    ASSIGN_OR_RETURN(t->hung_task, HungTaskEvents::Create());
  }
  t->spec = spec.Describe();
  t->hang = std::move(spec);
  return OkStatus();
}

// A trigger's file is opened and parsed with the asking peer's credentials
// (recorderd's own only for root and recorderd's uid): what a user may not
// read, recorderd does not read for them.
StatusOr<UprobeTarget> Daemon::ResolveForPeer(const ipc::Peer& peer, const std::string& spec) {
  if (peer.uid == 0 || peer.uid == geteuid()) return ResolveUprobeTarget(spec);
  return ResolveUprobeTargetAs(spec, {peer.uid, peer.gid, peer.groups}, kResolveAsPeerTimeout);
}

// Only a trigger's owner (the uid that added it) or root removes it.
StatusOr<nlohmann::json> Daemon::RemoveTrigger(const ipc::Peer& peer, const nlohmann::json& p) {
  uint64_t id = p.at("id").get<uint64_t>();
  auto it =
      std::find_if(triggers_.begin(), triggers_.end(), [id](const auto& t) { return t->id == id; });
  if (it == triggers_.end()) return NotFound(fmt::format("no trigger {}", id));
  if (peer.uid != 0 && (*it)->owner != peer.uid) {
    return Status(StatusCode::kPermissionDenied,
                  fmt::format("trigger {} belongs to uid {}: only its owner or root may remove it",
                              id, (*it)->owner));
  }
  for (auto& fd : (*it)->fds) {
    boost::system::error_code ec;
    fd->cancel(ec);
    fd->release();  // the UprobeTrigger owns the fd
  }
  triggers_.erase(it);
  return nlohmann::json{{"removed", id}};
}

void Daemon::ArmTrigger(Trigger* t, size_t i) {
  t->fds[i]->async_wait(asio::posix::stream_descriptor::wait_read,
                        [this, t, i](const boost::system::error_code& ec) {
                          if (ec) return;
                          OnTrigger(t);
                          ArmTrigger(t, i);
                        });
}

// Drains until the rings are empty: hits that land during a dump (tens of
// ms) raise their readiness edge while no wait is armed, and asio's
// edge-triggered epoll would not report them again until the next hit.
void Daemon::OnTrigger(Trigger* t) {
  if (t->hung_task) {
    for (auto tids = t->hung_task->Drain(); !tids.empty(); tids = t->hung_task->Drain()) {
      OnHungTasks(t, tids);
    }
    return;
  }
  for (auto hits = t->uprobe->Drain(); !hits.empty(); hits = t->uprobe->Drain()) {
    OnHits(t, hits);
  }
}

void Daemon::OnHits(Trigger* t, const std::vector<UprobeHit>& hits) {
  for (const auto& h : hits) {
    ++t->fired;
    if (!t->limiter->Allow(MonotonicNs())) continue;
    DumpRequest req;
    req.reason = fmt::format("uprobe {} hit by pid {} tid {}", t->spec, h.pid, h.tid);
    TriggerDump(t, std::move(req));
  }
}

void Daemon::TriggerDump(Trigger* t, DumpRequest req) {
  req.last_ns = t->last_ns;
  // A trigger added by a non-root group member writes records for that
  // user: owned by them, and without kernel addresses.
  req.owner_uid = t->owner;
  if (t->owner != 0) req.kernel_frames = options_.kernel_frames_for_users;
  auto r = Dump(req, t->owner);
  if (r.ok()) {
    ++t->dumps;
    ++t->records_total;
    if (t->records.size() >= kMaxTriggerRecords) t->records.erase(t->records.begin());
    t->records.push_back(r->row.id);
    spdlog::info("trigger {}: {}", t->id, r->Summary());
  } else {
    spdlog::error("trigger {}: dump failed: {}", t->id, r.status().message());
  }
}

void Daemon::CheckBlocked() {
  const BlockedThreads* blocked = backend_->blocked_threads();
  if (blocked == nullptr) return;
  const auto now = static_cast<uint64_t>(MonotonicNs());
  for (auto& t : triggers_) {
    if (!t->hang || t->hang->kind != HangSpec::Kind::kBlocked) continue;
    const HangSelector& sel = t->hang->select;
    auto list = blocked->BlockedFor(now, t->hang->blocked_ns, t->hang->states.c_str());
    auto hangs = t->hangs.Update(
        list, [&sel](uint32_t tid) { return sel.Match(tid); }, true);
    for (const Hang& h : hangs) FireHang(t.get(), h);
  }
}

// The kernel reports a hung task at every check while it stays hung: one
// hang is one count of its context switches.
void Daemon::OnHungTasks(Trigger* t, const std::vector<uint32_t>& tids) {
  std::vector<BlockedThread> reported;
  for (uint32_t tid : tids) {
    if (auto n = ContextSwitches(tid)) reported.push_back({tid, *n, 'D'});
  }
  const HangSelector& sel = t->hang->select;
  auto hangs = t->hangs.Update(
      reported, [&sel](uint32_t tid) { return sel.Match(tid); }, false);
  for (const Hang& h : hangs) FireHang(t, h);
}

void Daemon::FireHang(Trigger* t, const Hang& h) {
  ++t->fired;
  if (!t->limiter->Allow(MonotonicNs())) return;
  DumpRequest req;
  req.pids = {h.pid};
  if (t->hang->kind == HangSpec::Kind::kHungTask) {
    req.reason = fmt::format("hung task pid {} tid {} (kernel hung-task detector)", h.pid, h.tid);
  } else {
    req.reason =
        fmt::format("pid {} tid {} blocked in {} for {} (trigger {})", h.pid, h.tid, h.state,
                    FormatDurationNs(MonotonicNs() - static_cast<int64_t>(h.since_ns)), t->spec);
  }
  TriggerDump(t, std::move(req));
}

void Daemon::Stop() { io_.stop(); }

Status Daemon::Run() {
  for (int fd : backend_->SidebandFds()) {
    side_fds_.push_back(std::make_unique<asio::posix::stream_descriptor>(io_, fd));
  }
  for (size_t i = 0; i < side_fds_.size(); ++i) ArmSideband(i);
  if (death_watch_) {
    std::vector<int> fds = death_watch_->fds();
    if (oom_watch_) {
      for (int fd : oom_watch_->fds()) fds.push_back(fd);
    }
    for (int fd : fds) {
      death_fds_.push_back(std::make_unique<asio::posix::stream_descriptor>(io_, fd));
    }
    for (size_t i = 0; i < death_fds_.size(); ++i) ArmDeaths(i);
  }
  tick_ = std::make_unique<asio::steady_timer>(io_);
  Tick();
  signals_ = std::make_unique<asio::signal_set>(io_, SIGTERM, SIGINT, SIGUSR2);
  AwaitSignal();
  server_->Start();
  auto desc = backend_->Describe();
  spdlog::info("recording: backend {} event {} at {} Hz on {} CPUs; store {}; socket {}",
               desc.value("backend", ""), desc.value("event", ""), options_.frequency_hz,
               desc.value("cpus", 0), store_->dir(), options_.socket_path);
  if (desc.contains("fallback")) spdlog::warn("{}", desc["fallback"].get<std::string>());
  // Rings are capped: say what --history gets, as a warning when it is less.
  if (auto plan = backend_->PlannedHistory()) {
    spdlog::log(plan->held_s < plan->asked_s ? spdlog::level::warn : spdlog::level::info, "{}",
                plan->text);
  }
  io_.run();
  // Descriptors belong to the backend and triggers: do not let asio close them.
  for (auto& fd : side_fds_) fd->release();
  for (auto& fd : death_fds_) fd->release();
  for (auto& t : triggers_) {
    for (auto& fd : t->fds) fd->release();
  }
  // The socket is gone before the triggers close: each uprobe event takes
  // the kernel a grace period (~80 ms here, serialised on a global mutex)
  // to release, which is why --max-triggers is small.
  server_->Stop();
  return OkStatus();
}

int RecorderdMain(int argc, char** argv) {
  CLI::App app{
      "recorderd: the flightrec always-on recorder.\n"
      "Keeps the last seconds of every CPU's samples in overwrite rings and writes them\n"
      "into the store on request (recorder dump), on SIGUSR2, or when a trigger fires."};
  DaemonOptions o;
  const char* env_store = std::getenv("FLIGHTREC_STORE");
  o.store_dir = env_store && *env_store ? env_store : store::DefaultStoreDir();
  const char* env_sock = std::getenv("FLIGHTREC_SOCKET");
  if (env_sock && *env_sock) o.socket_path = env_sock;
  std::string history = "30s", last = "5s";
  bool foreground = false;
  // fp by default: at 99 Hz dwarf costs no measurable CPU more, but its
  // rings for the default history are 32 MiB per CPU instead of 1 MiB, held
  // for as long as the daemon runs (docs/BENCHMARKS.md, "DWARF unwinding").
  std::string callgraph = "fp";
  app.add_option("--store", o.store_dir, "Store directory")->capture_default_str();
  app.add_option("--socket", o.socket_path, "Control socket path")->capture_default_str();
  app.add_option("--group", o.socket_group, "Group whose members may use the control socket");
  app.add_option("--backend", o.backend,
                 "auto (module if /dev/flightrec exists, else perf), perf, module")
      ->capture_default_str();
  app.add_option("--history", history,
                 "History the rings should hold. Rings sized from it are capped (16 MiB per CPU, "
                 "32 MiB with --call-graph dwarf): the start-up log and `recorder status` say "
                 "what they hold at the rate and stack size asked")
      ->capture_default_str();
  app.add_option("--frequency,-F", o.frequency_hz, "Samples per second per CPU")
      ->capture_default_str();
  app.add_option("--default-last", last, "Window of SIGUSR2 dumps")->capture_default_str();
  app.add_option("--ring-pages", o.data_pages,
                 "Data ring pages per CPU (power of two; 0 = from --history)");
  app.add_option("--event,-e", o.event,
                 "Sampling event: auto (cycles, else cpu-clock), cpu-clock, task-clock, "
                 "page-faults, context-switches");
  app.add_option("--period", o.event_period,
                 "Sample every N events (page-faults, context-switches)")
      ->capture_default_str();
  app.add_option("--call-graph", callgraph,
                 "fp (frame pointers: stacks end early in code built without them), "
                 "dwarf[,STACK_BYTES] (registers + 8192 or STACK_BYTES bytes of user stack, "
                 "unwound when read: whole stacks, but rings of 32 MiB per CPU for 30 s at 99 Hz "
                 "instead of 1 MiB; --backend module: the module's stack_bytes, or at most that), "
                 "or none. fp is the default: at 99 Hz both cost the same CPU, and the rings are "
                 "held as long as the daemon runs (docs/BENCHMARKS.md)")
      ->capture_default_str();
  std::string off_cpu_thresh = "1ms";
  app.add_flag("--off-cpu", o.off_cpu,
               "Also record off-CPU time (perf backend, system-wide): each switch-out of a "
               "blocked thread (sched:sched_switch, state S or D) with its kernel and user stack, "
               "and every switch-in, in overwrite rings of their own; records then say how long "
               "each thread was blocked, where, and in which state (recorder report --off-cpu)");
  app.add_option("--off-cpu-thresh", off_cpu_thresh,
                 "Blocked intervals shorter than this are left out of records (as perf's "
                 "--off-cpu-thresh)")
      ->capture_default_str();
  app.add_option("--off-cpu-ring-pages", o.off_cpu_pages,
                 "Pages per CPU of the ring of blocking switch-outs (power of two; 0 = 512, 2048 "
                 "with --call-graph dwarf). It must hold --history of every blocking switch of "
                 "the machine: a thread blocked for longer than the ring holds is left out "
                 "(recorder status shows how long it holds)");
  app.add_option("--off-cpu-stack-bytes", o.off_cpu_stack_bytes,
                 "With --call-graph dwarf: bytes of user stack each blocking switch-out copies "
                 "(0 = the --call-graph size). Every record takes all of them in the ring, so a "
                 "smaller copy holds a longer history");
  app.add_option("--aux-trace", o.aux_trace,
                 "Also keep the last branch trace per CPU from a trace PMU (off by default): "
                 "pt (intel_pt), spe (arm_spe) or etm (cs_etm), then comma-separated size=N "
                 "(AUX area per CPU, a power of two, 64K..1G, default 4M), cyc, mtc, "
                 "branch-only (no timing packets), user (default), kernel, user+kernel. The "
                 "area is overwritten in place (snapshot mode); each dump and crash record "
                 "takes it (recorder trace ID). Without the PMU recorderd says so, records "
                 "without it, and `recorder status` says why")
      ->type_name("SPEC");
  app.add_option("--max-dumps-per-hour", o.dumps_per_hour,
                 "Dumps per sliding hour for all users together (manual, SIGUSR2, triggers, "
                 "crash history): the global ceiling. Non-root uids together get this less "
                 "root's share (min(per-uid budget, half of this))")
      ->capture_default_str();
  std::string kernel_frames = KernelFramesName(o.kernel_frames_for_users);
  app.add_option("--kernel-frames-for-users", kernel_frames,
                 "What records written for a user (the coredump hook's history of a crash of "
                 "uid != 0, a dump asked by a non-root member of --group) keep of kernel frames: "
                 "symbolized (function+offset names resolved when the record is written, no "
                 "kernel address) or none (no kernel frames). Root's own records keep the "
                 "addresses (docs/FORMAT.md)")
      ->check(CLI::IsMember({"symbolized", "none"}))
      ->capture_default_str();
  app.add_option("--max-dumps-per-uid-per-hour", o.dumps_per_uid_per_hour,
                 "Dumps per sliding hour charged to one uid: the requesting peer's, or for the "
                 "coredump hook (a root peer) the crashed process's (dump param for_uid); "
                 "SIGUSR2 dumps are charged to recorderd's own uid")
      ->capture_default_str();
  app.add_option("--max-triggers", o.max_triggers,
                 "Uprobe triggers held at once, in total. Each holds a perf event per CPU, "
                 "which the kernel takes ~80 ms to release when recorderd stops")
      ->capture_default_str();
  app.add_option("--max-triggers-per-uid", o.max_triggers_per_uid,
                 "Uprobe triggers held at once per uid")
      ->capture_default_str();
  app.add_option("--reserved-fds", o.reserved_fds,
                 "File descriptors a new trigger must leave free (of RLIMIT_NOFILE) for "
                 "connections, dumps and the store")
      ->capture_default_str();
  app.footer(
      "Control socket limits: frames of at most 1 MiB, JSON nested at most 32 deep, a scalar "
      "id of at most 256 bytes, 16 MiB of unfinished requests in total, 256 connections (+16 for "
      "root only), "
      "32 per non-root uid, 5 s idle timeout; peers other than root, recorderd's uid and --group "
      "are refused before "
      "anything they send is read. See recorder/ipc/PROTOCOL.md.");
  std::string fleet_config;
  app.add_option("--fleet", fleet_config,
                 "Fleet mode: ship every committed record to the S3 bucket named in CONFIG "
                 "(systemd-style INI; secrets only in its root-only CredentialsFile=), on a "
                 "thread of its own; retention then keeps a record until it is shipped "
                 "(docs/ARCHITECTURE.md, \"Fleet mode\")")
      ->type_name("CONFIG");
  std::string deaths = "on";
  app.add_option("--deaths", deaths,
                 "on: store a `death` record (the process's history and what was known of it) "
                 "for every process killed by a signal that left no crash record (kill -9, the "
                 "OOM killer, a core that was not dumped), within the dump budgets of its uid; "
                 "off: only crashes (docs/ARCHITECTURE.md, \"Deaths without a core\")")
      ->check(CLI::IsMember({"on", "off"}))
      ->capture_default_str();
  std::string mem_growth = "on";
  app.add_option("--mem-growth", mem_growth,
                 "on: sample memory growth always (one page fault in 64, with its user call "
                 "chain, in a 256 KiB overwrite ring per CPU) and each process's RSS every "
                 "250 ms, so that the `oom` record of an OOM kill names the stacks that grew "
                 "the victim and its RSS curve; off: oom records hold the kernel's figures "
                 "only (docs/ARCHITECTURE.md, \"OOM kills\")")
      ->check(CLI::IsMember({"on", "off"}))
      ->capture_default_str();
  app.add_flag("--foreground", foreground,
               "Stay in the foreground, log to stderr (systemd runs it so)");
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  }
  auto h = ParseDurationNs(history);
  auto l = ParseDurationNs(last);
  auto t = ParseDurationNs(off_cpu_thresh);
  if (!t.ok() || *t < 0) {
    std::fprintf(stderr, "recorderd: error: --off-cpu-thresh: %s\n",
                 t.ok() ? "must not be negative" : t.status().message().c_str());
    return 2;
  }
  o.off_cpu_threshold_ns = *t;
  if (!o.aux_trace.empty()) {
    if (auto spec = perf::ParseAuxTraceSpec(o.aux_trace); !spec.ok()) {
      std::fprintf(stderr, "recorderd: error: %s\n", spec.status().message().c_str());
      return 2;
    }
  }
  if (!h.ok() || !l.ok()) {
    std::fprintf(stderr, "recorderd: error: %s\n",
                 (!h.ok() ? h.status() : l.status()).message().c_str());
    return 2;
  }
  o.kernel_frames_for_users = *ParseKernelFrames(kernel_frames);  // IsMember checked it
  o.history_ns = *h;
  o.default_last_ns = *l;
  o.record_deaths = deaths == "on";
  o.mem_growth = mem_growth == "on";
  auto cg = perf::ParseCallGraph(callgraph);
  if (!cg.ok()) {
    std::fprintf(stderr, "recorderd: error: %s\n", cg.status().message().c_str());
    return 2;
  }
  o.callchain = cg->callchain;
  o.dwarf_stack_bytes = cg->dwarf_stack_bytes;
  o.dwarf_size_given = callgraph.find(',') != std::string::npos;
  (void)foreground;  // recorderd never daemonizes itself; systemd supervises it
  spdlog::set_pattern("recorderd: %l: %v");
  umask(077);  // records and the index hold other users' data: root's only
  // SIGUSR2/SIGTERM are handled by the event loop; block their default action
  // before any thread exists.
  std::optional<fleet::FleetConfig> fleet;
  if (!fleet_config.empty()) {
    auto c = fleet::LoadFleetConfig(fleet_config);
    if (!c.ok()) {
      std::fprintf(stderr, "recorderd: error: %s\n", c.status().message().c_str());
      return 2;
    }
    fleet = std::move(*c);
  }
  auto d = Daemon::Create(o);
  if (!d.ok()) {
    std::fprintf(stderr, "recorderd: error: %s\n", d.status().message().c_str());
    return 1;
  }
  // The shipper reads the store directory and uploads on its own thread:
  // recording and dumps on the event loop never wait for the network.
  std::unique_ptr<fleet::Shipper> shipper;
  if (fleet) {
    fleet::ShipperOptions so = fleet::ShipperOptionsFromConfig(*fleet, o.store_dir);
    // With [PostgreSQL] ConnInfo=, a record is confirmed only once both its
    // object and its index row exist; PostgreSQL being away is retried with
    // backoff like the gateway being away, on the shipper's thread.
    if (!fleet->pg_conninfo.empty()) {
      so.on_uploaded_batch = fleet::MakeBatchIndexingCallback(*fleet, so.host_id);
    }
    auto s = fleet::Shipper::Create(std::move(so));
    if (!s.ok()) {
      std::fprintf(stderr, "recorderd: error: fleet: %s\n", s.status().message().c_str());
      return 1;
    }
    shipper = std::move(*s);
    (*d)->AddStatusSection(
        "fleet", [sh = shipper.get(), host = fleet->host_id, bucket = fleet->s3_bucket,
                  endpoint = fleet->s3_endpoint, indexed = !fleet->pg_conninfo.empty(),
                  store_dir = o.store_dir] {
          return FleetStatusJson(sh->stats(), host, bucket, endpoint, indexed, store_dir);
        });
    shipper->Start();
  }
  flightrec::Status st = (*d)->Run();
  if (shipper) shipper->Stop();
  if (!st.ok()) {
    std::fprintf(stderr, "recorderd: error: %s\n", st.message().c_str());
    return 1;
  }
  return 0;
}

}  // namespace flightrec::recorder
