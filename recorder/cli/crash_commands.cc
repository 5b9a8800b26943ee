// recorder crash list|info|core|debug (modelled on coredumpctl): the
// registration of the commands implemented in crash_list.cc, crash_info.cc,
// crash_core.cc and crash_debug.cc, and the fuzz harness's entry.
#include <memory>
#include <string>

#include "recorder/cli/crash_internal.h"
#include "recorder/cli/panic_info.h"

namespace flightrec::recorder::cli {

Status ExerciseCrashCommands(const store::RecordReader& reader, int pick) {
  const auto& h = reader.header();
  // The list is cheap (no replay): always both forms.
  RETURN_IF_ERROR(PrintCrashList({{h.id, h.created_ns, reader.file_size(), reader.meta()}}, false));
  RETURN_IF_ERROR(PrintCrashList({{h.id, h.created_ns, reader.file_size(), reader.meta()}}, true));
  for (bool as_json : {false, true}) {
    RETURN_IF_ERROR(PrintCrashList(
        {{h.id, h.created_ns, reader.file_size(), reader.meta(), "panic"}}, as_json));
  }
  Status first;
  for (bool as_json : {false, true}) {
    if (pick >= 0 && as_json != (pick % 2 == 1)) continue;
    // The record is its own history: a crash record's sections and a
    // history's events are decoded from the same bytes.
    Status st = PrintCrashInfo(h.id, reader.meta(), reader, h.id, &reader, "", as_json,
                               /*show_maps=*/true, /*bins=*/20);
    if (first.ok() && !st.ok()) first = st;
    // And as a kernel panic's record (any record: the panic section may be
    // missing or hostile).
    st = PrintPanicInfo(h.id, reader, as_json, /*bins=*/20);
    if (first.ok() && !st.ok()) first = st;
  }
  return first;
}

void AddCrashCommands(CLI::App& app, CliContext& ctx) {
  auto* crash =
      app.add_subcommand("crash", "Stored crashes: cores with their history (like coredumpctl)");
  crash->require_subcommand(1);
  auto la = std::make_shared<CrashListArgs>();
  auto* list = crash->add_subcommand(
      "list", "Crashes and kernel panics in the store, oldest first (KIND crash or panic)");
  list->add_flag("-1", la->newest, "Only the newest");
  list->add_option("--since", la->since, "Only crashes at or after T");
  list->add_option("--pid", la->pid, "Only this process id");
  list->add_option("--exe", la->exe, "Only this executable path");
  la->labels.Register(list);
  list->add_flag("--json", la->json, "Machine-readable output");
  list->callback([&ctx, la] { ctx.action = [&ctx, la] { return RunCrashList(ctx, *la); }; });

  auto ia = std::make_shared<CrashInfoArgs>();
  auto* info = crash->add_subcommand(
      "info",
      "Metadata, backtrace of each thread, and the crashing thread's last seconds (top "
      "functions, timeline)");
  info->add_option("ID", ia->id, "Crash id, any unique part of it, or -1 for the newest")
      ->required();
  info->add_flag("--json", ia->json, "Machine-readable output (includes the mappings)");
  info->add_flag("--maps", ia->maps, "Also print /proc/PID/maps as it was at the crash");
  info->add_option("--bins", ia->bins, "Time bins of the history timeline")->capture_default_str();
  info->callback([&ctx, ia] { ctx.action = [&ctx, ia] { return RunCrashInfo(ctx, *ia); }; });

  auto cid = std::make_shared<std::string>();
  auto cout = std::make_shared<std::string>();
  auto cjson = std::make_shared<bool>(false);
  auto* core = crash->add_subcommand("core", "Write a crash's core file, decompressed");
  core->add_option("ID", *cid, "Crash id, any unique part of it, or -1")->required();
  core->add_option("-o,--output", *cout, "Output file")->required();
  core->add_flag("--json", *cjson, "Machine-readable output (the file written and its size)");
  core->callback([&ctx, cid, cout, cjson] {
    ctx.action = [&ctx, cid, cout, cjson] { return RunCrashCore(ctx, *cid, *cout, *cjson); };
  });

  auto did = std::make_shared<std::string>();
  auto dargs = std::make_shared<std::string>();
  auto* debug = crash->add_subcommand(
      "debug",
      "Start gdb on the executable and the core (decompressed to a private directory "
      "under $TMPDIR or /var/tmp, removed when gdb exits)");
  debug->add_option("ID", *did, "Crash id, any unique part of it, or -1")->required();
  debug->add_option("-A,--debugger-arguments", *dargs,
                    "Extra gdb arguments, split like a shell would, e.g. "
                    "\"-batch -ex 'thread apply all bt'\"");
  auto djson = std::make_shared<bool>(false);
  debug->add_flag("--json", *djson, "After gdb exits, print how it ended as JSON");
  debug->callback([&ctx, did, dargs, djson] {
    ctx.action = [&ctx, did, dargs, djson] { return RunCrashDebug(ctx, *did, *dargs, *djson); };
  });
}

}  // namespace flightrec::recorder::cli
