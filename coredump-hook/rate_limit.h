// Cores stored per hour, per crashed uid, per executable of that uid and for
// everyone (systemd-coredump's coredump-ratelimit): a crash storm keeps
// metadata, not cores.
#pragma once

#include <sys/types.h>

#include <string>

#include "coredump-hook/coredump.h"

namespace flightrec::coredump {

// is within every budget; returns why not otherwise. The budgets are keyed
// on what a user cannot mint for free: the crashed uid (a copied or renamed
// binary is still its owner's), plus a ceiling for everyone; the budget per
// executable is kept inside the uid's (a crash loop of one program leaves
// room for that user's other programs). Hooks run concurrently during a
// crash storm, so counting and reserving happen under one lock. The counts
// live in one file in the store, opened without following a symlink and
// rewritten in place (a torn line after a power cut only loses a count).
std::string ReserveCoreSlot(const HookOptions& o, uid_t uid, const std::string& raw_exe);

}  // namespace flightrec::coredump
