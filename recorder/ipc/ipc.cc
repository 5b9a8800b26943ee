#include "recorder/ipc/ipc.h"

#include <fcntl.h>
#include <grp.h>
#include <poll.h>
#include <pwd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <array>
#include <cstring>
#include <utility>

#include <fmt/format.h>

#include "common/checked_json.h"
#include "common/units.h"

namespace flightrec::recorder::ipc {

namespace asio = boost::asio;
using stream = asio::local::stream_protocol;

std::string Frame(const std::string& payload) {
  uint32_t n = static_cast<uint32_t>(payload.size());
  std::string out(4, '\0');
  out[0] = static_cast<char>(n >> 24);
  out[1] = static_cast<char>(n >> 16);
  out[2] = static_cast<char>(n >> 8);
  out[3] = static_cast<char>(n);
  return out + payload;
}

namespace {

nlohmann::json ErrorResponse(const nlohmann::json& id, const std::string& code,
                             const std::string& msg) {
  return {{"v", 1}, {"id", id}, {"ok", false}, {"error", {{"code", code}, {"message", msg}}}};
}

// The protocol's error codes; every other StatusCode travels as "internal".
constexpr std::pair<StatusCode, const char*> kWireCodes[] = {
    {StatusCode::kInvalidArgument, "invalid_argument"},
    {StatusCode::kNotFound, "not_found"},
    {StatusCode::kPermissionDenied, "permission_denied"},
    {StatusCode::kNoSpace, "no_space"},
    {StatusCode::kUnavailable, "unavailable"},
    {StatusCode::kUnsupported, "unsupported"},
    {StatusCode::kResourceExhausted, "limit_exceeded"},
};

std::string CodeName(StatusCode c) {
  for (const auto& [code, name] : kWireCodes) {
    if (code == c) return name;
  }
  return "internal";
}

}  // namespace

Status CheckJsonDepth(std::string_view text, size_t max_depth) {
  // One scanner for untrusted JSON (brackets outside strings), shared with
  // the record reader: no allocation, no parse.
  if (json::Scan(text).depth > max_depth) {
    return InvalidArgument(fmt::format("JSON nested deeper than {} arrays/objects", max_depth));
  }
  return OkStatus();
}

namespace {

// A request's id is echoed back: only a scalar of bounded size.
bool ValidId(const nlohmann::json& id) {
  if (id.is_null() || id.is_number()) return true;
  return id.is_string() && id.get_ref<const std::string&>().size() <= kMaxIdBytes;
}

// The peer's supplementary groups (none if they cannot be read: a file is
// then opened for it with fewer rights, never more).
std::vector<gid_t> PeerGroups(int fd) {
  std::vector<gid_t> groups(16);
  for (int tries = 0; tries < 2; ++tries) {
    socklen_t len = static_cast<socklen_t>(groups.size() * sizeof(gid_t));
    if (getsockopt(fd, SOL_SOCKET, SO_PEERGROUPS, groups.data(), &len) == 0) {
      groups.resize(len / sizeof(gid_t));
      return groups;
    }
    if (errno != ERANGE) break;
    groups.resize(len / sizeof(gid_t));  // ERANGE: len is the size needed
  }
  return {};
}

}  // namespace

// One client connection. The peer is checked (SO_PEERCRED + policy) when it
// is accepted, before a byte is read: a refused peer gets its answer and has
// whatever it sends discarded into a fixed buffer. An authorized peer's frame
// is read as its bytes arrive (memory follows what was sent, not what the
// header claims), its nesting depth is checked on the raw bytes, and only
// then is it parsed. Any protocol error answers once (if possible) and
// closes. A timer bounds every read and write.
class Server::Connection : public std::enable_shared_from_this<Server::Connection> {
 public:
  Connection(Server* s, stream::socket sock) : server_(s), sock_(std::move(sock)), timer_(s->io_) {}
  ~Connection() {
    --server_->live_;
    if (counted_uid_) {
      auto it = server_->live_per_uid_.find(peer_.uid);
      if (it != server_->live_per_uid_.end() && --it->second == 0) {
        server_->live_per_uid_.erase(it);
      }
    }
    Release();
  }

