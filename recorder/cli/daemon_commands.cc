// Placeholder registration for the daemon-facing commands; filled in by the
// recorder work (dump, status, trigger, record, report).
#include "recorder/cli/cli.h"

namespace flightrec::recorder::cli {

void AddDaemonCommands(CLI::App&, CliContext&) {}

}  // namespace flightrec::recorder::cli
