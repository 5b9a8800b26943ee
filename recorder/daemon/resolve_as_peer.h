// ResolveUprobeTargetAs: a trigger's file opened and parsed with the asking
// peer's credentials instead of recorderd's (root's). A `--group` member
// must learn nothing through a trigger about a file they could not read
// themselves: whether it exists behind a closed directory, whether it is
// ELF, where its functions are. A child process becomes the peer (uid, gid,
// supplementary groups), resolves the spec there and hands back the fd it
// opened (SCM_RIGHTS), so that the probe goes on that very file.
//
// Thread: the daemon's io thread, which it blocks for at most `timeout`.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <string>
#include <vector>

#include "common/status.h"
#include "recorder/daemon/elf_symbol.h"

namespace flightrec::recorder {

struct Credentials {
  uid_t uid = 0;
  gid_t gid = 0;
  std::vector<gid_t> groups;  // supplementary
};

// ResolveUprobeTarget(spec) as `who`. Also refused: a file on a FUSE
// filesystem (its server, possibly the peer, could stall recorderd inside
// perf_event_open), and a child that does not answer within `timeout`.
StatusOr<UprobeTarget> ResolveUprobeTargetAs(const std::string& spec, const Credentials& who,
                                             std::chrono::milliseconds timeout);

}  // namespace flightrec::recorder
