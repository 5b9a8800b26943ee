// `recorder trace ID`: a record's hardware branch trace (recorderd
// --aux-trace), decoded with libipt against the record's sideband and the
// binaries by build-id: the calls and returns up to the end of the trace (for
// a crash, the faulting instruction) and the last instructions.
#include <CLI/CLI.hpp>

#include <cstdio>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "common/checked_json.h"
#include "common/terminal_escape.h"
#include "common/units.h"
#include "recorder/analysis/pt_trace.h"
#include "recorder/cli/cli.h"

namespace flightrec::recorder::cli {
namespace {

struct TraceArgs {
  std::string id;
  int64_t pid = -1, cpu = -1;
  std::string last;
  size_t insns = 16;
  bool json = false;
};

std::string Hex(const uint8_t* b, size_t n) {
  std::string s;
  for (size_t i = 0; i < n; ++i) s += fmt::format("{}{:02x}", i ? " " : "", b[i]);
  return s;
}

nlohmann::json CpuJson(const analysis::CpuFlow& f) {
  nlohmann::json flow = nlohmann::json::array(), last = nlohmann::json::array();
  for (const auto& n : f.steps) {
    nlohmann::json j = {{"kind", analysis::PtStepName(n.step.kind)},
                        {"ip", n.step.ip},
                        {"function", n.function},
                        {"depth", n.step.depth}};
    if (n.step.target != 0)
      j.update({{"target", n.step.target}, {"target_function", n.target_function}});
    if (n.time_ns) j["time_ns"] = *n.time_ns;
    if (!n.step.note.empty()) j["note"] = n.step.note;
    flow.push_back(std::move(j));
  }
  for (const auto& i : f.last) {
    last.push_back({{"ip", i.insn.ip},
                    {"function", i.function},
                    {"class", analysis::PtInsnClassName(i.insn.iclass)},
                    {"bytes", Hex(i.insn.raw, i.insn.size)}});
  }
  return {{"cpu", f.meta.cpu},
          {"pid", f.meta.pid},
          {"tid", f.meta.tid},
          {"comm", f.comm},
          {"trace_bytes", f.bytes},
          {"stream_offset", f.meta.stream_offset()},
          {"aux_head", f.meta.aux_head},
          {"aux_size", f.meta.aux_size},
          {"flags", AuxFlagNames(f.meta.flags)},
          {"instructions", f.decoded.instructions},
          {"gaps", f.decoded.gaps},
          {"instruction_limit_hit", f.decoded.insn_limit_hit},
          {"steps_dropped", f.decoded.steps_dropped + f.steps_before_window},
          {"image_notes", f.image_notes},
          {"flow", std::move(flow)},
          {"last_instructions", std::move(last)}};
}

void PrintCpu(const analysis::CpuFlow& f) {
  std::printf("cpu %u  pid %u tid %u (%s)  %llu bytes of trace, flags %s, %llu instructions\n",
              f.meta.cpu, f.meta.pid, f.meta.tid, EscapeForTerminal(f.comm).c_str(),
              static_cast<unsigned long long>(f.bytes),
              f.meta.flags ? AuxFlagNames(f.meta.flags).c_str() : "none",
              static_cast<unsigned long long>(f.decoded.instructions));
  for (const auto& n : f.image_notes) std::printf("  note: %s\n", EscapeForTerminal(n).c_str());
  if (f.decoded.insn_limit_hit) std::printf("  note: decoding stopped at the instruction limit\n");
  if (uint64_t d = f.decoded.steps_dropped + f.steps_before_window) {
    std::printf("  (%llu earlier steps left out)\n", static_cast<unsigned long long>(d));
  }
  const int base = f.steps.empty() ? 0 : f.steps.front().step.depth;
  for (const auto& n : f.steps) {
    const int indent = 2 + 2 * std::max(0, std::min(n.step.depth - base, 40));
    const std::string what = analysis::PtStepName(n.step.kind);
    std::string line;
    switch (n.step.kind) {
      case analysis::PtStep::Kind::kCall:
      case analysis::PtStep::Kind::kReturn:
        line = fmt::format("{} {} -> {}", what, n.function,
                           n.step.target ? n.target_function : "(trace ends)");
        break;
      case analysis::PtStep::Kind::kGap:
        line = fmt::format("gap: {}", n.step.note);
        break;
      default:
        line = fmt::format("{} at {}", what, n.step.ip ? n.function : "(ip suppressed)");
    }
    std::printf("%*s%s\n", indent, "", EscapeForTerminal(line).c_str());
  }
  if (!f.last.empty()) std::printf("  last %zu instructions:\n", f.last.size());
  for (const auto& i : f.last) {
    std::printf("    %#llx  %-10s %-28s %s\n", static_cast<unsigned long long>(i.insn.ip),
                analysis::PtInsnClassName(i.insn.iclass), Hex(i.insn.raw, i.insn.size).c_str(),
                EscapeForTerminal(i.function).c_str());
  }
}

Status TraceOn(const store::RecordReader& reader, const TraceArgs& a) {
  analysis::TraceQuery q;
  if (a.pid >= 0) q.pid = static_cast<uint32_t>(a.pid);
  if (a.cpu >= 0) q.cpu = static_cast<uint32_t>(a.cpu);
  if (!a.last.empty()) {
    ASSIGN_OR_RETURN(q.last_ns, ParseDurationNs(a.last));
    if (q.last_ns <= 0) return InvalidArgument("--last must be a positive duration (e.g. 2ms)");
  }
  if (a.insns > 4096) return InvalidArgument("--instructions must be at most 4096");
  q.decode.last_insns = a.insns;
  ASSIGN_OR_RETURN(auto t, analysis::DecodeRecordTrace(reader, q));
  if (a.json) {
    nlohmann::json cpus = nlohmann::json::array();
    for (const auto& f : t.cpus) cpus.push_back(CpuJson(f));
    nlohmann::json out = {{"id", reader.header().id}, {"pmu", t.pmu}, {"cpus", std::move(cpus)}};
    std::printf("%s\n", json::Dump(out).c_str());
    return OkStatus();
  }
  std::printf("record %s: %s trace of %zu CPU(s)\n", EscapeForTerminal(reader.header().id).c_str(),
              t.pmu.c_str(), t.cpus.size());
  for (const auto& f : t.cpus) PrintCpu(f);
  return OkStatus();
}

}  // namespace

Status ExerciseTraceCommand(const store::RecordReader& reader, int pick) {
  TraceArgs a;
  a.json = pick < 0 ? false : (pick % 2) == 1;
  Status st = TraceOn(reader, a);
  if (pick < 0) {
    a.json = true;
    Status st2 = TraceOn(reader, a);
    if (st.ok()) st = st2;
  }
  return st;
}

void AddTraceCommand(CLI::App& app, CliContext& ctx) {
  auto ta = std::make_shared<TraceArgs>();
  auto* cmd = app.add_subcommand(
      "trace",
      "A record's hardware branch trace (recorderd --aux-trace pt), decoded: the calls and "
      "returns up to the end of the trace (for a crash, the faulting instruction) and the last "
      "instructions executed. Needs the traced binaries, found by the build-ids the record names");
  cmd->add_option("ID", ta->id, "Record id, any unique part of it, or -1 for the newest")
      ->required();
  cmd->add_option("--pid", ta->pid, "Only the CPUs whose trace was cut while this process ran");
  cmd->add_option("--cpu", ta->cpu, "Only this CPU's trace");
  cmd->add_option("--last", ta->last,
                  "Only the calls and returns in this long before the end of each CPU's trace "
                  "(e.g. 2ms; needs timing packets in the trace)");
  cmd->add_option("--instructions", ta->insns, "Instructions to list before the end (max 4096)")
      ->capture_default_str();
  cmd->add_flag("--json", ta->json, "Machine-readable output");
  cmd->callback([&ctx, ta] {
    ctx.action = [&ctx, ta]() -> Status {
      ASSIGN_OR_RETURN(auto reader, ctx.OpenRecord(ta->id));
      // A crash record's trace is in the history dump the hook asked for.
      const std::string hid = json::Str(json::Object(reader->meta(), "crash"), "history");
      if (reader->FindSection(kSectionAuxTrace) == nullptr && !hid.empty() &&
          hid != reader->header().id) {
        ASSIGN_OR_RETURN(reader, ctx.OpenRecord(hid));
      }
      return TraceOn(*reader, *ta);
    };
  });
}

}  // namespace flightrec::recorder::cli
