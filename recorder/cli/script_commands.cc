// recorder script ID [--json]: one line per sample with its attributed stack,
// like `perf script`, replayed through the same pipeline as `report`.
#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <map>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "common/units.h"
#include "recorder/analysis/replay.h"
#include "recorder/cli/cli.h"
#include "recorder/cli/query_args.h"

namespace flightrec::recorder::cli {
namespace {

struct ScriptArgs : QueryArgs {
  bool live = false;
};

Status RunScript(const CliContext& ctx, const ScriptArgs& a) {
  ASSIGN_OR_RETURN(analysis::ReplayOptions opts, a.Options());
  ASSIGN_OR_RETURN(auto store, ctx.OpenStore());
  ASSIGN_OR_RETURN(auto reader, store->OpenRecord(a.id));
  int64_t to_wall = 0;
  const bool json = a.json;
  opts.live = a.live;
  // The samples go to stdout line by line: a progress line on a terminal
  // would be mixed into them.
  opts.progress = !isatty(STDOUT_FILENO);
  ASSIGN_OR_RETURN(
      auto stats,
      analysis::Replay(
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
              if (!s.unwind.status.empty()) {
                line["unwind"] = {{"status", s.unwind.status}, {"where", s.unwind.where}};
              }
              std::printf("%s\n", line.dump().c_str());
              return;
            }
            std::printf("%16s %6u/%-6u [%03u] %llu.%09llu:\n", s.comm.c_str(), s.pid, s.tid, s.cpu,
                        static_cast<unsigned long long>(s.time_ns / 1000000000),
                        static_cast<unsigned long long>(s.time_ns % 1000000000));
            for (const auto* f : rs.stack) {
              std::string where = f->file.empty() ? "" : fmt::format(" {}:{}", f->file, f->line);
              std::printf("\t%16llx %s%s (%s)%s\n", static_cast<unsigned long long>(f->offset),
                          f->Display().c_str(), f->inlined ? " [inlined]" : "", f->dso.c_str(),
                          where.c_str());
            }
            if (!s.unwind.status.empty() && s.unwind.status != "ok") {
              std::printf("\t(stack incomplete: %s at %s)\n", s.unwind.status.c_str(),
                          s.unwind.where.c_str());
            }
            std::printf("\n");
          }));
  return AllExecutablesGone(reader->meta(), stats.pids);
}

}  // namespace

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
  script->callback([&ctx, a] { ctx.action = [&ctx, a] { return RunScript(ctx, *a); }; });
}

}  // namespace flightrec::recorder::cli
