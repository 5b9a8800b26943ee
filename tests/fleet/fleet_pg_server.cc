#include "tests/fleet/fleet_pg_server.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <grp.h>
#include <libpq-fe.h>
#include <netinet/in.h>
#include <poll.h>
#include <pwd.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/random.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <vector>

#include <fmt/format.h>
#include <gtest/gtest.h>

namespace flightrec::testing {
namespace {

constexpr const char* kBin = "/usr/lib/postgresql/15/bin";
constexpr const char* kUser = "postgres";  // created by Debian's postgresql-common
constexpr const char* kSuperuser = "flightrec";
constexpr const char* kReadyLine = "database system is ready to accept connections";

// A port nobody listens on now. The server may still lose it to a race: the
// caller retries with another.
int FreePort() {
  int s = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof(a);
  int port = -1;
  if (bind(s, reinterpret_cast<sockaddr*>(&a), sizeof(a)) == 0 &&
      getsockname(s, reinterpret_cast<sockaddr*>(&a), &len) == 0) {
    port = ntohs(a.sin_port);
  }
  close(s);
  return port;
}

// Forks argv as uid/gid with stdout+stderr to `out_fd`; the child dies with
// its parent. Returns the pid.
pid_t Spawn(const std::vector<std::string>& argv, uid_t uid, gid_t gid, int out_fd, rlim_t cpu_s) {
  pid_t pid = fork();
  if (pid != 0) return pid;
  dup2(out_fd, 1);
  dup2(out_fd, 2);
  int devnull = open("/dev/null", O_RDONLY);
  dup2(devnull, 0);
  if (setgroups(0, nullptr) != 0 || setgid(gid) != 0 || setuid(uid) != 0) _exit(126);
  // After the uid change, which clears it (prctl(2)).
  prctl(PR_SET_PDEATHSIG, SIGKILL);
  if (getppid() == 1) _exit(125);
  rlimit cpu{cpu_s, cpu_s};
  setrlimit(RLIMIT_CPU, &cpu);
  std::vector<char*> args;
  for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  execv(args[0], args.data());
  _exit(127);
}

// Waits for pidfd's process with a deadline; SIGKILL when it passes.
int WaitExit(pid_t pid, int pidfd, int timeout_ms) {
  pollfd p{pidfd, POLLIN, 0};
  if (poll(&p, 1, timeout_ms) == 0) kill(pid, SIGKILL);
  int status = 0;
  waitpid(pid, &status, 0);
  return status;
}

// glibc 2.36's <sys/pidfd.h> lacks extern "C": the system call directly.
int PidFd(pid_t pid) { return static_cast<int>(syscall(SYS_pidfd_open, pid, 0)); }

std::string RandomPassword() {
  unsigned char b[12];
  if (getrandom(b, sizeof(b), 0) != sizeof(b)) return "flightrec-test-password";
  std::string s;
  for (unsigned char c : b) s += fmt::format("{:02x}", c);
  return s;
}

}  // namespace

StatusOr<std::unique_ptr<PgServer>> PgServer::Start(const Options& o) {
  std::unique_ptr<PgServer> s(new PgServer());
  s->opts_ = o;
  passwd* pw = getpwnam(kUser);
  if (pw == nullptr) {
    return NotFound("no 'postgres' account: scripts/setup.sh installs postgresql-15");
  }
  s->uid_ = pw->pw_uid;
  s->gid_ = pw->pw_gid;
  char tmpl[] = "/tmp/flightrec-pg-XXXXXX";
  if (mkdtemp(tmpl) == nullptr) return ErrnoStatus("mkdtemp");
  s->dir_ = tmpl;
  if (chown(tmpl, s->uid_, s->gid_) != 0) return ErrnoStatus("chown " + s->dir_);
  s->password_ = RandomPassword();
  const std::string pwfile = s->dir_ + "/pwfile";
  {
    std::ofstream(pwfile) << s->password_ << "\n";
    if (chown(pwfile.c_str(), s->uid_, s->gid_) != 0 || chmod(pwfile.c_str(), 0600) != 0) {
      return ErrnoStatus("pwfile");
    }
  }
  // initdb: output to a file we read only when it fails.
  const std::string initlog = s->dir_ + "/initdb.log";
  int logfd = open(initlog.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (logfd < 0) return ErrnoStatus("initdb log");
  pid_t ipid = Spawn({std::string(kBin) + "/initdb", "-D", s->dir_ + "/data", "-U", kSuperuser,
                      "--pwfile=" + pwfile, "--auth=scram-sha-256", "--encoding=UTF8", "--locale=C",
                      "--no-sync", "--no-instructions"},
                     s->uid_, s->gid_, logfd, 120);
  close(logfd);
  int ipfd = PidFd(ipid);
  int status = WaitExit(ipid, ipfd, o.start_timeout_s * 1000);
  close(ipfd);
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
    std::ifstream in(initlog);
    std::string log((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    return Internal(fmt::format("initdb failed (status {}): {}", status, log));
  }
  Status st;
  for (int attempt = 0; attempt < 3; ++attempt) {
    s->port_ = FreePort();
    st = s->Launch();
    if (st.ok()) return s;
    if (st.message().find("could not bind") == std::string::npos &&
        st.message().find("Address already in use") == std::string::npos) {
      break;
    }
  }
  return st;
}

Status PgServer::Launch() {
  if (pid_ > 0) return OkStatus();
  int fds[2];
  if (pipe2(fds, O_CLOEXEC) != 0) return ErrnoStatus("pipe");
  std::vector<std::string> argv = {
      std::string(kBin) + "/postgres",
      "-D",
      dir_ + "/data",
      "-k",
      dir_,
      "-p",
      std::to_string(port_),
      "-c",
      "listen_addresses=127.0.0.1",
      // Bounded: a test server needs little memory or few connections.
      "-c",
      "shared_buffers=16MB",
      "-c",
      "max_connections=40",
      "-c",
      "work_mem=4MB",
      "-c",
      "max_wal_size=256MB",
      "-c",
      std::string("fsync=") + (opts_.fsync ? "on" : "off"),
      "-c",
      std::string("synchronous_commit=") + (opts_.fsync ? "on" : "off"),
      "-c",
      std::string("full_page_writes=") + (opts_.fsync ? "on" : "off"),
      "-c",
      "logging_collector=off",
      "-c",
      "lc_messages=C",
  };
  {
    std::lock_guard<std::mutex> l(mu_);
    eof_ = false;
    log_mark_ = log_.size();
  }
  pid_ = Spawn(argv, uid_, gid_, fds[1], 1800);
  close(fds[1]);
  pidfd_ = PidFd(pid_);
  // Drains the server's stderr for its whole life (a full pipe would block
  // its logging) and wakes WaitReady on each line.
  drain_ = std::thread([this, fd = fds[0]] {
    char buf[4096];
    ssize_t n;
    while ((n = read(fd, buf, sizeof(buf))) > 0 || (n < 0 && errno == EINTR)) {
      if (n <= 0) continue;
      std::lock_guard<std::mutex> l(mu_);
      log_.append(buf, static_cast<size_t>(n));
      cv_.notify_all();
    }
    close(fd);
    std::lock_guard<std::mutex> l(mu_);
    eof_ = true;
    cv_.notify_all();
  });
  Status st = WaitReady(opts_.start_timeout_s);
  if (!st.ok()) static_cast<void>(Stop());
  return st;
}

Status PgServer::WaitReady(int timeout_s) {
  std::unique_lock<std::mutex> l(mu_);
  bool ok = cv_.wait_for(l, std::chrono::seconds(timeout_s), [&] {
    return eof_ || log_.find(kReadyLine, log_mark_) != std::string::npos;
  });
  if (ok && !eof_) return OkStatus();
  return Unavailable(fmt::format("postgres did not become ready within {} s{}: {}", timeout_s,
                                 eof_ ? " (it exited)" : "", log_.substr(log_mark_)));
}

Status PgServer::Stop() {
  if (pid_ <= 0) return OkStatus();
  kill(pid_, SIGINT);  // fast shutdown
  int status = WaitExit(pid_, pidfd_, 60'000);
  close(pidfd_);
  pidfd_ = -1;
  pid_ = -1;
  // The pipe closes when the last backend is gone.
  if (drain_.joinable()) drain_.join();
  if (!WIFEXITED(status)) return Internal(fmt::format("postgres ended with status {}", status));
  return OkStatus();
}

std::string PgServer::Log() const {
  std::lock_guard<std::mutex> l(mu_);
  return log_;
}

PgServer::~PgServer() {
  static_cast<void>(Stop());
  if (!dir_.empty()) {
    std::error_code ec;
    std::filesystem::remove_all(dir_, ec);
  }
}

std::string PgServer::ConnInfo(const std::string& db) const {
  return fmt::format("host=127.0.0.1 port={} dbname={} user={}", port_, db, kSuperuser);
}

StatusOr<std::string> PgServer::CreateDatabase(const std::string& name) {
  const char* keys[] = {"host", "port", "dbname", "user", "password", nullptr};
  const std::string port = std::to_string(port_);
  const char* values[] = {"127.0.0.1", port.c_str(),      "postgres",
                          kSuperuser,  password_.c_str(), nullptr};
  PGconn* c = PQconnectdbParams(keys, values, 0);
  std::string err;
  if (PQstatus(c) != CONNECTION_OK) {
    err = PQerrorMessage(c);
  } else {
    // Test code with our own names: quoted as an identifier all the same.
    char* ident = PQescapeIdentifier(c, name.c_str(), name.size());
    PGresult* r = PQexec(c, (std::string("CREATE DATABASE ") + ident).c_str());
    if (PQresultStatus(r) != PGRES_COMMAND_OK) err = PQresultErrorMessage(r);
    PQclear(r);
    PQfreemem(ident);
  }
  PQfinish(c);
  if (!err.empty()) return Internal("CREATE DATABASE " + name + ": " + err);
  return ConnInfo(name);
}

namespace {

std::unique_ptr<PgServer>& SharedSlot() {
  static std::unique_ptr<PgServer> s;
  return s;
}

class PgEnvironment : public ::testing::Environment {
 public:
  void TearDown() override { SharedSlot().reset(); }
};
const auto* const kEnv = ::testing::AddGlobalTestEnvironment(new PgEnvironment);

}  // namespace

PgServer& SharedPgServer() {
  auto& s = SharedSlot();
  if (!s) {
    auto started = PgServer::Start();
    if (!started.ok()) {
      std::fprintf(stderr, "cannot start PostgreSQL: %s\n", started.status().ToString().c_str());
      std::abort();  // every test here needs it: a loud failure, never a skip
    }
    s = std::move(*started);
  }
  return *s;
}

std::string PgScalar(const std::string& conninfo, const std::string& sql) {
  std::string ci = conninfo + " password=" + SharedPgServer().password();
  PGconn* c = PQconnectdb(ci.c_str());
  std::string out = "(error)";
  if (PQstatus(c) == CONNECTION_OK) {
    PGresult* r = PQexec(c, sql.c_str());
    if (PQresultStatus(r) == PGRES_TUPLES_OK && PQntuples(r) == 1) out = PQgetvalue(r, 0, 0);
    PQclear(r);
  }
  PQfinish(c);
  return out;
}

}  // namespace flightrec::testing
