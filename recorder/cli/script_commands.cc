// recorder script ID [--json]: one line per sample with its attributed stack,
// like `perf script`, replayed through the same pipeline as `report`.
#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <map>
#include <string>
#include <unordered_map>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "common/checked_json.h"
#include "common/terminal_escape.h"
#include "common/units.h"
#include "recorder/analysis/replay.h"
#include "recorder/cli/cli.h"
#include "recorder/cli/query_args.h"

namespace flightrec::recorder::cli {
namespace {

struct ScriptArgs : QueryArgs {
  bool live = false;
  bool off_cpu = false;
};

// One frame's line of the text output. Names come from the record and the
// binaries it names: escaped for the terminal.
std::string FrameLine(const attribution::Symbol& f) {
  std::string where = f.file.empty() ? "" : fmt::format(" {}:{}", f.file, f.line);
  return fmt::format("\t{:16x} {}{} ({}){}\n", f.offset, EscapeForTerminal(f.Display()),
                     f.inlined ? " [inlined]" : "", EscapeForTerminal(f.dso),
                     EscapeForTerminal(where));
}

Status ScriptOn(const store::RecordReader* reader, const ScriptArgs& a) {
  ASSIGN_OR_RETURN(analysis::ReplayOptions opts, a.Options());
  int64_t to_wall = 0;
  const bool json = a.json;
  opts.live = a.live;
  opts.off_cpu = a.off_cpu;
  // The samples go to stdout line by line: a progress line on a terminal
  // would be mixed into them.
  opts.progress = a.progress && !isatty(STDOUT_FILENO);
  const auto labels = attribution::LabelsByPid(reader->meta());
  std::unordered_map<const attribution::Symbol*, std::string> frame_lines;
  ASSIGN_OR_RETURN(
      auto stats,
      a.Replay(
          *reader, opts, [&](const analysis::RecordInfo& info) { to_wall = info.mono_to_wall_ns; },
          [&](const analysis::ResolvedSample& rs) {
            const auto& s = *rs.sample;
            if (json) {
              nlohmann::json frames = nlohmann::json::array();
              for (const auto* f : rs.stack) {
                nlohmann::json fj = {{"function", f->function},
                                     {"dso", f->dso},
                                     {"offset", f->offset},
                                     {"status", f->status}};
                if (!f->file.empty()) {
                  fj["file"] = f->file;
                  fj["line"] = f->line;
                }
                if (f->inlined) fj["inlined"] = true;
                frames.push_back(std::move(fj));
              }
              nlohmann::json line = {
                  {"time_ns", s.time_ns}, {"wall_ns", static_cast<int64_t>(s.time_ns) + to_wall},
                  {"cpu", s.cpu},         {"pid", s.pid},
                  {"tid", s.tid},         {"comm", s.comm},
                  {"period", s.period},   {"frames", frames}};
              // Where the process ran (cgroup, unit, container, pod, namespaces).
              if (auto it = labels.find(s.pid); it != labels.end()) {
                attribution::AddLabelsToJson(it->second, &line);
              }
              if (!s.unwind.status.empty()) {
                line["unwind"] = {{"status", s.unwind.status}, {"where", s.unwind.where}};
              }
              if (rs.off_cpu) {  // time_ns is the switch-out, period the ns off CPU
                line["off_cpu"] = {{"state", std::string(1, rs.off_cpu->state)},
                                   {"ns", s.period},
                                   {"ongoing", rs.off_cpu->ongoing}};
              }
              std::printf("%s\n", json::Dump(line).c_str());
              return;
            }
            // Names come from the record and the binaries it names.
            auto E = [](const std::string& t) { return EscapeForTerminal(t); };
            std::printf("%16s %6u/%-6u [%03u] %llu.%09llu:", E(s.comm).c_str(), s.pid, s.tid, s.cpu,
                        static_cast<unsigned long long>(s.time_ns / 1000000000),
                        static_cast<unsigned long long>(s.time_ns % 1000000000));
            if (rs.off_cpu) {
              std::printf(" off-cpu %c for %s%s", rs.off_cpu->state,
                          FormatDurationNs(static_cast<int64_t>(s.period)).c_str(),
                          rs.off_cpu->ongoing ? " (still blocked at the dump)" : "");
            }
            std::printf("\n");
            // A frame's line is the same every time its symbol comes back
            // (one Symbol per distinct frame): formatted and escaped once.
            for (const auto* f : rs.stack) {
              auto [it, fresh] = frame_lines.try_emplace(f);
              if (fresh) it->second = FrameLine(*f);
              std::fwrite(it->second.data(), 1, it->second.size(), stdout);
            }
            if (!s.unwind.status.empty() && s.unwind.status != "ok") {
              std::printf("\t(stack incomplete: %s at %s)\n", E(s.unwind.status).c_str(),
                          E(s.unwind.where).c_str());
            }
            std::printf("\n");
          }));
  return AllExecutablesGone(reader->meta(), stats.pids);
}

Status RunScript(const CliContext& ctx, const ScriptArgs& a) {
  RETURN_IF_ERROR(a.Options().status());
  ASSIGN_OR_RETURN(auto reader, ctx.OpenRecord(a.id));
  return ScriptOn(reader.get(), a);
}

}  // namespace

Status ExerciseScriptCommand(const store::RecordReader& reader, int pick) {
  Status first;
  int variant = 0;
  // live x json, then --off-cpu x json.
  for (int mode : {0, 1, 2}) {
    for (bool json : {false, true}) {
      if (mode == 2 && !json) continue;
      if (pick >= 0 && variant++ != pick % 5) continue;
      ScriptArgs a;
      a.live = mode == 1;
      a.off_cpu = mode == 2;
      a.json = json;
      a.progress = false;
      Status st = ScriptOn(&reader, a);
      if (first.ok() && !st.ok()) first = st;
    }
  }
  return first;
}

void AddScriptCommands(CLI::App& app, CliContext& ctx) {
  auto a = std::make_shared<ScriptArgs>();
  auto* script = app.add_subcommand(
      "script",
      "One line per sample with its attributed stack, like `perf script` (--json: one JSON "
      "object per line)");
  a->Register(script);
  script->add_flag("--live", a->live,
                   "Show the frames recorderd attributed at capture time (records written with "
                   "`recorder dump --live-attribution`) instead of re-attributing the events");
  script->add_flag("--off-cpu", a->off_cpu,
                   "Also show each off-CPU interval (records of recorderd --off-cpu) at its "
                   "switch-out, marked off-cpu with its state (S, D) and how long the thread "
                   "stayed blocked (JSON: an \"off_cpu\" object)");
  script->callback([&ctx, a] { ctx.action = [&ctx, a] { return RunScript(ctx, *a); }; });
}

}  // namespace flightrec::recorder::cli
