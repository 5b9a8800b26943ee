// The hook's settings (systemd-coredump's coredump-config): the kernel's
// values from argv, options, and the settings file `recorder coredump
// install` writes. Declarations of the public parts are in coredump.h.
#pragma once

#include "coredump-hook/coredump.h"

namespace flightrec::coredump {

// Parses the hook's command line and settings file into *o and *args.
// Returns -1 to go on, else the exit code to return (--help, refusals).
int ParseHookCommandLine(int argc, char** argv, HookOptions* o, HookArgs* args);

}  // namespace flightrec::coredump
