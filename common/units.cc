#include "common/units.h"

#include <fmt/format.h>

#include <cctype>
#include <cmath>
#include <ctime>
#include <span>
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

// A unit suffix (lower case; "" for none) and what it multiplies by.
struct Unit {
  std::string_view suffix;
  double mult;
};

// What ParseQuantity accepts and says: the quantity's name, examples and
// unit list for messages, the largest value, and the units.
struct Quantity {
  std::string_view what;
  std::string_view examples;
  std::string_view unit_list;
  double max;
  std::span<const Unit> units;
};

// `text` ("1.5GiB", "250 ms") as its number times its unit's multiplier.
StatusOr<double> ParseQuantity(std::string_view text, const Quantity& q) {
  double v = 0;
  std::string suffix;
  if (!SplitNumber(text, &v, &suffix)) {
    return InvalidArgument(fmt::format("invalid {} '{}' (examples: {})", q.what, text, q.examples));
  }
  for (const Unit& u : q.units) {
    if (suffix != u.suffix) continue;
    double scaled = v * u.mult;
    if (scaled > q.max) return InvalidArgument(fmt::format("{} '{}' is too large", q.what, text));
    return scaled;
  }
  return InvalidArgument(
      fmt::format("invalid {} unit in '{}' (use {})", q.what, text, q.unit_list));
}

}  // namespace

StatusOr<int64_t> ParseDurationNs(std::string_view text) {
  static constexpr Unit kUnits[] = {{"", 1e9},     {"s", 1e9},    {"sec", 1e9}, {"ms", 1e6},
                                    {"us", 1e3},   {"ns", 1},     {"m", 60e9},  {"min", 60e9},
                                    {"h", 3600e9}, {"d", 86400e9}};
  static constexpr Quantity kDuration{"duration", "5s, 250ms, 2h", "ns, us, ms, s, m, h, d", 9.2e18,
                                      kUnits};
  ASSIGN_OR_RETURN(double ns, ParseQuantity(text, kDuration));
  return static_cast<int64_t>(std::llround(ns));
}

StatusOr<uint64_t> ParseSize(std::string_view text) {
  constexpr double kKi = 1024.0, kMi = kKi * 1024, kGi = kMi * 1024, kTi = kGi * 1024;
  static constexpr Unit kUnits[] = {
      {"", 1},      {"b", 1},   {"k", kKi},  {"kb", kKi},  {"kib", kKi}, {"m", kMi},  {"mb", kMi},
      {"mib", kMi}, {"g", kGi}, {"gb", kGi}, {"gib", kGi}, {"t", kTi},   {"tb", kTi}, {"tib", kTi}};
  static constexpr Quantity kSize{"size", "4096, 64M, 4G", "K, M, G, T", 1.8e19, kUnits};
  ASSIGN_OR_RETURN(double bytes, ParseQuantity(text, kSize));
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
