#include "recorder/perf/sched_switch.h"

#include <sys/mount.h>
#include <sys/stat.h>

#include <cstring>
#include <sstream>

#include <fmt/format.h>

#include "common/read_file.h"

namespace flightrec::recorder::perf {
namespace {

// A tracepoint record is at most a few KiB (its size is a u16 in the perf
// record); an offset beyond this is not a layout flightrec can read.
constexpr uint32_t kMaxOffset = 1u << 16;

// One "field:TYPE NAME;\toffset:N;\tsize:N;\tsigned:N;" line: the name is
// the last word before the first ';' (minus any [array] suffix).
bool ParseFieldLine(std::string_view line, std::string* name, uint32_t* offset, uint32_t* size) {
  const size_t f = line.find("field:");
  const size_t semi = line.find(';');
  if (f == std::string_view::npos || semi == std::string_view::npos || semi < f) return false;
  std::string_view decl = line.substr(f + 6, semi - f - 6);
  if (size_t br = decl.find('['); br != std::string_view::npos) decl = decl.substr(0, br);
  const size_t sp = decl.find_last_of(" \t*");
  *name = std::string(sp == std::string_view::npos ? decl : decl.substr(sp + 1));
  auto number = [&](std::string_view key, uint32_t* out) {
    const size_t at = line.find(key);
    if (at == std::string_view::npos) return false;
    unsigned long v = 0;
    size_t i = at + key.size();
    size_t digits = 0;
    for (; i < line.size() && line[i] >= '0' && line[i] <= '9' && digits < 10; ++i, ++digits) {
      v = v * 10 + static_cast<unsigned long>(line[i] - '0');
    }
    if (digits == 0 || v > kMaxOffset) return false;
    *out = static_cast<uint32_t>(v);
    return true;
  };
  return number("offset:", offset) && number("size:", size);
}

// "ID: 123": the tracepoint's id (attr.config).
bool ParseIdLine(const std::string& line, uint32_t* id) {
  char* end = nullptr;
  unsigned long v = std::strtoul(line.c_str() + 3, &end, 10);
  *id = static_cast<uint32_t>(v);
  return end != line.c_str() + 3 && v > 0 && v < UINT32_MAX;
}

template <typename T>
T Load(std::string_view raw, uint32_t offset) {
  T v{};
  std::memcpy(&v, raw.data() + offset, sizeof(v));
  return v;
}

}  // namespace

StatusOr<SchedSwitchFormat> ParseSchedSwitchFormat(std::string_view text) {
  SchedSwitchFormat f;
  bool have_id = false, have_prev_pid = false, have_state = false, have_next_pid = false;
  std::istringstream in{std::string(text)};
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("ID:", 0) == 0) {
      have_id = ParseIdLine(line, &f.id);
      continue;
    }
    std::string name;
    SchedSwitchFormat::Field field;
    if (!ParseFieldLine(line, &name, &field.offset, &field.size)) continue;
    if (name == "prev_pid") f.prev_pid = field, have_prev_pid = true;
    if (name == "prev_state") f.prev_state = field, have_state = true;
    if (name == "next_pid") f.next_pid = field, have_next_pid = true;
  }
  auto bad = [](const char* what) {
    return Corrupt(
        fmt::format("sched_switch format: {}; off-CPU capture cannot read this kernel's "
                    "tracepoint (see events/sched/sched_switch/format in tracefs)",
                    what));
  };
  if (!have_id) return bad("no valid ID line");
  if (!have_prev_pid || f.prev_pid.size != 4) return bad("no 4-byte field prev_pid");
  if (!have_next_pid || f.next_pid.size != 4) return bad("no 4-byte field next_pid");
  if (!have_state || (f.prev_state.size != 4 && f.prev_state.size != 8)) {
    return bad("no 4- or 8-byte field prev_state");
  }
  return f;
}

StatusOr<TracepointField> ParseTracepointField(std::string_view text, std::string_view name) {
  TracepointField r;
  bool have_id = false, have_field = false;
  std::istringstream in{std::string(text)};
  std::string line, field_name;
  while (std::getline(in, line)) {
    if (line.rfind("ID:", 0) == 0) {
      have_id = ParseIdLine(line, &r.id);
      continue;
    }
    SchedSwitchFormat::Field f;
    if (ParseFieldLine(line, &field_name, &f.offset, &f.size) && field_name == name) {
      r.field = f;
      have_field = true;
    }
  }
  if (!have_id) return Corrupt("tracepoint format: no valid ID line");
  if (!have_field) return Corrupt(fmt::format("tracepoint format: no field {}", name));
  return r;
}

bool SchedSwitchFormat::Read(std::string_view raw, Values* out) const {
  for (const Field& field : {prev_pid, prev_state, next_pid}) {
    if (field.offset > raw.size() || field.size > raw.size() - field.offset) return false;
  }
  out->prev_pid = Load<uint32_t>(raw, prev_pid.offset);
  out->next_pid = Load<uint32_t>(raw, next_pid.offset);
  out->prev_state = prev_state.size == 8 ? Load<uint64_t>(raw, prev_state.offset)
                                         : Load<uint32_t>(raw, prev_state.offset);
  return true;
}

StatusOr<std::string> TracefsDir() {
  ASSIGN_OR_RETURN(std::string mounts, ReadFileToString("/proc/self/mounts", 4u << 20));
  std::istringstream in(mounts);
  std::string dev, dir, type;
  std::string rest;
  while (in >> dev >> dir >> type && std::getline(in, rest)) {
    if (type == "tracefs") return dir;
  }
  const std::string dir_path = "/sys/kernel/tracing";
  struct stat st {};
  if (stat(dir_path.c_str(), &st) != 0) {
    return Unsupported("off-CPU capture: this kernel has no tracefs (/sys/kernel/tracing)");
  }
  if (mount("nodev", dir_path.c_str(), "tracefs", 0, nullptr) != 0) {
    return ErrnoStatus(
        fmt::format("off-CPU capture: mounting tracefs on {} (mount -t tracefs "
                    "nodev {} as root, then retry)",
                    dir_path, dir_path));
  }
  return dir_path;
}

StatusOr<SchedSwitchFormat> LoadSchedSwitchFormat() {
  ASSIGN_OR_RETURN(std::string dir, TracefsDir());
  const std::string path = dir + "/events/sched/sched_switch/format";
  auto text = ReadFileToString(path, 64u << 10);
  if (!text.ok()) return text.status().Annotate("off-CPU capture: reading " + path);
  return ParseSchedSwitchFormat(*text);
}

}  // namespace flightrec::recorder::perf
