// recorder record [--history D] [--last D] -- CMD ARGS: the foreground mode
// for unprivileged use. Samples one command and the children it forks
// (per-CPU events on its pid with inherit, user space only at
// perf_event_paranoid 2), keeps the history in overwrite rings, and writes a
// record into the user's store when asked (SIGUSR2 to `recorder`) and when the
// command dies from a signal. Exits with the command's status.
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/signalfd.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include <fmt/format.h>

#include "common/checked_json.h"
#include "common/subprocess.h"
#include "common/units.h"
#include "recorder/attribution/attribution.h"
#include "recorder/cli/cli.h"
#include "recorder/perf/perf_backend.h"
#include "recorder/record/dump_record.h"

namespace flightrec::recorder::cli {
namespace {

struct RecordArgs {
  std::string history = "30s";
  std::string last = "5s";
  uint32_t frequency = 99;
  bool always = false;    // also dump when the command exits normally
  size_t ring_pages = 0;  // per CPU; 0 = sized from --history and -F
  // fp by default: a DWARF ring for the default history (32 MiB per CPU) is
  // over an unprivileged user's locked-memory allowance, and at 99 Hz the
  // two cost the same CPU (docs/BENCHMARKS.md, "DWARF unwinding").
  std::string call_graph = "fp";
  bool json = false;  // one JSON object on stdout at the end: the records written
  std::vector<std::string> command;
};

// 0 if execve would start `path`, else its errno: ENOENT (nothing there)
// or EACCES (there, but not an executable regular file).
int ExecError(const std::string& path) {
  struct stat st {};
  if (stat(path.c_str(), &st) != 0) return errno == EACCES ? EACCES : ENOENT;
  if (!S_ISREG(st.st_mode)) return EACCES;
  // Effective ids, as execve checks them (root needs one execute bit too).
  return faccessat(AT_FDCWD, path.c_str(), X_OK, AT_EACCESS) == 0 ? 0 : EACCES;
}

// Whether execvp(program) would start something, checked before anything is
// recorded: execvp's answer comes from the child only after the recording
// began, as a status the command could have exited with itself. execvp's
// search: a name with a slash is a path; otherwise each PATH entry in turn
// ("" is the current directory), EACCES if some entry had a file that cannot
// run and none had one that can, else ENOENT. A shell exits 127 for the
// first and 126 for the second; so does `record` (ctx->exit_status).
Status CheckRunnable(const std::string& program, CliContext* ctx) {
  int err = ENOENT;
  bool searched = false;
  if (program.find('/') != std::string::npos) {
    err = ExecError(program);
  } else if (!program.empty()) {
    const char* env = std::getenv("PATH");
    std::string path = env ? env : "";
    if (!env) {
      path.resize(confstr(_CS_PATH, nullptr, 0));
      confstr(_CS_PATH, path.data(), path.size());
      path.resize(std::strlen(path.c_str()));
    }
    searched = true;
    for (size_t start = 0; err != 0 && start <= path.size();) {
      size_t end = std::min(path.find(':', start), path.size());
      std::string dir = path.substr(start, end - start);
      const int e = ExecError((dir.empty() ? "." : dir) + "/" + program);
      if (e == 0 || e == EACCES) err = e;
      start = end + 1;
    }
  }
  if (err == 0) return OkStatus();
  ctx->exit_status = err == EACCES ? 126 : 127;
  return Status(err == EACCES ? StatusCode::kPermissionDenied : StatusCode::kNotFound,
                fmt::format("cannot run {}: {}", program,
                            err == EACCES ? "permission denied (not an executable file)"
                            : searched    ? "no such file or directory in PATH"
                                          : "no such file or directory"));
}

Status RunRecord(CliContext& ctx, const RecordArgs& a) {
  if (a.command.empty()) return InvalidArgument("recorder record: give a command after --");
  RETURN_IF_ERROR(CheckRunnable(a.command[0], &ctx));
  ASSIGN_OR_RETURN(int64_t history, ParseDurationNs(a.history));
  ASSIGN_OR_RETURN(int64_t last, ParseDurationNs(a.last));
  ASSIGN_OR_RETURN(perf::CallGraph call_graph, perf::ParseCallGraph(a.call_graph));
  store::StoreOptions so;
  ASSIGN_OR_RETURN(auto st, store::Store::Open(ctx.store_dir, so));

  // The child waits on a pipe until its events exist, so not one instruction
  // of the command runs unrecorded.
  int go[2];
  if (pipe2(go, O_CLOEXEC) != 0) return ErrnoStatus("pipe");
  sigset_t mask;
  sigemptyset(&mask);
  sigaddset(&mask, SIGUSR2);
  sigaddset(&mask, SIGCHLD);
  sigaddset(&mask, SIGINT);
  sigaddset(&mask, SIGTERM);
  sigset_t old;
  sigprocmask(SIG_BLOCK, &mask, &old);
  // argv is built before the fork: the child only reads a pipe and execs.
  std::vector<char*> child_argv;
  for (const auto& s : a.command) child_argv.push_back(const_cast<char*>(s.c_str()));
  child_argv.push_back(nullptr);
  auto proc = Subprocess::Fork([&]() -> int {
    sigprocmask(SIG_SETMASK, &old, nullptr);
    close(go[1]);
    char c;
    if (read(go[0], &c, 1) != 1) return 127;
    execvp(child_argv[0], child_argv.data());
    std::fprintf(stderr, "recorder record: cannot run %s: %s\n", child_argv[0],
                 std::strerror(errno));
    return 127;
  });
  if (!proc.ok()) return proc.status();
  // An early return (the backend failed) kills and reaps the command.
  proc->set_kill_on_destroy(true);
  const pid_t child = proc->pid();
  close(go[0]);
  perf::PerfConfig pc;
  pc.target_pid = child;
  pc.frequency_hz = a.frequency;
  pc.history_ns = history;
  pc.data_pages = a.ring_pages;
  pc.callchain = call_graph.callchain;
  pc.dwarf_stack_bytes = call_graph.dwarf_stack_bytes;
  auto backend = perf::PerfBackend::Create(pc);
  if (!backend.ok()) return backend.status();
  attribution::CookieTable cookies;
  attribution::SidebandHistory sideband(&cookies);
  attribution::LabelCache labels;
  for (const Event& e : attribution::ScanProc(static_cast<uint64_t>(MonotonicNs()))) {
    if (auto* m = std::get_if<MmapEvent>(&e); m && m->pid != static_cast<uint32_t>(child)) continue;
    sideband.base().Apply(e);
  }
  attribution::KernelSymbols ksyms;  // unprivileged: hidden addresses, no kernel frames
  if (auto ks = attribution::KernelSymbols::Load(); ks.ok()) ksyms = std::move(*ks);
  auto drain = [&] {
    (void)(*backend)->DrainSideband([&](const Event& e) {
      labels.Observe(e);
      sideband.Add(e);
    });
    int64_t cutoff = MonotonicNs() - 2 * history;
    if (cutoff > 0) {
      sideband.Trim(static_cast<uint64_t>(cutoff));
      labels.Trim(static_cast<uint64_t>(cutoff));
    }
  };
  nlohmann::json written = nlohmann::json::array();
  auto dump = [&](const std::string& reason) {
    drain();
    int64_t t0 = MonotonicNs();
    auto snap = (*backend)->TakeSnapshot(last);
    if (!snap.ok()) {
      std::fprintf(stderr, "recorder record: dump failed: %s\n", snap.status().message().c_str());
      return;
    }
    drain();
    DumpRequest req;
    req.last_ns = last;
    req.reason = reason;
    req.labels = [&](uint32_t pid, bool exited) { return labels.Labels(pid, exited); };
    auto r = WriteDump(*st, req, std::move(*snap), sideband, ksyms, (*backend)->Describe(), t0);
    if (r.ok()) {
      std::fprintf(stderr, "recorder record: %s\n", r->Summary().c_str());
      written.push_back(r->ToJson());
    } else
      std::fprintf(stderr, "recorder record: dump failed: %s\n", r.status().message().c_str());
  };
  std::fprintf(stderr,
               "recorder record: recording pid %d (%s, %s); SIGUSR2 to pid %d dumps the last %s\n",
               child, (*backend)->event_name().c_str(),
               (*backend)->Describe()["kernel_samples"].get<bool>() ? "user+kernel" : "user only",
               getpid(), a.last.c_str());
  if (auto plan = (*backend)->PlannedHistory()) {
    std::fprintf(stderr, "recorder record: %s\n", plan->text.c_str());
  }
  (void)!write(go[1], "g", 1);
  close(go[1]);

  int sfd = signalfd(-1, &mask, SFD_CLOEXEC);
  std::vector<pollfd> pfds = {{sfd, POLLIN, 0}};
  for (int fd : (*backend)->SidebandFds()) pfds.push_back({fd, POLLIN, 0});
  int status = 0;
  for (;;) {
    poll(pfds.data(), pfds.size(), 200);
    drain();
    if (!(pfds[0].revents & POLLIN)) continue;
    signalfd_siginfo si;
    if (read(sfd, &si, sizeof(si)) != sizeof(si)) continue;
    if (si.ssi_signo == SIGUSR2) {
      dump("SIGUSR2");
    } else if (si.ssi_signo == SIGINT || si.ssi_signo == SIGTERM) {
      kill(child, static_cast<int>(si.ssi_signo));  // pass it on; we stop when it does
    } else if (si.ssi_signo == SIGCHLD) {
      // The child is a zombie until we reap it: its samples are final.
      siginfo_t info{};
      if (waitid(P_PID, static_cast<id_t>(child), &info, WEXITED | WNOHANG | WNOWAIT) == 0 &&
          info.si_pid == child) {
        if (info.si_code == CLD_KILLED || info.si_code == CLD_DUMPED) {
          dump(fmt::format("{} killed by SIG{}", a.command[0], sigabbrev_np(info.si_status)));
        } else if (a.always) {
          dump(fmt::format("{} exited with status {}", a.command[0], info.si_status));
        }
        if (auto ws = proc->Wait(); ws.ok()) status = *ws;
        break;
      }
    }
  }
  close(sfd);
  sigprocmask(SIG_SETMASK, &old, nullptr);
  if (a.json) {
    nlohmann::json out = {{"command", a.command}, {"pid", child}, {"records", written}};
    if (WIFEXITED(status)) out["exit_status"] = WEXITSTATUS(status);
    if (WIFSIGNALED(status)) out["signal"] = WTERMSIG(status);
    std::printf("%s\n", json::Dump(out, 2).c_str());
  }
  if (WIFEXITED(status) && WEXITSTATUS(status) != 0) {
    return Status(StatusCode::kInternal,
                  fmt::format("{} exited with status {}", a.command[0], WEXITSTATUS(status)));
  }
  if (WIFSIGNALED(status)) {
    return Status(StatusCode::kInternal, fmt::format("{} was killed by SIG{}", a.command[0],
                                                     sigabbrev_np(WTERMSIG(status))));
  }
  return OkStatus();
}

}  // namespace

void AddRecordCommand(CLI::App& app, CliContext& ctx) {
  auto ra = std::make_shared<RecordArgs>();
  auto* rec = app.add_subcommand(
      "record",
      "Record one command and its children in the foreground (no daemon, no root needed): "
      "dumps on SIGUSR2 and when the command dies from a signal");
  rec->add_option("--history", ra->history, "History the rings should hold")->capture_default_str();
  rec->add_option("--last", ra->last, "Window of each dump")->capture_default_str();
  rec->add_option("-F,--frequency", ra->frequency, "Samples per second")->capture_default_str();
  rec->add_option("--ring-pages", ra->ring_pages,
                  "Data ring pages per CPU (power of two; default: sized from --history and -F, "
                  "at most 4096)")
      ->check(CLI::Range(size_t{0}, size_t{1} << 20));
  rec->add_option("--call-graph", ra->call_graph,
                  "fp (frame pointers: stacks end early in code built without them), "
                  "dwarf[,STACK_BYTES] (registers + 8192 or STACK_BYTES bytes of user stack, "
                  "unwound when read: whole stacks, but rings of 32 MiB per CPU for 30 s at "
                  "99 Hz, over an unprivileged user's locked-memory limit unless --history is "
                  "a few seconds), or none. fp is the default: at 99 Hz both cost the same CPU "
                  "(docs/BENCHMARKS.md)")
      ->capture_default_str();
  rec->add_flag("--always", ra->always,
                "Also write a record when the command exits normally (like perf record)");
  rec->add_flag("--json", ra->json,
                "At the end, print the records written (and how the command ended) as JSON");
  rec->add_option("command", ra->command, "-- CMD ARGS")->required();
  rec->prefix_command();
  rec->callback([&ctx, ra] { ctx.action = [&ctx, ra] { return RunRecord(ctx, *ra); }; });
}

}  // namespace flightrec::recorder::cli
