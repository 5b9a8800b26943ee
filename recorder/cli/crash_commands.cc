// recorder crash / coredump: placeholder until coredump-hook lands.
#include "recorder/cli/cli.h"

namespace flightrec::recorder::cli {
void AddCrashCommands(CLI::App&, CliContext&) {}
}  // namespace flightrec::recorder::cli
