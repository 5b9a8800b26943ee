// The `recorder` command line: one CLI11 app, command groups registered from
// separate files (store commands here; daemon, report and crash commands in
// their own files). Error policy: commands return Status; only RecorderMain
// turns it into a message on stderr and a non-zero exit code.
#pragma once

#include <CLI/CLI.hpp>

#include <functional>
#include <memory>
#include <string>

#include "common/status.h"
#include "store/store.h"

namespace flightrec::recorder::cli {

struct CliContext {
  std::string store_dir;    // --store / FLIGHTREC_STORE / DefaultStoreDir()
  std::string socket_path;  // --socket / FLIGHTREC_SOCKET
  // The selected subcommand's action, run after parsing succeeds.
  std::function<Status()> action;
  // The exit status of a failed action that has one of its own (`record` of a
  // command that cannot run: 126 or 127, as a shell); 0: from its Status.
  int exit_status = 0;

  // Opens the store for reading (no creation). A store that does not exist
  // yet is reported as such.
  // full_recovery: walk the whole store even if unchanged since the last
  // reconcile (`recorder verify`).
  StatusOr<std::unique_ptr<store::Store>> OpenStore(bool create = false,
                                                    bool full_recovery = false) const;

  // How report/script/timeline/export open their record: from the store,
  // unless `open_record` is set (`recorder --fleet CONFIG report ID` sets it
  // to fetch the record from the fleet), so both run the same pipeline.
  std::function<StatusOr<std::unique_ptr<store::RecordReader>>(const std::string& id)> open_record;
  StatusOr<std::unique_ptr<store::RecordReader>> OpenRecord(const std::string& id) const;
};

void AddStoreCommands(CLI::App& app, CliContext& ctx);
// Registered by the daemon-facing parts (dump, status, trigger, record).
void AddDaemonCommands(CLI::App& app, CliContext& ctx);
// recorder record -- CMD (foreground, unprivileged).
void AddRecordCommand(CLI::App& app, CliContext& ctx);
// recorder script / export (replay through the attribution pipeline).
void AddScriptCommands(CLI::App& app, CliContext& ctx);
// recorder report / timeline (replay through analysis::Replay).
void AddReportCommands(CLI::App& app, CliContext& ctx);
// recorder export --format pprof|perfetto|chrome|folded, recorder flamegraph.
void AddExportCommands(CLI::App& app, CliContext& ctx);
// recorder trace ID (a record's hardware trace, decoded).
void AddTraceCommand(CLI::App& app, CliContext& ctx);
// recorder crash list|info|core|debug.
void AddCrashCommands(CLI::App& app, CliContext& ctx);
// recorder coredump install|uninstall (administrative: links the hook's
// configuration; not part of the query library).
void AddCoredumpCommands(CLI::App& app, CliContext& ctx);

// `recorder crash info` of one crash record, printed to stdout: `meta` is the
// record's index metadata, `hreader` the linked history record `hid` (nullptr
// when there is none: `history_error` then says why, if it should). Every
// value is checked: a hostile record prints what it can, never crashes.
Status PrintCrashInfo(const std::string& id, const nlohmann::json& meta,
                      const store::RecordReader& reader, const std::string& hid,
                      const store::RecordReader* hreader, std::string history_error, bool as_json,
                      bool show_maps, int bins);

// Every output variant of a command group on one record, printed to stdout,
// returning the first error: the fuzz harness's way into each command's
// decode path (fuzz/record_decode.cc). Report: each --sort, text and --json;
// timeline: --by function/comm, text and --json. Script: text and --json,
// re-attributed and --live. Export: every format. Crash: list (text, --json)
// and info (text, --json, --maps) with the record as its own history.
// pick < 0 runs every variant; pick >= 0 only variant pick % (their number):
// the fuzzer runs one variant of each group per input, chosen by the input's
// bytes, so that an input costs ~5 replays of the record instead of ~25.
Status ExerciseReportCommands(const store::RecordReader& reader, int pick = -1);
Status ExerciseScriptCommand(const store::RecordReader& reader, int pick = -1);
Status ExerciseExportCommand(const store::RecordReader& reader, int pick = -1);
Status ExerciseCrashCommands(const store::RecordReader& reader, int pick = -1);
// trace: text and --json.
Status ExerciseTraceCommand(const store::RecordReader& reader, int pick = -1);

// Prints rows as an aligned text table. Cells are escaped for the terminal
// (EscapeForTerminal), so any text from a record may be put in them.
std::string FormatTable(const std::vector<std::string>& header,
                        const std::vector<std::vector<std::string>>& rows);

int RecorderMain(int argc, char** argv);

}  // namespace flightrec::recorder::cli
