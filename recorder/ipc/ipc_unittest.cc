#include "recorder/ipc/ipc.h"

#include <gtest/gtest.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <chrono>
#include <thread>

#include "tests/support/files.h"

namespace flightrec::recorder::ipc {
namespace {

using namespace std::chrono_literals;

// Runs an io_context with a server on a background thread for one test.
class ServerFixture : public ::testing::Test {
 protected:
  void StartServer(std::chrono::milliseconds idle = 300ms) {
    ServerOptions o;
    o.path = dir_.path() + "/s.sock";
    o.idle_timeout = idle;
    auto s = Server::Create(io_, o);
    ASSERT_TRUE(s.ok()) << s.status().message();
    server_ = std::move(*s);
    server_->Handle("echo",
                    [](const Peer& p, const nlohmann::json& params) -> StatusOr<nlohmann::json> {
                      return nlohmann::json{{"params", params}, {"uid", p.uid}};
                    });
    server_->Handle("fail", [](const Peer&, const nlohmann::json&) -> StatusOr<nlohmann::json> {
      return NotFound("nothing here");
    });
    server_->Start();
    thread_ = std::thread([this] { io_.run(); });
  }
  void TearDown() override {
    io_.stop();
    if (thread_.joinable()) thread_.join();
  }
  std::string path() const { return dir_.path() + "/s.sock"; }
  flightrec::testing::TempDir dir_;
  boost::asio::io_context io_;
  std::unique_ptr<Server> server_;
  std::thread thread_;
};

TEST_F(ServerFixture, RequestsRoundTripOnOneConnection) {
  StartServer();
  auto c = Client::Connect(path(), 2s);
  ASSERT_TRUE(c.ok()) << c.status().message();
  for (int i = 0; i < 3; ++i) {
    auto r = (*c)->Call("echo", {{"n", i}}, 2s);
    ASSERT_TRUE(r.ok()) << r.status().message();
    EXPECT_EQ((*r)["params"]["n"], i);
    EXPECT_EQ((*r)["uid"], geteuid());
  }
  auto f = (*c)->Call("fail", nlohmann::json::object(), 2s);
  EXPECT_EQ(f.status().code(), StatusCode::kNotFound);
  EXPECT_EQ(f.status().message(), "nothing here");
}

TEST_F(ServerFixture, UnknownMethodIsAnErrorNotACrash) {
  StartServer();
  auto c = Client::Connect(path(), 2s);
  ASSERT_TRUE(c.ok());
  auto r = (*c)->Call("frobnicate", nlohmann::json::object(), 2s);
  EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(r.status().message().find("unknown method"), std::string::npos);
  auto c2 = Client::Connect(path(), 2s);
  EXPECT_TRUE((*c2)->Call("echo", nlohmann::json::object(), 2s).ok());
}

TEST_F(ServerFixture, SocketIsPrivateAndASecondServerIsRefused) {
  StartServer();
  struct stat st {};
  ASSERT_EQ(stat(path().c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0660u);
  boost::asio::io_context other;
  ServerOptions o;
  o.path = path();
  auto s = Server::Create(other, o);
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.status().code(), StatusCode::kAlreadyExists);
}

TEST(IpcTest, StaleSocketIsReplacedAndClientsSaySo) {
  flightrec::testing::TempDir d;
  std::string p = d.path() + "/stale.sock";
  int fd = socket(AF_UNIX, SOCK_STREAM, 0);
  sockaddr_un a{};
  a.sun_family = AF_UNIX;
  std::strncpy(a.sun_path, p.c_str(), sizeof(a.sun_path) - 1);
  ASSERT_EQ(bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a)), 0);
  close(fd);  // a socket file nobody listens on: what a crashed daemon leaves
  auto c = Client::Connect(p, 1s);
  ASSERT_FALSE(c.ok());
  EXPECT_NE(c.status().message().find("stale socket"), std::string::npos) << c.status().message();
  boost::asio::io_context io;
  ServerOptions o;
  o.path = p;
  auto s = Server::Create(io, o);
  EXPECT_TRUE(s.ok()) << s.status().message();
  auto missing = Client::Connect(d.path() + "/none.sock", 1s);
  EXPECT_NE(missing.status().message().find("not running"), std::string::npos);
  o.path = d.path();  // a directory, not a socket
  EXPECT_FALSE(Server::Create(io, o).ok());
}

TEST_F(ServerFixture, OversizedAndSilentClientsAreDisconnected) {
  StartServer(200ms);
  int fd = socket(AF_UNIX, SOCK_STREAM, 0);
  sockaddr_un a{};
  a.sun_family = AF_UNIX;
  std::strncpy(a.sun_path, path().c_str(), sizeof(a.sun_path) - 1);
  ASSERT_EQ(connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a)), 0);
  const char huge[4] = {'\x10', 0, 0, 0};  // 256 MiB claimed
  ASSERT_EQ(send(fd, huge, 4, 0), 4);
  std::string got;
  char buf[4096];
  ssize_t n;
  while ((n = recv(fd, buf, sizeof(buf), 0)) > 0) got.append(buf, static_cast<size_t>(n));
  EXPECT_NE(got.find("invalid_request"), std::string::npos);
  close(fd);
  // Silent: connect and say nothing; the server closes after its idle timeout.
  fd = socket(AF_UNIX, SOCK_STREAM, 0);
  ASSERT_EQ(connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a)), 0);
  timeval tv{5, 0};
  setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
  EXPECT_EQ(recv(fd, buf, 1, 0), 0);
  close(fd);
  auto c = Client::Connect(path(), 2s);
  EXPECT_TRUE((*c)->Call("echo", nlohmann::json::object(), 2s).ok());
}

TEST(IpcTest, JsonDepthIsCheckedOnRawBytesAndStringsAreData) {
  EXPECT_TRUE(CheckJsonDepth("{\"a\":[1,{\"b\":[]}]}", 4).ok());
  EXPECT_FALSE(CheckJsonDepth("{\"a\":[1,{\"b\":[]}]}", 3).ok());
  EXPECT_TRUE(CheckJsonDepth("{\"s\":\"[[[[[[{{{{\"}", 1).ok());
  // An escaped quote does not end the string.
  EXPECT_TRUE(CheckJsonDepth("{\"s\":\"\\\"[[[[\"}", 1).ok());
  EXPECT_FALSE(CheckJsonDepth(std::string(1'000'000, '['), kMaxJsonDepth).ok());
  // Unbalanced closers do not make room for deeper nesting later.
  EXPECT_FALSE(CheckJsonDepth("]]]]" + std::string(4, '['), 3).ok());
}

}  // namespace
}  // namespace flightrec::recorder::ipc
