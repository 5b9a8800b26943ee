// Parsing and printing of the units users type: durations ("5s", "250ms",
// "2h"), sizes ("64M", "4GiB", "10%" is handled by callers) and timestamps.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "common/status.h"

namespace flightrec {

// "5s", "1.5s", "250ms", "10us", "3m", "2h", "7d"; a bare number is seconds.
StatusOr<int64_t> ParseDurationNs(std::string_view text);
// "4096", "64K", "64KiB", "1.5G", "4GB" (binary multiples, like systemd).
StatusOr<uint64_t> ParseSize(std::string_view text);
std::string FormatBytes(uint64_t bytes);   // "1.5 GiB"
std::string FormatDurationNs(int64_t ns);  // "5.00 s", "12.3 ms"
// Wall-clock ns since the epoch ↔ "2026-11-22T12:06:33.123Z".
std::string FormatTimeNs(int64_t unix_ns);
// Accepts RFC 3339-ish UTC ("2026-11-22T12:06:33Z", "2026-11-22 12:06"),
// "@<unix seconds>", or a relative "-5m"/"5m ago" measured from now_ns.
StatusOr<int64_t> ParseTimeNs(std::string_view text, int64_t now_ns);
int64_t WallClockNs();
int64_t MonotonicNs();

}  // namespace flightrec
