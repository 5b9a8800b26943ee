#include <unistd.h>

#include <cstdio>
#include <cstdlib>

#include "common/terminal_escape.h"
#include "recorder/cli/cli.h"
#include "recorder/cli/fleet_commands.h"
#include "recorder/cli/usage.h"
#include "recorder/symbolize/debuginfod.h"

namespace flightrec::recorder::cli {

int RecorderMain(int argc, char** argv) {
  // `--fleet CONFIG crash list|info` are the fleet index's own commands;
  // `--fleet CONFIG report|script|... ID` are the local ones on a record
  // fetched from the fleet.
  if (WantsFleet(argc, argv) && !IsRecordCommand(argc, argv)) return FleetMain(argc, argv);
  CLI::App app{
      "recorder: the flightrec command line.\n"
      "Dump, list and inspect flight-recorder records: the last seconds of what every CPU\n"
      "and thread did, stored by recorderd and by the core-dump hook."};
  app.footer(
      "Exit status: 0 success, 1 error (also: a --pid/--tid/--since/--until that matches\n"
      "no sample), 2 usage error (an unknown command or option, a missing or malformed\n"
      "value). `record` exits 127 when CMD is not found, 126 when it cannot be run.");
  app.require_subcommand(1);
  // --store and --socket go before or after the command, as perf and
  // coredumpctl users type them: a subcommand passes options it does not
  // know up to the app (subcommands inherit fallthrough when created).
  app.fallthrough();
  app.set_help_all_flag("--help-all", "Show help for every command");
  CliContext ctx;
  const char* env_store = std::getenv("FLIGHTREC_STORE");
  ctx.store_dir = env_store && *env_store ? env_store : store::DefaultStoreDir();
  const char* env_sock = std::getenv("FLIGHTREC_SOCKET");
  ctx.socket_path = env_sock && *env_sock ? env_sock : "/run/flightrec/control.sock";
  app.add_option("--store", ctx.store_dir,
                 "Store directory (default: $FLIGHTREC_STORE, /var/lib/flightrec for root, "
                 "$XDG_STATE_HOME/flightrec otherwise)")
      ->capture_default_str();
  app.add_option("--socket", ctx.socket_path,
                 "recorderd control socket (default: $FLIGHTREC_SOCKET or "
                 "/run/flightrec/control.sock)")
      ->capture_default_str();
  std::string fleet_config;
  app.add_option("--fleet", fleet_config,
                 "With report, timeline, script, export or flamegraph: the record comes from "
                 "the fleet this config names (its index in PostgreSQL, its object in S3, "
                 "cached in CacheDir= and checked by SHA-256), not from the store")
      ->type_name("CONFIG");
  bool no_debuginfod = false;
  app.add_flag("--no-debuginfod", no_debuginfod,
               "Never fetch missing debug info from the debuginfod servers in $DEBUGINFOD_URLS "
               "(otherwise fetched by build-id when it is set, into $DEBUGINFOD_CACHE_PATH, "
               "each server given at most $DEBUGINFOD_TIMEOUT seconds)");
  AddStoreCommands(app, ctx);
  AddDaemonCommands(app, ctx);
  AddRecordCommand(app, ctx);
  AddScriptCommands(app, ctx);
  AddReportCommands(app, ctx);
  AddExportCommands(app, ctx);
  AddCrashCommands(app, ctx);
  AddTraceCommand(app, ctx);
  AddCoredumpCommands(app, ctx);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return ExitOnParseError(app, e);
  }
  if (!ctx.action) return 0;
  symbolize::InstallDebuginfod(!no_debuginfod);
  if (!fleet_config.empty()) {
    ctx.open_record = [&fleet_config](const std::string& id) {
      return OpenFleetRecord(fleet_config, id);
    };
  }
  Status st;
  try {
    st = ctx.action();
  } catch (const std::exception& e) {
    // Every decoder returns a Status; this is the last line of defence, so
    // that a case one of them missed is an error message, never an abort
    // (the fuzz harness does not catch, so such cases still get found).
    st = Internal(std::string("unexpected error: ") + e.what());
  }
  if (!st.ok()) {
    // Messages quote names from records and files: escaped like the output.
    std::fprintf(stderr, "recorder: error: %s\n", EscapeForTerminal(st.message()).c_str());
    if (ctx.exit_status != 0) return ctx.exit_status;
    return st.code() == StatusCode::kInvalidArgument ? kExitUsage : 1;
  }
  return 0;
}

}  // namespace flightrec::recorder::cli
