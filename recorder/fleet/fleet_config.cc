#include "recorder/fleet/fleet_config.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <fmt/format.h>

#include <map>
#include <string_view>
#include <vector>

#include "common/scoped_fd.h"
#include "common/units.h"

namespace flightrec::fleet {
namespace {

// A config or credentials file is a handful of lines; anything bigger is not
// one (and is not read into memory whole).
constexpr size_t kMaxFileBytes = 64 * 1024;

std::string_view Trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t' || s.back() == '\r'))
    s.remove_suffix(1);
  return s;
}

// Reads a small regular file without following a symlink; `st` gets its
// stat from the open fd (so the checks apply to what is read).
StatusOr<std::string> ReadSmallFile(const std::filesystem::path& path, struct stat* st) {
  ScopedFd fd(open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK));
  if (!fd) return ErrnoStatus(fmt::format("{}: cannot open", path.string()));
  if (fstat(fd.get(), st) != 0) return ErrnoStatus(fmt::format("{}: fstat", path.string()));
  if (!S_ISREG(st->st_mode)) return InvalidArgument(path.string() + ": not a regular file");
  if (static_cast<uint64_t>(st->st_size) > kMaxFileBytes) {
    return InvalidArgument(fmt::format("{}: larger than {} bytes", path.string(), kMaxFileBytes));
  }
  std::string text(static_cast<size_t>(st->st_size), '\0');
  size_t got = 0;
  while (got < text.size()) {
    ssize_t n = read(fd.get(), text.data() + got, text.size() - got);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return ErrnoStatus(fmt::format("{}: read", path.string()));
    if (n == 0) break;
    got += static_cast<size_t>(n);
  }
  text.resize(got);
  return text;
}

struct Entry {
  std::string section;
  std::string key;
  std::string value;
  int line = 0;
};

// systemd-style INI: [Section], Key=Value, '#' or ';' comments. With
// `secret` set, an error never quotes the line (it may hold a secret).
StatusOr<std::vector<Entry>> ParseIni(const std::string& text, const std::string& name,
                                      bool secret) {
  std::vector<Entry> out;
  std::string section;
  size_t pos = 0;
  int line_no = 0;
  while (pos < text.size()) {
    size_t nl = text.find('\n', pos);
    if (nl == std::string::npos) nl = text.size();
    std::string_view line = Trim(std::string_view(text).substr(pos, nl - pos));
    pos = nl + 1;
    ++line_no;
    if (line.empty() || line.front() == '#' || line.front() == ';') continue;
    if (line.front() == '[') {
      if (line.back() != ']' || line.size() < 3) {
        return InvalidArgument(fmt::format("{}:{}: malformed section header", name, line_no));
      }
      section = std::string(line.substr(1, line.size() - 2));
      continue;
    }
    size_t eq = line.find('=');
    if (eq == std::string_view::npos || eq == 0) {
      if (secret) return InvalidArgument(fmt::format("{}:{}: expected Key=Value", name, line_no));
      return InvalidArgument(fmt::format("{}:{}: expected Key=Value, got '{}'", name, line_no,
                                         std::string(line.substr(0, 80))));
    }
    out.push_back({section, std::string(Trim(line.substr(0, eq))),
                   std::string(Trim(line.substr(eq + 1))), line_no});
  }
  return out;
}

// libpq takes a password from `password=` or a URI's user:password@; the
// config file may be world-readable, so neither is allowed there.
bool ConnInfoHasPassword(std::string_view ci) {
  if (ci.find("://") != std::string_view::npos) {
    size_t start = ci.find("://") + 3;
    size_t at = ci.find('@', start);
    if (at != std::string_view::npos && ci.substr(start, at - start).find(':') != ci.npos) {
      return true;
    }
    return ci.find("password=") != std::string_view::npos;
  }
  size_t p = 0;
  while ((p = ci.find("password", p)) != std::string_view::npos) {
    bool word_start = p == 0 || ci[p - 1] == ' ' || ci[p - 1] == '\t';
    size_t q = p + 8;
    while (q < ci.size() && (ci[q] == ' ' || ci[q] == '\t')) ++q;
    if (word_start && q < ci.size() && ci[q] == '=') return true;
    p += 8;
  }
  return false;
}

Status LoadCredentials(const std::filesystem::path& path, FleetConfig* c) {
  struct stat st {};
  ASSIGN_OR_RETURN(std::string text, ReadSmallFile(path, &st));
  // Like systemd-coredump's and ssh's key files: owned by root, no access for
  // group or other, or it is refused rather than trusted.
  if (st.st_uid != 0) {
    return Status(StatusCode::kPermissionDenied,
                  fmt::format("{}: credentials file must be owned by root (owner uid {})",
                              path.string(), st.st_uid));
  }
  if ((st.st_mode & 077) != 0) {
    return Status(
        StatusCode::kPermissionDenied,
        fmt::format("{}: credentials file is accessible to group or others (mode {:04o}); "
                    "chmod 600 it",
                    path.string(), st.st_mode & 07777));
  }
  ASSIGN_OR_RETURN(auto entries, ParseIni(text, path.string(), /*secret=*/true));
  for (const auto& e : entries) {
    std::string* dst = nullptr;
    if (e.key == "S3AccessKey") dst = &c->s3_access_key;
    if (e.key == "S3SecretKey") dst = &c->s3_secret_key;
    if (e.key == "PostgresPassword") dst = &c->pg_password;
    if (!dst) {
      return InvalidArgument(
          fmt::format("{}:{}: unknown key '{}' (S3AccessKey=, S3SecretKey=, PostgresPassword=)",
                      path.string(), e.line, e.key.substr(0, 64)));
    }
    *dst = e.value;
  }
  if (c->s3_access_key.empty() || c->s3_secret_key.empty()) {
    return InvalidArgument(
        fmt::format("{}: S3AccessKey= and S3SecretKey= are required", path.string()));
  }
  return OkStatus();
}

}  // namespace

