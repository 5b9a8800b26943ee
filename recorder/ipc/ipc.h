// The control channel between `recorder` (and the coredump hook) and
// recorderd. Protocol (recorder/ipc/PROTOCOL.md): a Unix stream socket; each
// message is a 4-byte big-endian length then that many bytes of UTF-8 JSON.
//
// Server: Boost.Asio on the daemon's io thread. Every request's peer is
// identified by SO_PEERCRED and checked by a policy before its handler runs.
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

#include <nlohmann/json.hpp>

#include "common/scoped_fd.h"
#include "common/status.h"

namespace flightrec::recorder::ipc {

inline constexpr uint32_t kMaxMessage = 1 << 20;  // requests and responses

struct Peer {
  pid_t pid = 0;
  uid_t uid = 0;
  gid_t gid = 0;
};

using Handler = std::function<StatusOr<nlohmann::json>(const Peer&, const nlohmann::json& params)>;
// Returns true if the peer may use the socket at all.
using Policy = std::function<bool(const Peer&)>;

struct ServerOptions {
  std::string path;
  std::string group;  // optional: members may use the socket (mode 0660)
  std::chrono::milliseconds idle_timeout{5000};
  size_t max_connections = 256;
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

 private:
  class Connection;
  Server(boost::asio::io_context& io) : io_(io), acceptor_(io) {}
  void Accept();
  boost::asio::io_context& io_;
  boost::asio::local::stream_protocol::acceptor acceptor_;
  ServerOptions options_;
  gid_t group_gid_ = static_cast<gid_t>(-1);
  std::map<std::string, Handler> handlers_;
  Policy policy_;
  uint64_t requests_ = 0;
  uint64_t rejected_ = 0;
  size_t live_ = 0;
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
