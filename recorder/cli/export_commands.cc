// recorder export / flamegraph: placeholder until recorder/export lands.
#include "recorder/cli/cli.h"

namespace flightrec::recorder::cli {
void AddExportCommands(CLI::App&, CliContext&) {}
}  // namespace flightrec::recorder::cli
