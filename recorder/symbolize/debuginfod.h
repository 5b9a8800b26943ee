// Separate debug files by build-id from debuginfod servers, through elfutils'
// libdebuginfod: the servers are $DEBUGINFOD_URLS, its cache
// $DEBUGINFOD_CACHE_PATH (default ~/.cache/debuginfod_client) and each
// server's time limit $DEBUGINFOD_TIMEOUT (default 90 s), all read by the
// library. A separate library: linking libdebuginfod runs libcurl's global
// setup at start-up, which recorderd and the core hook have no use for.
#pragma once

#include <string>

namespace flightrec::recorder::symbolize {

// Installs the debuginfod fetcher (SetDebugFileFetcher) when $DEBUGINFOD_URLS
// is set and `enabled`; true if it did. A build-id is asked for once per
// process. The first failure that is not "no such file" (a server down or
// too slow) is said once on stderr, and no server is asked again: an
// unreachable server costs at most its timeout, once ($DEBUGINFOD_RETRY_LIMIT
// defaults to 0 here).
bool InstallDebuginfod(bool enabled);

// A build-id as libdebuginfod may be given it in hex: 2 to 128 lower-case
// hex digits, an even number of them.
bool IsQueryableBuildId(const std::string& hex);

}  // namespace flightrec::recorder::symbolize
