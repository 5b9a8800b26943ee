// Raw AF_UNIX stream sockets for tests that play a hostile or broken client
// or server of recorderd's control socket.
#pragma once

#include <string>

namespace flightrec::testing {

// A stream socket connected to `path`; -1 if it could not connect. The
// caller closes it.
int ConnectUnix(const std::string& path);

// A stream socket bound to `path` and listening (backlog `backlog`); -1 on
// failure. The caller closes it.
int ListenUnix(const std::string& path, int backlog);

}  // namespace flightrec::testing
