// A directory a privileged process writes and trusts (the core hook's store,
// the fleet record cache): it and every directory above it must belong to
// root or the caller and be writable by nobody else. In a directory another
// user controls, that user could swap in symlinks or replace files between
// our check and our use (a store under /tmp or a user's home, a cache made
// 0777).
#pragma once

#include <string>

#include "common/status.h"

namespace flightrec {

// Creates the missing directories of `dir` (0700, so that no other user can
// create one first), then checks `dir` and each directory above it: a real
// directory (symlinks refused), owned by root or the effective uid, not
// writable by group or others (a sticky directory such as /tmp is allowed
// above `dir`, not as `dir`). `what` names the directory in messages
// ("store", "record cache"). kPermissionDenied for an ownership or mode
// refusal.
Status CheckPrivateDir(const std::string& dir, const std::string& what);

}  // namespace flightrec