  void Start() {
    ucred cred{};
    socklen_t len = sizeof(cred);
    if (getsockopt(sock_.native_handle(), SOL_SOCKET, SO_PEERCRED, &cred, &len) == 0) {
      peer_ = {cred.pid, cred.uid, cred.gid, PeerGroups(sock_.native_handle())};
    } else {
      peer_.uid = static_cast<uid_t>(-1);
    }
    const ServerOptions& o = server_->options_;
    bool root = peer_.uid == 0;
    if (server_->live_ > o.max_connections + (root ? o.root_reserved_connections : 0)) {
      ++server_->shed_;
      return Close();  // over the limit: closed unanswered
    }
    if (!root) {
      size_t& mine = server_->live_per_uid_[peer_.uid];
      if (mine >= o.max_connections_per_uid) {
        ++server_->shed_;
        // Answered (it usually fits the socket buffer) and closed at once,
        // so the excess costs this uid's slots nothing.
        out_ = Frame(ErrorResponse(nullptr, "limit_exceeded",
                                   fmt::format("uid {} already has {} connections to recorderd, "
                                               "the limit per uid",
                                               peer_.uid, mine))
                         .dump());
        (void)!send(sock_.native_handle(), out_.data(), out_.size(), MSG_NOSIGNAL | MSG_DONTWAIT);
        return Close();
      }
      ++mine;
      counted_uid_ = true;
    }
    if (!server_->Allowed(peer_)) return Refuse();
    ReadHeader();
  }

 private:
  void Arm() {
    timer_.expires_after(server_->options_.idle_timeout);
    auto self = shared_from_this();
    timer_.async_wait([self](const boost::system::error_code& ec) {
      if (!ec) {
        boost::system::error_code ignored;
        self->sock_.close(ignored);  // slow or silent client
      }
    });
  }

  void Refuse() {
    ++server_->rejected_;
    out_ = Frame(ErrorResponse(nullptr, "permission_denied",
                               fmt::format("uid {} may not use recorderd (need root{})", peer_.uid,
                                           server_->options_.group.empty()
                                               ? ""
                                               : " or group " + server_->options_.group))
                     .dump());
    Arm();  // one idle timeout bounds the whole refused connection
    auto self = shared_from_this();
    asio::async_write(sock_, asio::buffer(out_),
                      [self](const boost::system::error_code& ec, size_t) {
                        if (ec) return self->Close();
                        self->discarded_ = 0;
                        self->Discard();
                      });
  }

  // Reads and drops what a refused client sends (at most one frame's worth),
  // so that it reads its answer rather than failing to send its request.
  void Discard() {
    auto self = shared_from_this();
    sock_.async_read_some(asio::buffer(chunk_),
                          [self](const boost::system::error_code& ec, size_t n) {
                            self->discarded_ += n;
                            if (ec || self->discarded_ > 4 + size_t{kMaxMessage}) {
                              return self->Close();
                            }
                            self->Discard();
                          });
  }

  void ReadHeader() {
    Arm();
    auto self = shared_from_this();
    asio::async_read(
        sock_, asio::buffer(hdr_), [self](const boost::system::error_code& ec, size_t) {
          if (ec) return self->Close();
          uint32_t n = (uint32_t{self->hdr_[0]} << 24) | (uint32_t{self->hdr_[1]} << 16) |
                       (uint32_t{self->hdr_[2]} << 8) | uint32_t{self->hdr_[3]};
          if (n == 0 || n > kMaxMessage) {
            return self->Fail(nullptr, "invalid_request",
                              fmt::format("message length {} is outside 1..{}", n, kMaxMessage));
          }
          self->expected_ = n;
          self->ReadBody();
        });
  }

