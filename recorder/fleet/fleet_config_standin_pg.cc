// A stand-in for LoadFleetConfig (fleet_config.h) in branches that have the
// PostgreSQL half of fleet mode but not yet the real loader
// (recorder/fleet/fleet_config.cc, the shipping half's). It is linked only
// when the target flightrec_recorder_fleet does not exist (top-level
// CMakeLists.txt), so once both halves are merged it is never built: delete
// it then. It reads the same file format, with the same rule that secrets
// come only from a root-owned CredentialsFile= no one else can read.
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <map>
#include <sstream>

#include <fmt/format.h>

#include "common/scoped_fd.h"
#include "recorder/fleet/fleet_config.h"

namespace flightrec::fleet {
namespace {

StatusOr<std::string> ReadSmall(const std::filesystem::path& path, struct stat* st) {
  ScopedFd fd(open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK));
  if (!fd) return ErrnoStatus(path.string() + ": cannot open");
  if (fstat(fd.get(), st) != 0 || !S_ISREG(st->st_mode) || st->st_size > 65536) {
    return InvalidArgument(path.string() + ": not a small regular file");
  }
  std::string text(static_cast<size_t>(st->st_size), '\0');
  ssize_t n = read(fd.get(), text.data(), text.size());
  if (n < 0) return ErrnoStatus(path.string() + ": read");
  text.resize(static_cast<size_t>(n));
  return text;
}

std::string Trim(std::string s) {
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t' || s.back() == '\r')) s.pop_back();
  size_t b = s.find_first_not_of(" \t");
  return b == std::string::npos ? "" : s.substr(b);
}

// section.key → value; errors never quote a line (it may hold a secret).
StatusOr<std::map<std::string, std::string>> Ini(const std::string& text, const std::string& name) {
  std::map<std::string, std::string> out;
  std::istringstream in(text);
  std::string line, section;
  for (int no = 1; std::getline(in, line); ++no) {
    line = Trim(line);
    if (line.empty() || line[0] == '#' || line[0] == ';') continue;
    if (line[0] == '[' && line.back() == ']') {
      section = line.substr(1, line.size() - 2);
      continue;
    }
    auto eq = line.find('=');
    if (eq == std::string::npos || eq == 0) {
      return InvalidArgument(fmt::format("{}:{}: expected Key=Value", name, no));
    }
    out[section + "." + Trim(line.substr(0, eq))] = Trim(line.substr(eq + 1));
  }
  return out;
}

}  // namespace

StatusOr<FleetConfig> LoadFleetConfig(const std::filesystem::path& path) {
  struct stat st {};
  ASSIGN_OR_RETURN(std::string text, ReadSmall(path, &st));
  ASSIGN_OR_RETURN(auto kv, Ini(text, path.string()));
  FleetConfig c;
  c.host_id = kv["Fleet.HostId"];
  c.cache_dir = kv["Fleet.CacheDir"];
  c.s3_endpoint = kv["S3.Endpoint"];
  c.s3_bucket = kv["S3.Bucket"];
  c.pg_conninfo = kv["PostgreSQL.ConnInfo"];
  if (c.pg_conninfo.find("password") != std::string::npos) {
    return InvalidArgument(path.string() + ": ConnInfo= must not hold a password");
  }
  std::filesystem::path cred = kv["Fleet.CredentialsFile"];
  if (cred.empty())
    return InvalidArgument(path.string() + ": [Fleet] CredentialsFile= is required");
  if (cred.is_relative()) cred = path.parent_path() / cred;
  ASSIGN_OR_RETURN(std::string secret, ReadSmall(cred, &st));
  if (st.st_uid != 0 || (st.st_mode & 077) != 0) {
    return Status(StatusCode::kPermissionDenied,
                  cred.string() + ": credentials file must be owned by root, mode 0600");
  }
  ASSIGN_OR_RETURN(auto skv, Ini("[c]\n" + secret, cred.string()));
  c.s3_access_key = skv["c.S3AccessKey"];
  c.s3_secret_key = skv["c.S3SecretKey"];
  c.pg_password = skv["c.PostgresPassword"];
  return c;
}

}  // namespace flightrec::fleet
