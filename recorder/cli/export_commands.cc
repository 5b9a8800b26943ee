// recorder export ID --format pprof|perfetto|chrome|folded|svg|perf|otlp -o FILE and
// recorder flamegraph ID -o FILE.svg: replay the record through the one
// pipeline into recorder/export's writers. Files are written through an
// AtomicOutputFile: put in place only when complete, so a failed export never
// leaves half a file, and never through a name another user planted.
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>
#include <iostream>
#include <optional>
#include <sstream>

#include <fmt/format.h>

#include "common/atomic_output_file.h"
#include "common/checked_json.h"
#include "common/terminal_escape.h"
#include "recorder/cli/cli.h"
#include "recorder/cli/query_args.h"
#include "recorder/export/export.h"

namespace flightrec::recorder::cli {
namespace {

struct ExportArgs : QueryArgs {
  std::string format;
  std::string output;
  std::string title;
  bool off_cpu = false;
};

// Replays the record into the exporter, which writes to out.
StatusOr<analysis::ReplayStats> ExportTo(const store::RecordReader& reader, const ExportArgs& a,
                                         const analysis::ReplayOptions& opts,
                                         exporter::Exporter* ex, std::ostream* out) {
  bool begun = false, has_off_cpu = false;
  ASSIGN_OR_RETURN(auto stats, a.Replay(
                                   reader, opts,
                                   [&](const analysis::RecordInfo& info) {
                                     ex->Begin(info, out);
                                     begun = true;
                                     has_off_cpu = info.off_cpu;
                                   },
                                   [&](const analysis::ResolvedSample& s) {
                                     // --off-cpu: the blocked intervals alone.
                                     if (a.off_cpu && s.off_cpu == nullptr) return;
                                     ex->Add(s);
                                   }));
  if (a.off_cpu && !has_off_cpu) {
    return InvalidArgument(
        "--off-cpu: this record has no off-CPU history (written without recorderd --off-cpu)");
  }
  if (begun) RETURN_IF_ERROR(ex->Finish());
  return stats;
}

Status RunExport(const CliContext& ctx, const ExportArgs& a) {
  exporter::ExportOptions eo;
  eo.title = a.title;
  ASSIGN_OR_RETURN(auto ex, exporter::MakeExporter(a.format, eo));
  ASSIGN_OR_RETURN(auto opts, a.Options());
  if (a.output.empty()) return InvalidArgument("give an output file with -o (or -o - for stdout)");
  if (a.off_cpu && a.format != "folded" && a.format != "pprof") {
    return InvalidArgument(
        "--off-cpu (the blocked intervals alone) is written by -f folded and pprof; pprof "
        "has an off_cpu sample type beside the on-CPU ones without it");
  }
  // pprof takes a record's off-CPU intervals as a sample type of their own,
  // Perfetto as thread states.
  opts.off_cpu = a.off_cpu || a.format == "pprof" || a.format == "perfetto";
  const bool to_stdout = a.output == "-";
  if (to_stdout && a.json) {
    return InvalidArgument("--json prints a summary on stdout: give the output a file with -o");
  }
  if (to_stdout && isatty(STDOUT_FILENO) &&
      (a.format == "pprof" || a.format == "perfetto" || a.format == "perf" || a.format == "otlp")) {
    return InvalidArgument(fmt::format("{} output is binary: give a file with -o", a.format));
  }
  if (to_stdout && a.format == "perf") {
    // perf reads a pipe only in its pipe format (perf.data-file-format.txt
    // "Pipe-mode data"), which this writer does not produce.
    struct stat st {};
    if (fstat(STDOUT_FILENO, &st) != 0 || !S_ISREG(st.st_mode)) {
      return InvalidArgument(
          "perf output needs a file (perf reads pipes in another format): "
          "give a file with -o");
    }
  }
  ASSIGN_OR_RETURN(auto reader, ctx.OpenRecord(a.id));
  std::optional<AtomicOutputFile> file;
  std::optional<FdStreambuf> buf;
  std::optional<std::ostream> file_out;
  std::ostream* out = &std::cout;
  if (!to_stdout) {
    ASSIGN_OR_RETURN(file, AtomicOutputFile::Open(a.output));
    out = &file_out.emplace(&buf.emplace(file->fd()));
  }
  ASSIGN_OR_RETURN(auto stats, ExportTo(*reader, a, opts, ex.get(), out));
  for (const auto& note : ex->Notes()) {
    std::fprintf(stderr, "%s\n", EscapeForTerminal(note).c_str());
  }
  if (file) {
    if (!file_out->flush()) return ErrnoStatus(fmt::format("writing {}", a.output));
    RETURN_IF_ERROR(file->Commit());
  }
  if (a.json) {
    struct stat st_out {};
    uint64_t bytes = file && fstat(file->fd(), &st_out) == 0 && S_ISREG(st_out.st_mode)
                         ? static_cast<uint64_t>(st_out.st_size)
                         : 0;
    nlohmann::json out = {{"record", reader->header().id},
                          {"output", a.output},
                          {"format", a.format},
                          {"samples", stats.samples},
                          {"bytes", bytes},
                          {"unwind", unwind::DescribeUnwindStats(stats.unwind)}};
    std::printf("%s\n", json::Dump(out, 2).c_str());
  } else if (!to_stdout) {
    std::fprintf(stderr, "wrote %s: %s of %llu samples\n", EscapeForTerminal(a.output).c_str(),
                 a.format.c_str(), static_cast<unsigned long long>(stats.samples));
  }
  // Incomplete stacks end in a "[truncated...]" frame in the file; here is
  // how many there are, why, and where they stopped.
  if (!a.json) {
    for (const auto& line : unwind::DescribeUnwindStats(stats.unwind)) {
      std::fprintf(stderr, "%s\n", EscapeForTerminal(line).c_str());
    }
  }
  return AllExecutablesGone(reader->meta(), stats.pids);
}

}  // namespace

Status ExerciseExportCommand(const store::RecordReader& reader, int pick) {
  Status first;
  const auto formats = exporter::ExportFormats();
  for (size_t i = 0; i < formats.size(); ++i) {
    if (pick >= 0 && i != static_cast<size_t>(pick) % formats.size()) continue;
    const auto& format = formats[i];
    ASSIGN_OR_RETURN(auto ex, exporter::MakeExporter(format, {}));
    ExportArgs a;
    a.progress = false;
    std::ostringstream out;
    auto st = ExportTo(reader, a, *a.Options(), ex.get(), &out);
    if (first.ok() && !st.ok()) first = st.status();
  }
  return first;
}

void AddExportCommands(CLI::App& app, CliContext& ctx) {
  auto ea = std::make_shared<ExportArgs>();
  auto* exp = app.add_subcommand(
      "export",
      "Write a record's samples in another tool's format:\n"
      "  pprof     profile.proto (gzip) for `go tool pprof`; per-sample timestamp_ns, pid,\n"
      "            tid, cpu and comm labels\n"
      "  perfetto  Perfetto's protobuf trace: per-thread stacks and per-CPU lanes\n"
      "            (open in ui.perfetto.dev)\n"
      "  chrome    Chrome trace-event JSON, same lanes (ui.perfetto.dev, chrome://tracing)\n"
      "  folded    folded stacks for flamegraph.pl, speedscope, inferno\n"
      "  svg       an interactive flame graph (same as `recorder flamegraph`)\n"
      "  perf      perf.data for `perf report -i`, `perf script -i`, hotspot; files are\n"
      "            found by build-id, kernel frames are named only in root's records\n"
      "  otlp      OpenTelemetry profiles (OTLP ProfilesData protobuf, profiles\n"
      "            v1development: a development signal) with thread, pid, cpu and\n"
      "            executable attributes and build-ids; also an OTLP/HTTP request body");
  ea->Register(exp);
  exp->add_option("--format,-f", ea->format, "pprof, perfetto, chrome, folded, svg, perf or otlp")
      ->required();
  exp->add_option("-o,--output", ea->output, "Output file (- for stdout)")->required();
  exp->add_flag("--off-cpu", ea->off_cpu,
                "Export the blocked intervals instead of the samples (records of recorderd "
                "--off-cpu; -f folded: each stack under an [off-cpu:S] or [off-cpu:D] frame, "
                "counted in microseconds off CPU; -f pprof: the off_cpu sample type alone). "
                "Without it, -f pprof of such a record has both: -sample_index=off_cpu "
                "(nanoseconds, with a state label S or D) beside the on-CPU samples");
  exp->callback([&ctx, ea] { ctx.action = [&ctx, ea] { return RunExport(ctx, *ea); }; });

  auto fa = std::make_shared<ExportArgs>();
  auto* fg = app.add_subcommand(
      "flamegraph",
      "Write a self-contained interactive SVG flame graph of a record (click to zoom, "
      "Ctrl-F to search)");
  fa->Register(fg);
  fa->format = "svg";
  fg->add_option("-o,--output", fa->output, "Output .svg file (- for stdout)")->required();
  fg->add_option("--title", fa->title, "Title shown above the graph (default: the record id)");
  fg->callback([&ctx, fa] { ctx.action = [&ctx, fa] { return RunExport(ctx, *fa); }; });
}

}  // namespace flightrec::recorder::cli
