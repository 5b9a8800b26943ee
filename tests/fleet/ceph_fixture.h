// One single-node Ceph cluster + radosgw for a whole test binary: started by
// a GoogleTest Environment before the first test (tests/fleet/ceph_cluster.sh,
// ~30 s) and stopped after the last, and by the script's watchdog if this
// process dies first. Tests reach it through Cluster().
#pragma once

#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <string>
#include <vector>

#include "recorder/fleet/s3_client.h"

namespace flightrec::testing {

struct CephCluster {
  std::filesystem::path dir;
  std::map<std::string, std::string> env;  // DIR/env of ceph_cluster.sh
  std::string endpoint, access_key, secret_key, bucket, region, conf;
  long startup_ms = 0;
};

inline std::string SourcePath(const std::string& rel) {
  const char* s = std::getenv("FLIGHTREC_SOURCE_DIR");
  return std::string(s ? s : FLIGHTREC_FLEET_SOURCE_DIR) + "/" + rel;
}

// Runs argv to completion; returns its exit status (-1 if it did not exit).
inline int RunToExit(const std::vector<std::string>& args, const std::string& log = "") {
  pid_t pid = fork();
  if (pid == 0) {
    if (!log.empty()) {
      FILE* f = std::fopen(log.c_str(), "a");
      if (f) {
        dup2(fileno(f), 1);
        dup2(fileno(f), 2);
      }
    }
    std::vector<char*> argv;
    for (auto& a : args) argv.push_back(const_cast<char*>(a.c_str()));
    argv.push_back(nullptr);
    execvp(argv[0], argv.data());
    _exit(127);
  }
  int st = 0;
  if (waitpid(pid, &st, 0) != pid) return -1;
  return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

inline CephCluster*& ClusterPtr() {
  static CephCluster* c = nullptr;
  return c;
}
inline CephCluster& Cluster() { return *ClusterPtr(); }

inline std::string ClusterScript() { return SourcePath("tests/fleet/ceph_cluster.sh"); }

class CephEnvironment : public ::testing::Environment {
 public:
  void SetUp() override {
    char tmpl[] = "/tmp/flightrec-ceph.XXXXXX";
    ASSERT_NE(mkdtemp(tmpl), nullptr);
    auto* c = new CephCluster;
    c->dir = tmpl;
    ClusterPtr() = c;
    int rc = RunToExit({ClusterScript(), "start", c->dir.string(), std::to_string(getpid())});
    ASSERT_EQ(rc, 0) << "ceph_cluster.sh start failed; logs in " << c->dir;
    std::ifstream in(c->dir / "env");
    std::string line;
    while (std::getline(in, line)) {
      auto eq = line.find('=');
      if (eq != std::string::npos) c->env[line.substr(0, eq)] = line.substr(eq + 1);
    }
    c->endpoint = c->env["FLEET_S3_ENDPOINT"];
    c->access_key = c->env["FLEET_S3_ACCESS_KEY"];
    c->secret_key = c->env["FLEET_S3_SECRET_KEY"];
    c->bucket = c->env["FLEET_S3_BUCKET"];
    c->region = c->env["FLEET_S3_REGION"];
    c->conf = c->env["FLEET_CEPH_CONF"];
    c->startup_ms = std::atol(c->env["FLEET_CEPH_STARTUP_MS"].c_str());
    ASSERT_FALSE(c->endpoint.empty());
    std::printf("[ ceph     ] single-node cluster + radosgw up in %ld ms at %s\n", c->startup_ms,
                c->endpoint.c_str());
  }
  void TearDown() override {
    if (!ClusterPtr()) return;
    RunToExit({ClusterScript(), "stop", Cluster().dir.string()});
    if (!::testing::UnitTest::GetInstance()->Failed()) {
      std::filesystem::remove_all(Cluster().dir);
    } else {
      std::printf("[ ceph     ] logs kept in %s\n", Cluster().dir.c_str());
    }
  }
};

inline fleet::S3Options ClusterS3Options() {
  fleet::S3Options o;
  o.endpoint = Cluster().endpoint;
  o.bucket = Cluster().bucket;
  o.region = Cluster().region;
  o.access_key = Cluster().access_key;
  o.secret_key = Cluster().secret_key;
  return o;
}

}  // namespace flightrec::testing
