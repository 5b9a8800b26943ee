// The control channel between `recorder` (and the coredump hook) and
// recorderd. Protocol (recorder/ipc/PROTOCOL.md): a Unix stream socket; each
// message is a 4-byte big-endian length then that many bytes of UTF-8 JSON.
//
// Server: Boost.Asio on the daemon's io thread. Every connection's peer is
// identified by SO_PEERCRED and checked by a policy when it is accepted,
// before any of its bytes are read.
// A malformed, oversized or slow client gets an error (where one can still be
// sent) and is disconnected; the daemon carries on.
#pragma once

#include <sys/types.h>

// Boost 1.74's asio/awaitable.hpp uses std::exchange without <utility>.
#include <utility>

#include <boost/asio.hpp>
#include <chrono>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "common/scoped_fd.h"
#include "common/status.h"

namespace flightrec::recorder::ipc {

inline constexpr uint32_t kMaxMessage = 1 << 20;  // requests and responses
// Nesting of arrays/objects a request may have: checked on the raw bytes
// before parsing, so a deeply nested frame cannot exhaust the stack of the
// parser, the copy or the destructor.
inline constexpr size_t kMaxJsonDepth = 32;
// A request's `id` is echoed in the answer: a scalar, a string at most this long.
inline constexpr size_t kMaxIdBytes = 256;
// Request bytes held for all connections together while their frames arrive.
inline constexpr size_t kMaxBufferedRequestBytes = 16u << 20;

struct Peer {
  pid_t pid = 0;
  uid_t uid = 0;
  gid_t gid = 0;
  // Supplementary groups when it connected (SO_PEERGROUPS): with uid and
  // gid, the credentials recorderd opens a file with on the peer's behalf.
  std::vector<gid_t> groups;
};

using Handler = std::function<StatusOr<nlohmann::json>(const Peer&, const nlohmann::json& params)>;
// Returns true if the peer may use the socket at all.
using Policy = std::function<bool(const Peer&)>;

// InvalidArgument if `text` nests arrays/objects deeper than max_depth
// (brackets inside strings are data). Linear, allocates nothing.
Status CheckJsonDepth(std::string_view text, size_t max_depth);

struct ServerOptions {
  std::string path;
  std::string group;  // optional: members may use the socket (mode 0660)
  std::chrono::milliseconds idle_timeout{5000};
  size_t max_connections = 256;
  // Connections one non-root uid may hold at once (refused peers included),
  // so that one user cannot take every slot...
  size_t max_connections_per_uid = 32;
  // ...and slots beyond max_connections only root may use: the coredump
  // hook is served even when every other slot is taken.
  size_t root_reserved_connections = 16;
  // Longest pause of accept() when the process is out of descriptors
  // (EMFILE/ENFILE): pending connections wait in the backlog meanwhile.
  std::chrono::milliseconds max_accept_backoff{1000};
};

// Handlers run on the io thread, one at a time: a dump (tens of ms) delays
// other requests by that much, which keeps dumps, the process table and the
// rings consistent without locks.
class Server {
 public:
  static StatusOr<std::unique_ptr<Server>> Create(boost::asio::io_context& io,
                                                  const ServerOptions& options);
  ~Server();
  void Handle(const std::string& method, Handler handler) {
    handlers_[method] = std::move(handler);
  }
  void set_policy(Policy p) { policy_ = std::move(p); }
  // Default policy: root, the daemon's own uid, or the configured group.
  bool DefaultPolicy(const Peer& p) const;
  void Start();
  void Stop();
  uint64_t requests() const { return requests_; }
  uint64_t rejected() const { return rejected_; }
  size_t connections() const { return live_; }
  // accept() failures for want of descriptors (or memory), each followed by a pause.
  uint64_t accept_backoffs() const { return accept_backoffs_; }
  // Connections closed at once: over max_connections (or a uid's share), or
  // shed at EMFILE.
  uint64_t shed() const { return shed_; }

 private:
  class Connection;
  Server(boost::asio::io_context& io) : io_(io), acceptor_(io), accept_timer_(io) {}
  void Accept();
  void OnAcceptError(const boost::system::error_code& ec);
  void ShedOne();
  bool Allowed(const Peer& p) const { return policy_ ? policy_(p) : DefaultPolicy(p); }
  boost::asio::io_context& io_;
  boost::asio::local::stream_protocol::acceptor acceptor_;
  boost::asio::steady_timer accept_timer_;
  std::chrono::milliseconds backoff_{0};
  // Held open so that at EMFILE one descriptor can be freed to accept and
  // close a pending connection (its client learns at once) instead of
  // leaving it to spin the loop.
  ScopedFd reserve_fd_;
  ServerOptions options_;
  gid_t group_gid_ = static_cast<gid_t>(-1);
  std::map<std::string, Handler> handlers_;
  Policy policy_;
  uint64_t requests_ = 0;
  uint64_t rejected_ = 0;
  size_t live_ = 0;
  std::map<uid_t, size_t> live_per_uid_;  // non-root uids with connections
  size_t buffered_ = 0;                   // request bytes held by all connections
  uint64_t accept_backoffs_ = 0;
  uint64_t shed_ = 0;
  bool stopped_ = false;
  friend class Connection;
};

// Synchronous client; every call has a deadline.
class Client {
 public:
  static StatusOr<std::unique_ptr<Client>> Connect(const std::string& path,
                                                   std::chrono::milliseconds timeout);
  ~Client();
  StatusOr<nlohmann::json> Call(const std::string& method, const nlohmann::json& params,
                                std::chrono::milliseconds timeout);

 private:
  Client() = default;
  ScopedFd fd_;
  std::string path_;
  uint64_t next_id_ = 1;
};

// Frame helpers (exposed for tests).
std::string Frame(const std::string& payload);

}  // namespace flightrec::recorder::ipc
