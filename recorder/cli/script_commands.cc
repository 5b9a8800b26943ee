// recorder script ID [--json]: one line per sample with its attributed stack,
// like `perf script`. recorder export ID --format folded -o FILE: folded
// stacks ("comm;outer;...;inner count") for flame-graph tools. Both replay
// the record through the same Attributor as `report`.
#include <cstdio>
#include <fstream>
#include <map>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "common/units.h"
#include "recorder/attribution/attribution.h"
#include "recorder/cli/cli.h"
#include "recorder/daemon/dump_record.h"

namespace flightrec::recorder::cli {
namespace {

// Calls fn(sample, symbols innermost-first) for every sample of the record.
Status ForEachSample(
    const CliContext& ctx, const std::string& id,
    const std::function<void(const attribution::AttributedSample&,
                             const std::vector<attribution::Symbol>&, int64_t to_wall)>& fn) {
  ASSIGN_OR_RETURN(auto s, ctx.OpenStore());
  ASSIGN_OR_RETURN(auto reader, s->OpenRecord(id));
  ASSIGN_OR_RETURN(LoadedDump dump, LoadDump(*reader));
  ASSIGN_OR_RETURN(auto ksyms, attribution::KernelSymbols::FromText(dump.kallsyms));
  int64_t to_wall = dump.config.value("mono_to_wall_ns", int64_t{0});
  attribution::Attributor attributor;
  attribution::Symbolizer symbolizer(&attributor.cookies(), &ksyms);
  for (const Event& e : dump.events) {
    auto as = attributor.Add(e);
    if (!as) continue;
    std::vector<attribution::Symbol> syms;
    for (const auto& f : as->frames) syms.push_back(symbolizer.Resolve(f));
    fn(*as, syms, to_wall);
  }
  return OkStatus();
}

Status RunScript(const CliContext& ctx, const std::string& id, bool json) {
  return ForEachSample(
      ctx, id,
      [&](const attribution::AttributedSample& s, const std::vector<attribution::Symbol>& syms,
          int64_t to_wall) {
        if (json) {
          nlohmann::json frames = nlohmann::json::array();
          for (const auto& f : syms) {
            frames.push_back({{"function", f.function},
                              {"dso", f.dso},
                              {"offset", f.offset},
                              {"status", f.status}});
          }
          nlohmann::json line = {
              {"time_ns", s.time_ns}, {"wall_ns", static_cast<int64_t>(s.time_ns) + to_wall},
              {"cpu", s.cpu},         {"pid", s.pid},
              {"tid", s.tid},         {"comm", s.comm},
              {"period", s.period},   {"frames", frames}};
          std::printf("%s\n", line.dump().c_str());
          return;
        }
        std::printf("%16s %6u/%-6u [%03u] %llu.%09llu:\n", s.comm.c_str(), s.pid, s.tid, s.cpu,
                    static_cast<unsigned long long>(s.time_ns / 1000000000),
                    static_cast<unsigned long long>(s.time_ns % 1000000000));
        for (const auto& f : syms) {
          std::printf("\t%16llx %s (%s)\n", static_cast<unsigned long long>(f.offset),
                      f.Display().c_str(), f.dso.c_str());
        }
        std::printf("\n");
      });
}

Status RunExport(const CliContext& ctx, const std::string& id, const std::string& format,
                 const std::string& out) {
  if (format != "folded") {
    return Unsupported(
        fmt::format("export format '{}' is not available yet (available: folded)", format));
  }
  std::map<std::string, uint64_t> folded;
  RETURN_IF_ERROR(ForEachSample(ctx, id,
                                [&](const attribution::AttributedSample& s,
                                    const std::vector<attribution::Symbol>& syms, int64_t) {
                                  std::string stack =
                                      s.comm.empty() ? std::to_string(s.pid) : s.comm;
                                  for (auto it = syms.rbegin(); it != syms.rend(); ++it) {
                                    std::string name = it->Display();
                                    for (auto& c : name) {
                                      if (c == ';' || c == ' ')
                                        c = '_';  // the folded format's separators
                                    }
                                    stack += ";" + name;
                                  }
                                  ++folded[stack];
                                }));
  std::string text;
  for (const auto& [stack, n] : folded) text += fmt::format("{} {}\n", stack, n);
  if (out.empty() || out == "-") {
    std::fputs(text.c_str(), stdout);
    return OkStatus();
  }
  std::ofstream f(out, std::ios::trunc);
  if (!f || !(f << text) || !f.flush()) return ErrnoStatus(fmt::format("writing {}", out));
  std::fprintf(stderr, "wrote %zu stacks to %s\n", folded.size(), out.c_str());
  return OkStatus();
}

}  // namespace

void AddScriptCommands(CLI::App& app, CliContext& ctx) {
  auto id = std::make_shared<std::string>();
  auto json = std::make_shared<bool>(false);
  auto* script = app.add_subcommand(
      "script", "One line per sample with its attributed stack, like `perf script`");
  script->add_option("ID", *id, "Record id, unique prefix, or -1")->required();
  script->add_flag("--json", *json, "One JSON object per line");
  script->callback(
      [&ctx, id, json] { ctx.action = [&ctx, id, json] { return RunScript(ctx, *id, *json); }; });

  auto eid = std::make_shared<std::string>();
  auto format = std::make_shared<std::string>("folded");
  auto out = std::make_shared<std::string>("-");
  auto* exp = app.add_subcommand("export", "Write a record's stacks in another tool's format");
  exp->add_option("ID", *eid, "Record id, unique prefix, or -1")->required();
  exp->add_option("--format", *format, "folded (flame-graph tools)")->capture_default_str();
  exp->add_option("-o,--output", *out, "Output file (- for stdout)")->capture_default_str();
  exp->callback([&ctx, eid, format, out] {
    ctx.action = [&ctx, eid, format, out] { return RunExport(ctx, *eid, *format, *out); };
  });
}

}  // namespace flightrec::recorder::cli
