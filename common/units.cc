#include "common/units.h"

#include <fmt/format.h>

#include <cctype>
#include <cmath>
#include <ctime>
#include <string>

namespace flightrec {
namespace {

std::string Lower(std::string_view s) {
  std::string out(s);
  for (auto& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

// Splits "1.5GiB" into 1.5 and "gib". Rejects empty numbers, NaN and negatives.
bool SplitNumber(std::string_view text, double* value, std::string* suffix) {
  std::string s(text);
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.back()))) s.pop_back();
  size_t i = 0;
  while (i < s.size() && (std::isdigit(static_cast<unsigned char>(s[i])) || s[i] == '.')) ++i;
  if (i == 0) return false;
  try {
    size_t used = 0;
    *value = std::stod(s.substr(0, i), &used);
    if (used != i) return false;
  } catch (...) {
    return false;
  }
  if (!std::isfinite(*value) || *value < 0) return false;
  std::string rest = s.substr(i);
  size_t j = 0;
  while (j < rest.size() && std::isspace(static_cast<unsigned char>(rest[j]))) ++j;
  *suffix = Lower(rest.substr(j));
  return true;
}

}  // namespace

StatusOr<int64_t> ParseDurationNs(std::string_view text) {
  double v = 0;
  std::string suffix;
  if (!SplitNumber(text, &v, &suffix)) {
    return InvalidArgument(fmt::format("invalid duration '{}' (examples: 5s, 250ms, 2h)", text));
  }
  double mult = 0;
  if (suffix.empty() || suffix == "s" || suffix == "sec")
    mult = 1e9;
  else if (suffix == "ms")
    mult = 1e6;
  else if (suffix == "us")
    mult = 1e3;
  else if (suffix == "ns")
    mult = 1;
  else if (suffix == "m" || suffix == "min")
    mult = 60e9;
  else if (suffix == "h")
    mult = 3600e9;
  else if (suffix == "d")
    mult = 86400e9;
  else
    return InvalidArgument(
        fmt::format("invalid duration unit in '{}' (use ns, us, ms, s, m, h, d)", text));
  double ns = v * mult;
  if (ns > 9.2e18) return InvalidArgument(fmt::format("duration '{}' is too large", text));
  return static_cast<int64_t>(std::llround(ns));
}

StatusOr<uint64_t> ParseSize(std::string_view text) {
  double v = 0;
  std::string suffix;
  if (!SplitNumber(text, &v, &suffix)) {
    return InvalidArgument(fmt::format("invalid size '{}' (examples: 4096, 64M, 4G)", text));
  }
  double mult = 0;
  if (suffix.empty() || suffix == "b")
    mult = 1;
  else if (suffix == "k" || suffix == "kb" || suffix == "kib")
    mult = 1024.0;
  else if (suffix == "m" || suffix == "mb" || suffix == "mib")
    mult = 1024.0 * 1024;
  else if (suffix == "g" || suffix == "gb" || suffix == "gib")
    mult = 1024.0 * 1024 * 1024;
  else if (suffix == "t" || suffix == "tb" || suffix == "tib")
    mult = 1024.0 * 1024 * 1024 * 1024;
  else
    return InvalidArgument(fmt::format("invalid size unit in '{}' (use K, M, G, T)", text));
  double bytes = v * mult;
  if (bytes > 1.8e19) return InvalidArgument(fmt::format("size '{}' is too large", text));
  return static_cast<uint64_t>(std::llround(bytes));
}

std::string FormatBytes(uint64_t bytes) {
  static const char* kUnits[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  double v = static_cast<double>(bytes);
  int u = 0;
  while (v >= 1024 && u < 4) {
    v /= 1024;
    ++u;
  }
  if (u == 0) return fmt::format("{} B", bytes);
  return fmt::format("{:.1f} {}", v, kUnits[u]);
}

std::string FormatDurationNs(int64_t ns) {
  double a = std::fabs(static_cast<double>(ns));
  if (a >= 1e9) return fmt::format("{:.2f} s", ns / 1e9);
  if (a >= 1e6) return fmt::format("{:.1f} ms", ns / 1e6);
  if (a >= 1e3) return fmt::format("{:.1f} us", ns / 1e3);
  return fmt::format("{} ns", ns);
}

std::string FormatTimeNs(int64_t unix_ns) {
  time_t secs = static_cast<time_t>(unix_ns / 1000000000);
  int64_t ms = (unix_ns / 1000000) % 1000;
  struct tm tm {};
  gmtime_r(&secs, &tm);
  return fmt::format("{:04}-{:02}-{:02}T{:02}:{:02}:{:02}.{:03}Z", tm.tm_year + 1900, tm.tm_mon + 1,
                     tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec, ms);
}

StatusOr<int64_t> ParseTimeNs(std::string_view text, int64_t now_ns) {
  std::string s(text);
  if (s.empty()) return InvalidArgument("empty time");
  if (s == "now") return now_ns;
  if (s[0] == '@') {
    double v = 0;
    std::string suffix;
    if (!SplitNumber(s.substr(1), &v, &suffix) || !suffix.empty()) {
      return InvalidArgument(fmt::format("invalid time '{}'", text));
    }
    return static_cast<int64_t>(v * 1e9);
  }
  // Relative: "-5m", "5m ago".
  std::string rel;
  if (s[0] == '-')
    rel = s.substr(1);
  else if (s.size() > 4 && s.substr(s.size() - 4) == " ago")
    rel = s.substr(0, s.size() - 4);
  if (!rel.empty()) {
    auto d = ParseDurationNs(rel);
    if (!d.ok()) return d.status();
    return now_ns - *d;
  }
  struct tm tm {};
  int y = 0, mo = 0, d = 0, h = 0, mi = 0;
  double sec = 0;
  int n = std::sscanf(s.c_str(), "%d-%d-%d%*[T ]%d:%d:%lf", &y, &mo, &d, &h, &mi, &sec);
  if (n != 3 && n < 5) {
    return InvalidArgument(fmt::format(
        "invalid time '{}' (use 2026-11-22T12:00:00Z, @UNIXSECONDS, -5m or '5m ago')", text));
  }
  tm.tm_year = y - 1900;
  tm.tm_mon = mo - 1;
  tm.tm_mday = d;
  tm.tm_hour = h;
  tm.tm_min = mi;
  tm.tm_sec = 0;
  time_t t = timegm(&tm);
  if (t == static_cast<time_t>(-1)) return InvalidArgument(fmt::format("invalid time '{}'", text));
  return static_cast<int64_t>(t) * 1000000000 + static_cast<int64_t>(sec * 1e9);
}

int64_t WallClockNs() {
  timespec ts{};
  clock_gettime(CLOCK_REALTIME, &ts);
  return static_cast<int64_t>(ts.tv_sec) * 1000000000 + ts.tv_nsec;
}

int64_t MonotonicNs() {
  timespec ts{};
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<int64_t>(ts.tv_sec) * 1000000000 + ts.tv_nsec;
}

}  // namespace flightrec