  void ReadBody() {
    auto self = shared_from_this();
    size_t want = std::min(chunk_.size(), expected_ - body_.size());
    sock_.async_read_some(
        asio::buffer(chunk_.data(), want), [self](const boost::system::error_code& ec, size_t n) {
          if (ec) return self->Close();
          if (self->server_->buffered_ + n > kMaxBufferedRequestBytes) {
            return self->Fail(nullptr, "unavailable",
                              fmt::format("recorderd holds {} bytes of unfinished requests "
                                          "(limit {}); try again",
                                          self->server_->buffered_, kMaxBufferedRequestBytes));
          }
          self->server_->buffered_ += n;
          self->held_ += n;
          self->body_.append(self->chunk_.data(), n);
          if (self->body_.size() < self->expected_) return self->ReadBody();
          self->timer_.cancel();
          self->Dispatch();
        });
  }

  // Gives back the bytes of the finished (or abandoned) request.
  void Release() {
    server_->buffered_ -= held_;
    held_ = 0;
    std::string().swap(body_);
  }

  void Dispatch() {
    ++server_->requests_;
    Status depth = CheckJsonDepth(body_, kMaxJsonDepth);
    if (!depth.ok()) {
      Release();
      return Fail(nullptr, "invalid_request", depth.message());
    }
    nlohmann::json req = nlohmann::json::parse(body_, nullptr, /*allow_exceptions=*/false);
    Release();
    if (req.is_discarded() || !req.is_object()) {
      return Fail(nullptr, "invalid_request", "request is not a JSON object");
    }
    nlohmann::json id = req.contains("id") ? req["id"] : nlohmann::json(nullptr);
    if (!ValidId(id)) {
      return Fail(
          nullptr, "invalid_request",
          fmt::format("'id' must be null, a number or a string of at most {} bytes", kMaxIdBytes));
    }
    if (!req.contains("method") || !req["method"].is_string()) {
      return Fail(id, "invalid_request", "request has no string 'method'");
    }
    if (req.contains("params") && !req["params"].is_object()) {
      return Fail(id, "invalid_request", "'params' must be an object");
    }
    std::string method = req["method"].get<std::string>();
    auto it = server_->handlers_.find(method);
    if (it == server_->handlers_.end()) {
      return Fail(id, "unknown_method", fmt::format("unknown method '{:.64}'", method));
    }
    nlohmann::json params = req.value("params", nlohmann::json::object());
    StatusOr<nlohmann::json> result = Internal("handler threw");
    try {
      result = it->second(peer_, params);
    } catch (const std::exception& e) {
      result = InvalidArgument(std::string("bad parameters: ") + e.what());
    }
    nlohmann::json resp;
    if (result.ok()) {
      resp = {{"v", 1}, {"id", id}, {"ok", true}, {"result", *result}};
    } else {
      resp = ErrorResponse(id, CodeName(result.status().code()), result.status().message());
    }
    Write(resp, /*close_after=*/false, id);
  }

  void Fail(const nlohmann::json& id, const std::string& code, const std::string& msg) {
    Write(ErrorResponse(id, code, msg), /*close_after=*/true, id);
  }

  void Write(const nlohmann::json& resp, bool close_after, const nlohmann::json& id) {
    std::string payload = resp.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
    if (payload.size() > kMaxMessage) {
      // Clients refuse frames over the limit: say so instead.
      payload = ErrorResponse(id, "internal",
                              fmt::format("the answer ({} bytes) exceeds the {} byte limit",
                                          payload.size(), kMaxMessage))
                    .dump();
    }
    out_ = Frame(payload);
    Arm();  // a client that does not read its answer is slow too
    auto self = shared_from_this();
    asio::async_write(sock_, asio::buffer(out_),
                      [self, close_after](const boost::system::error_code& ec, size_t) {
                        self->timer_.cancel();
                        std::string().swap(self->out_);
                        if (ec || close_after) return self->Close();
                        self->ReadHeader();
                      });
  }

  void Close() {
    boost::system::error_code ignored;
    timer_.cancel();
    sock_.close(ignored);
  }