StatusOr<FleetConfig> LoadFleetConfig(const std::filesystem::path& path) {
  struct stat st {};
  ASSIGN_OR_RETURN(std::string text, ReadSmallFile(path, &st));
  ASSIGN_OR_RETURN(auto entries, ParseIni(text, path.string(), /*secret=*/false));
  FleetConfig c;
  std::filesystem::path credentials;
  for (const auto& e : entries) {
    auto where = fmt::format("{}:{}", path.string(), e.line);
    std::string key = e.section + "." + e.key;
    if (key == "Fleet.HostId") {
      c.host_id = e.value;
    } else if (key == "Fleet.MaxUploadRate") {
      auto v = ParseSize(e.value);
      if (!v.ok()) return v.status().Annotate(where + ": MaxUploadRate");
      c.max_upload_bytes_per_sec = *v;
    } else if (key == "Fleet.RetryMaxDelay" || key == "S3.Timeout") {
      auto ns = ParseDurationNs(e.value);
      if (!ns.ok()) return ns.status().Annotate(where + ": " + e.key);
      // Whole seconds for curl's timeouts, milliseconds for the backoff;
      // at most a day either way (a typo must not stop shipping for years).
      constexpr int64_t kDayNs = 86'400'000'000'000;
      if (*ns < 1'000'000'000 || *ns > kDayNs) {
        return InvalidArgument(where + ": " + e.key + "= must be between 1s and 1d");
      }
      if (key == "S3.Timeout") {
        c.s3_timeout_s = *ns / 1'000'000'000;
      } else {
        c.retry_max_delay_ms = *ns / 1'000'000;
      }
    } else if (key == "Fleet.CacheDir") {
      c.cache_dir = e.value;
    } else if (key == "Fleet.CacheMaxUse") {
      auto v = ParseSize(e.value);
      if (!v.ok()) return v.status().Annotate(where + ": CacheMaxUse");
      c.cache_max_bytes = *v;
    } else if (key == "Fleet.CredentialsFile") {
      credentials = e.value;
    } else if (key == "S3.Endpoint") {
      c.s3_endpoint = e.value;
    } else if (key == "S3.Bucket") {
      c.s3_bucket = e.value;
    } else if (key == "S3.Region") {
      c.s3_region = e.value;
    } else if (key == "PostgreSQL.ConnInfo") {
      if (ConnInfoHasPassword(e.value)) {
        return InvalidArgument(where +
                               ": ConnInfo= must not hold a password; put PostgresPassword= in "
                               "the CredentialsFile=");
      }
      c.pg_conninfo = e.value;
    } else if (e.key == "S3AccessKey" || e.key == "S3SecretKey" || e.key == "PostgresPassword") {
      // Never echo the value: it is a secret in the wrong file.
      return InvalidArgument(fmt::format(
          "{}: {}= belongs in the CredentialsFile= (root-only), not in the config", where, e.key));
    } else {
      return InvalidArgument(fmt::format("{}: unknown key '{}' in section [{}]", where,
                                         e.key.substr(0, 64), e.section.substr(0, 64)));
    }
  }
  auto missing = [&](const char* what) {
    return InvalidArgument(fmt::format("{}: {} is required", path.string(), what));
  };
  if (c.s3_endpoint.empty()) return missing("[S3] Endpoint=");
  if (c.s3_endpoint.rfind("http://", 0) != 0 && c.s3_endpoint.rfind("https://", 0) != 0) {
    return InvalidArgument(path.string() + ": [S3] Endpoint= must start with http:// or https://");
  }
  while (!c.s3_endpoint.empty() && c.s3_endpoint.back() == '/') c.s3_endpoint.pop_back();
  if (c.s3_bucket.empty()) return missing("[S3] Bucket=");
  if (credentials.empty()) return missing("[Fleet] CredentialsFile=");
  if (credentials.is_relative()) credentials = path.parent_path() / credentials;
  RETURN_IF_ERROR(LoadCredentials(credentials, &c));
  if (c.host_id.empty()) {
    struct stat mst {};
    auto id = ReadSmallFile("/etc/machine-id", &mst);
    if (!id.ok()) return id.status().Annotate(path.string() + ": no [Fleet] HostId= and");
    c.host_id = std::string(Trim(*id));
    while (!c.host_id.empty() && c.host_id.back() == '\n') c.host_id.pop_back();
  }
  // The host id becomes the first component of every object key.
  if (c.host_id.empty() || c.host_id.size() > 128 ||
      c.host_id.find_first_not_of("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
                                  "0123456789-_.") != std::string::npos ||
      c.host_id[0] == '.') {
    return InvalidArgument(path.string() +
                           ": HostId must be 1-128 characters of [A-Za-z0-9._-], not starting "
                           "with '.'");
  }
  return c;
}

}  // namespace flightrec::fleet
