#include "recorder/daemon/death_record.h"

#include <string.h>

#include <fmt/format.h>

#include "common/checked_json.h"

namespace flightrec::recorder {

std::string SignalName(int sig) {
  const char* abbrev = sigabbrev_np(sig);
  return abbrev ? fmt::format("SIG{}", abbrev) : std::to_string(sig);
}

namespace {

nlohmann::json SenderJson(const DeathSender& s) {
  if (!s.known) return {{"known", false}};
  nlohmann::json j = {{"known", true},     {"kind", s.kernel ? "kernel" : "process"},
                      {"si_code", s.code}, {"pid", s.pid},
                      {"tid", s.tid},      {"time_mono_ns", s.time_ns}};
  if (s.uid >= 0) j["uid"] = s.uid;
  // The sender chose its own name: bytes, as every such field.
  json::SetText(j, "comm", s.comm);
  return j;
}

}  // namespace

nlohmann::json DeathCrashMeta(const Death& d, int64_t mono_to_wall_ns) {
  const DeathProcessInfo none;
  const DeathProcessInfo& i = d.info ? *d.info : none;
  nlohmann::json c = {{"pid", d.pid},
                      {"tid", d.pid},
                      {"global_tid", d.pid},
                      {"signal", d.signal},
                      {"signal_name", SignalName(d.signal)},
                      {"time_ns", static_cast<int64_t>(d.time_ns) + mono_to_wall_ns},
                      {"uid", i.uid},
                      {"gid", i.gid},
                      // Not known after the exit (the mm is gone): the record
                      // stays root's, never granted to the dead uid.
                      {"dumpable", false},
                      {"core_size", 0},
                      {"truncated", false},
                      {"core_stored", false},
                      {"core_dumped", d.core_dumped},
                      {"exit_code", d.exit_code},
                      {"rate_limited", false},
                      {"history", ""},
                      {"sender", SenderJson(d.sender)},
                      {"notes", nlohmann::json::array()}};
  json::SetText(c, "comm", i.comm);
  json::SetText(c, "exe", i.exe);
  if (!d.info) c["notes"].push_back("the process was not seen alive: exe, uid and cmdline unknown");
  if (d.core_dumped) {
    c["notes"].push_back("the kernel dumped a core, but no crash record was stored for it");
  }
  if (!d.sender.known) c["notes"].push_back("who sent the signal is unknown");
  return c;
}

nlohmann::json DeathMetadata(const Death& d, const std::string& build_id) {
  nlohmann::json m = {{"build_id", build_id}, {"verified", false}};
  if (d.info) {
    const DeathProcessInfo& i = *d.info;
    json::SetText(m, "exe", i.exe);
    json::SetText(m, "cmdline", i.cmdline);
    json::SetText(m, "cgroup", i.cgroup);
    json::SetText(m, "comm", i.comm);
    m["status"] = {{"Uid", i.uid}, {"Gid", i.gid}, {"PPid", i.ppid}};
    m["read_at"] = i.source;
  }
  nlohmann::json threads = nlohmann::json::array({{{"tid", d.pid}}});
  for (int32_t t : d.other_tids) threads.push_back({{"tid", t}});
  m["threads"] = threads;
  // /proc/PID of an exiting process has no mm (exit_mm ran before the exit
  // event): what it held then is not knowable afterwards.
  m["not_recorded"] = {"cwd", "limits", "maps", "environ"};
  return m;
}

std::string DeathReason(const Death& d) {
  std::string who =
      !d.sender.known ? "an unknown sender"
      : d.sender.kernel
          ? fmt::format("the kernel (si_code {}, in pid {})", d.sender.code, d.sender.pid)
          : fmt::format("pid {} ({})", d.sender.pid, d.sender.comm.substr(0, 16));
  std::string comm = d.info ? d.info->comm.substr(0, 16) : "?";
  return fmt::format("{} ({}) killed by {} from {}{}", comm, d.pid, SignalName(d.signal), who,
                     d.core_dumped ? " (core dumped)" : "");
}

}  // namespace flightrec::recorder