  Server* server_;
  stream::socket sock_;
  asio::steady_timer timer_;
  Peer peer_;
  uint8_t hdr_[4] = {};
  size_t expected_ = 0;  // body length the header announced
  size_t held_ = 0;      // body bytes counted in server_->buffered_
  size_t discarded_ = 0;
  bool counted_uid_ = false;  // in server_->live_per_uid_
  std::array<char, 16384> chunk_{};
  std::string body_;
  std::string out_;
};

StatusOr<std::unique_ptr<Server>> Server::Create(asio::io_context& io,
                                                 const ServerOptions& options) {
  std::unique_ptr<Server> s(new Server(io));
  s->options_ = options;
  if (options.path.empty() || options.path.size() >= sizeof(sockaddr_un::sun_path)) {
    return InvalidArgument(fmt::format("socket path '{}' is empty or too long", options.path));
  }
  if (!options.group.empty()) {
    struct group* g = getgrnam(options.group.c_str());
    if (g == nullptr) return InvalidArgument(fmt::format("no such group '{}'", options.group));
    s->group_gid_ = g->gr_gid;
  }
  std::string dir = options.path.substr(0, options.path.rfind('/'));
  if (!dir.empty()) mkdir(dir.c_str(), 0755);
  // A socket file left by a crashed daemon is stale only if nothing answers.
  struct stat st {};
  if (lstat(options.path.c_str(), &st) == 0) {
    if (!S_ISSOCK(st.st_mode)) {
      return InvalidArgument(
          fmt::format("{} exists and is not a socket; refusing to replace it", options.path));
    }
    stream::socket probe(io);
    boost::system::error_code ec;
    probe.connect(stream::endpoint(options.path), ec);
    if (!ec) {
      return Status(StatusCode::kAlreadyExists,
                    fmt::format("another recorderd is already listening on {}", options.path));
    }
    unlink(options.path.c_str());
  }
  boost::system::error_code ec;
  s->acceptor_.open(stream(), ec);
  if (!ec) s->acceptor_.bind(stream::endpoint(options.path), ec);
  if (!ec) s->acceptor_.listen(asio::socket_base::max_listen_connections, ec);
  if (ec) return ErrnoStatus(ec.value(), fmt::format("listening on {}", options.path));
  // 0660 root:group: only root and the group may connect; SO_PEERCRED is
  // checked for every request anyway.
  if (chmod(options.path.c_str(), 0660) != 0) {
    return ErrnoStatus(fmt::format("chmod 0660 {}", options.path));
  }
  if (s->group_gid_ != static_cast<gid_t>(-1)) {
    if (chown(options.path.c_str(), geteuid(), s->group_gid_) != 0) {
      return ErrnoStatus(fmt::format("chown {} to group {}", options.path, options.group));
    }
  }
  return s;
}

Server::~Server() { Stop(); }

bool Server::DefaultPolicy(const Peer& p) const {
  if (p.uid == 0 || p.uid == geteuid()) return true;
  if (group_gid_ == static_cast<gid_t>(-1)) return false;
  if (p.gid == group_gid_) return true;
  struct passwd* pw = getpwuid(p.uid);
  if (pw == nullptr) return false;
  int n = 64;
  std::vector<gid_t> groups(static_cast<size_t>(n));
  if (getgrouplist(pw->pw_name, pw->pw_gid, groups.data(), &n) < 0) return false;
  for (int i = 0; i < n; ++i) {
    if (groups[static_cast<size_t>(i)] == group_gid_) return true;
  }
  return false;
}

void Server::Start() {
  reserve_fd_.reset(open("/dev/null", O_RDONLY | O_CLOEXEC));
  Accept();
}

void Server::Stop() {
  if (stopped_) return;
  stopped_ = true;
  boost::system::error_code ec;
  accept_timer_.cancel();
  acceptor_.close(ec);
  unlink(options_.path.c_str());
}

void Server::Accept() {
  acceptor_.async_accept([this](const boost::system::error_code& ec, stream::socket sock) {
    if (ec == asio::error::operation_aborted || stopped_) return;
    if (ec) return OnAcceptError(ec);
    backoff_ = std::chrono::milliseconds(0);
    ++live_;
    std::make_shared<Connection>(this, std::move(sock))->Start();
    Accept();
  });
}

// accept() failed. Out of descriptors (or memory) the pending connection
// stays in the backlog and the listening socket stays readable: accepting
// again at once spins the loop at a full core (and starves signals). Shed
// that one connection with the reserve descriptor, then pause accepting,
// doubling the pause up to max_accept_backoff while it lasts.
void Server::OnAcceptError(const boost::system::error_code& ec) {
  int e = ec.value();
  bool resources = e == EMFILE || e == ENFILE || e == ENOBUFS || e == ENOMEM;
  if (resources) {
    ++accept_backoffs_;
    ShedOne();
    backoff_ = std::min(std::max(backoff_ * 2, std::chrono::milliseconds(50)),
                        options_.max_accept_backoff);
  } else {
    // ECONNABORTED and the like concern one connection: go on, but never
    // in a tight loop.
    backoff_ = std::chrono::milliseconds(1);
  }
  accept_timer_.expires_after(backoff_);
  accept_timer_.async_wait([this](const boost::system::error_code& tec) {
    if (tec || stopped_) return;
    Accept();
  });
}

void Server::ShedOne() {
  if (!reserve_fd_) return;
  reserve_fd_.reset();
  pollfd p{acceptor_.native_handle(), POLLIN, 0};
  if (poll(&p, 1, 0) == 1) {
    int fd = accept4(acceptor_.native_handle(), nullptr, nullptr, SOCK_CLOEXEC | SOCK_NONBLOCK);
    if (fd >= 0) {
      close(fd);  // its client sees the connection closed, not a hang
      ++shed_;
    }
  }
  reserve_fd_.reset(open("/dev/null", O_RDONLY | O_CLOEXEC));
}

// ------------------------------------------------------------ client

StatusOr<std::unique_ptr<Client>> Client::Connect(const std::string& path,
                                                  std::chrono::milliseconds timeout) {
  std::unique_ptr<Client> c(new Client());
  c->path_ = path;
  c->fd_.reset(socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0));
  if (!c->fd_) return ErrnoStatus("socket");
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  if (path.size() >= sizeof(addr.sun_path)) return InvalidArgument("socket path too long");
  std::memcpy(addr.sun_path, path.c_str(), path.size());
  int64_t deadline = MonotonicNs() + timeout.count() * 1000000;
  for (;;) {
    if (connect(c->fd_.get(), reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0) return c;
    int err = errno;
    if (err == EAGAIN || err == EINPROGRESS || err == EINTR) {
      // A Unix socket whose listen backlog is full: retry until the deadline.
      if (MonotonicNs() >= deadline) {
        return Unavailable(fmt::format("recorderd did not accept a connection within {} ms ({})",
                                       timeout.count(), path));
      }
      pollfd p{c->fd_.get(), POLLOUT, 0};
      poll(&p, 1, 10);
      continue;
    }
    if (err == ENOENT) {
      return Unavailable(
          fmt::format("recorderd is not running (no socket at {}); start it with "
                      "`systemctl start recorderd` or `recorderd --foreground`",
                      path));
    }
    if (err == ECONNREFUSED) {
      return Unavailable(
          fmt::format("recorderd is not running: {} is a stale socket left by a "
                      "daemon that died; start it with `systemctl start recorderd`",
                      path));
    }
    if (err == EACCES || err == EPERM) {
      return Status(StatusCode::kPermissionDenied,
                    fmt::format("permission denied connecting to {}: recorderd accepts root and "
                                "the group given by its --group option",
                                path),
                    err);
    }
    return ErrnoStatus(err, fmt::format("connecting to recorderd at {}", path));
  }
}

Client::~Client() = default;

namespace {

Status IoWait(int fd, short events, int64_t deadline_ns, const std::string& path) {
  for (;;) {
    int64_t left = (deadline_ns - MonotonicNs()) / 1000000;
    if (left <= 0) {
      return Unavailable(fmt::format("recorderd did not answer in time (socket {})", path));
    }
    pollfd p{fd, events, 0};
    int r = poll(&p, 1, static_cast<int>(left));
    if (r > 0) return OkStatus();
    if (r < 0 && errno != EINTR) return ErrnoStatus("poll");
  }
}

}  // namespace

StatusOr<nlohmann::json> Client::Call(const std::string& method, const nlohmann::json& params,
                                      std::chrono::milliseconds timeout) {
  int64_t deadline = MonotonicNs() + timeout.count() * 1000000;
  nlohmann::json req = {{"v", 1}, {"id", next_id_++}, {"method", method}, {"params", params}};
  // A request may quote a crashed program's name (bytes, not UTF-8): sent
  // with U+FFFD rather than throwing.
  std::string out = Frame(req.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace));
  size_t sent = 0;
  while (sent < out.size()) {
    RETURN_IF_ERROR(IoWait(fd_.get(), POLLOUT, deadline, path_));
    ssize_t n = send(fd_.get(), out.data() + sent, out.size() - sent, MSG_NOSIGNAL);
    if (n < 0) {
      if (errno == EAGAIN || errno == EINTR) continue;
      return ErrnoStatus(fmt::format("sending to recorderd at {}", path_));
    }
    sent += static_cast<size_t>(n);
  }
  std::string in;
  size_t want = 4;
  bool have_len = false;
  while (in.size() < want) {
    RETURN_IF_ERROR(IoWait(fd_.get(), POLLIN, deadline, path_));
    char buf[65536];
    ssize_t n = recv(fd_.get(), buf, std::min(sizeof(buf), want - in.size()), 0);
    if (n < 0) {
      if (errno == EAGAIN || errno == EINTR) continue;
      return ErrnoStatus(fmt::format("reading from recorderd at {}", path_));
    }
    if (n == 0) return Unavailable("recorderd closed the connection without answering");
    in.append(buf, static_cast<size_t>(n));
    if (!have_len && in.size() == 4) {
      uint32_t len = (uint32_t{static_cast<uint8_t>(in[0])} << 24) |
                     (uint32_t{static_cast<uint8_t>(in[1])} << 16) |
                     (uint32_t{static_cast<uint8_t>(in[2])} << 8) |
                     uint32_t{static_cast<uint8_t>(in[3])};
      if (len == 0 || len > kMaxMessage) return Corrupt("recorderd sent an invalid frame");
      have_len = true;
      want = 4 + len;
    }
  }
  std::string_view body(in.data() + 4, in.size() - 4);
  if (!CheckJsonDepth(body, kMaxJsonDepth * 4).ok()) {
    return Corrupt("recorderd sent JSON nested too deeply");
  }
  auto resp = nlohmann::json::parse(body, nullptr, false);
  if (resp.is_discarded() || !resp.is_object()) return Corrupt("recorderd sent invalid JSON");
  // Checked reads (value() throws on a wrong type): whoever answers on the
  // socket cannot make a client such as the root core hook abort.
  auto field = [&](const nlohmann::json& j, const char* k) -> const nlohmann::json* {
    auto it = j.find(k);
    return it == j.end() ? nullptr : &*it;
  };
  if (const auto* ok = field(resp, "ok"); ok != nullptr && ok->is_boolean() && ok->get<bool>()) {
    const auto* result = field(resp, "result");
    // Any JSON (trigger_list answers an array); callers check its shape.
    return result != nullptr ? *result : nlohmann::json::object();
  }
  const auto* e = field(resp, "error");
  nlohmann::json err = e != nullptr && e->is_object() ? *e : nlohmann::json::object();
  const auto* c = field(err, "code");
  const auto* m = field(err, "message");
  std::string code = c != nullptr && c->is_string() ? c->get<std::string>() : "internal";
  std::string msg = m != nullptr && m->is_string() ? m->get<std::string>() : "unknown error";
  StatusCode sc = StatusCode::kInternal;
  if (code == "permission_denied")
    sc = StatusCode::kPermissionDenied;
  else if (code == "invalid_argument" || code == "invalid_request" || code == "unknown_method")
    sc = StatusCode::kInvalidArgument;
  else if (code == "not_found")
    sc = StatusCode::kNotFound;
  else if (code == "no_space")
    sc = StatusCode::kNoSpace;
  else if (code == "unavailable")
    sc = StatusCode::kUnavailable;
  else if (code == "unsupported")
    sc = StatusCode::kUnsupported;
  else if (code == "limit_exceeded")
    sc = StatusCode::kResourceExhausted;
  return Status(sc, msg);
}

}  // namespace flightrec::recorder::ipc
