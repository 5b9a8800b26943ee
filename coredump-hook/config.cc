#include "coredump-hook/config.h"

#include <CLI/CLI.hpp>
#include <algorithm>
#include <cerrno>
#include <filesystem>
#include <type_traits>

#include <fmt/format.h>

#include "common/atomic_output_file.h"
#include "common/checked_json.h"
#include "common/read_file.h"
#include "common/units.h"
#include "coredump-hook/context.h"
#include "store/store.h"

namespace flightrec::coredump {

HookArgv SplitHookArgv(int argc, const char* const* argv) {
  HookArgv out;
  auto is_number = [](std::string_view v) {
    return !v.empty() && v.find_first_not_of("0123456789") == std::string_view::npos;
  };
  // A pattern without options (written before "--" was added) starts with
  // %P: every argument is a value, read by position, so a program named
  // "--" is the 10th value and ends nothing.
  if (argc > 1 && is_number(argv[1])) {
    out.values.assign(argv + 1, argv + argc);
    return out;
  }
  for (int i = 1; i < argc; ++i) {
    if (std::string_view(argv[i]) == "--") {
      out.options.assign(argv + 1, argv + i);
      out.values.assign(argv + i + 1, argv + argc);
      return out;
    }
  }
  out.options.assign(argv + 1, argv + argc);
  return out;
}

StatusOr<HookArgs> ParseHookArgs(const std::vector<std::string>& p) {
  if (p.size() != 10 && p.size() != 11) {
    return InvalidArgument(fmt::format(
        "expected the core_pattern values %P %i %I %s %t %c %u %g %d %e [%F], got {} values",
        p.size()));
  }
  HookArgs a;
  try {
    size_t used = 0;
    auto num = [&](const std::string& s) {
      long long v = std::stoll(s, &used);
      if (used != s.size()) throw std::invalid_argument(s);
      return v;
    };
    a.pid = static_cast<pid_t>(num(p[0]));
    a.tid = static_cast<pid_t>(num(p[1]));
    a.global_tid = static_cast<pid_t>(num(p[2]));
    a.signal = static_cast<int>(num(p[3]));
    a.time_s = num(p[4]);
    a.rlimit_core = static_cast<uint64_t>(std::stoull(p[5]));
    a.uid = static_cast<uid_t>(num(p[6]));
    a.gid = static_cast<gid_t>(num(p[7]));
    a.dumpable = num(p[8]) == 1;
  } catch (const std::exception& e) {
    return InvalidArgument(fmt::format("malformed core_pattern value: {}", e.what()));
  }
  if (a.pid <= 0 || a.signal < 0 || a.signal > 64) {
    return InvalidArgument("core_pattern values out of range");
  }
  a.comm = p[9];
  if (p.size() == 11 && !p[10].empty()) {
    char* end = nullptr;
    long fd = std::strtol(p[10].c_str(), &end, 10);
    if (*end != '\0' || fd < 0 || fd > 1024) {
      return InvalidArgument(fmt::format("malformed %F value '{}'", p[10]));
    }
    a.pidfd = static_cast<int>(fd);
  }
  return a;
}

StatusOr<std::string> CorePattern(const std::string& hook_path) {
  std::string p = fmt::format("|{} -- %P %i %I %s %t %c %u %g %d %e %F", hook_path);
  if (p.size() > 127) {  // CORENAME_MAX_SIZE - 1 (fs/coredump.c)
    return InvalidArgument(fmt::format(
        "core_pattern would be {} bytes; the kernel keeps 127: install the hook at a shorter "
        "path",
        p.size()));
  }
  return p;
}

Status WriteHookConfig(const HookOptions& o) {
  std::error_code ec;
  std::filesystem::create_directories(std::filesystem::path(kHookConfig).parent_path(), ec);
  return WriteFileAtomically(kHookConfig,
                             nlohmann::json{{"store", o.store_dir},
                                            {"socket", o.socket_path},
                                            {"max_core_bytes", o.max_core_bytes},
                                            {"history_ns", o.history_ns},
                                            {"max_per_exe_per_hour", o.max_per_exe_per_hour},
                                            {"max_per_uid_per_hour", o.max_per_uid_per_hour},
                                            {"max_per_hour", o.max_per_hour},
                                            {"history_timeout_ms", o.history_timeout_ms}}
                                     .dump(2) +
                                 "\n");
}

int ParseHookCommandLine(int argc, char** argv, HookOptions* out, HookArgs* args_out) {
  CLI::App app{
      "recorder-coredump: the kernel.core_pattern handler of flightrec.\n"
      "Stores the core from stdin with the process's metadata, a backtrace of every thread\n"
      "and its last seconds of history from recorderd. Installed by `recorder coredump "
      "install`."};
  HookOptions& o = *out;
  o.store_dir = store::DefaultStoreDir();
  std::string config = kHookConfig;
  // The kernel's values (%e among them, which the crashing program chooses)
  // are never looked at as options: only what precedes "--" is.
  HookArgv split = SplitHookArgv(argc, argv);
  for (size_t i = 0; i < split.options.size(); ++i) {
    const std::string& opt = split.options[i];
    if (opt == "--config" && i + 1 < split.options.size()) config = split.options[i + 1];
    if (opt.rfind("--config=", 0) == 0) config = opt.substr(9);
  }
  // Settings from `recorder coredump install`; flags override them.
  // A missing file means the defaults; an unreadable one is said.
  auto text = ReadFileToString(config, 1 << 20);
  if (!text.ok() && text.status().err() != ENOENT) {
    Log("ignoring settings: " + text.status().ToString());
  }
  if (text.ok()) {
    auto j = json::ParseBounded(*text);
    if (j.is_object()) {
      // A setting of the wrong type (a hand-edited "1G" for a number) is
      // ignored with a log line: nlohmann's value() would throw, and the
      // hook would die on every crash.
      auto set = [&](const char* key, auto* field) {
        if (!j.contains(key)) return;
        using T = std::remove_pointer_t<decltype(field)>;
        // Read with two different defaults: the same answer both times is
        // the file's value; different ones, a value of the wrong type.
        const T a = json::Get<T>(j, key, T{}), b = json::Get<T>(j, key, T{1});
        if (a != b) {
          Log(fmt::format("{}: ignoring \"{}\": not a {}", config, key,
                          std::is_same_v<T, std::string> ? "string" : "number in range"));
          return;
        }
        *field = a;
      };
      set("store", &o.store_dir);
      set("socket", &o.socket_path);
      set("max_core_bytes", &o.max_core_bytes);
      set("history_ns", &o.history_ns);
      set("max_per_exe_per_hour", &o.max_per_exe_per_hour);
      set("max_per_uid_per_hour", &o.max_per_uid_per_hour);
      set("max_per_hour", &o.max_per_hour);
      set("history_timeout_ms", &o.history_timeout_ms);
      set("backtrace_memory_max", &o.backtrace_memory_max);
      set("core_level", &o.compression.level);
    } else {
      Log("ignoring " + config + ": not JSON");
    }
  }
  std::string max_size = std::to_string(o.max_core_bytes),
              history = std::to_string(o.history_ns) + "ns",
              history_timeout = std::to_string(o.history_timeout_ms) + "ms";
  app.add_option("--config", config, "Settings file")->capture_default_str();
  app.add_option("--store", o.store_dir, "Store directory")->capture_default_str();
  app.add_option("--socket", o.socket_path, "recorderd control socket")->capture_default_str();
  app.add_option("--max-core-size", max_size, "Cores are truncated past this")
      ->capture_default_str();
  app.add_option("--history", history, "History to ask recorderd for")->capture_default_str();
  app.add_option("--history-timeout", history_timeout,
                 "How long recorderd may take to give the history; then the core is stored "
                 "without it")
      ->capture_default_str();
  std::string bt_max = std::to_string(o.backtrace_memory_max);
  bool fixed_level = false;
  app.add_option("--backtrace-memory-max", bt_max,
                 "Memory of the core the unwinder's reduced copy may keep (stacks first)")
      ->capture_default_str();
  app.add_option("--core-level", o.compression.level,
                 "zstd level of the core on an idle host; on a busy one the hook steps down to "
                 "level 1 while it waits on the CPU more than it runs")
      ->check(CLI::Range(1, 19))
      ->capture_default_str();
  app.add_flag("--core-level-fixed", fixed_level,
               "Always compress the core at --core-level with 2 zstd workers (no adapting)");
  app.add_option("--max-per-exe-per-hour", o.max_per_exe_per_hour,
                 "Cores stored per executable per hour; later crashes keep metadata only")
      ->capture_default_str();
  app.add_option("--max-per-uid-per-hour", o.max_per_uid_per_hour,
                 "Cores stored per crashed uid per hour; later crashes keep metadata only")
      ->capture_default_str();
  app.add_option("--max-per-hour", o.max_per_hour, "Cores stored per hour for all users together")
      ->capture_default_str();
  app.footer(
      "After the options: -- %P %i %I %s %t %c %u %g %d %e [%F] (from the kernel). Without "
      "options, the values may come first (a pattern written before `--` was added).");
  // Anything not an option is left over, and refused below.
  app.allow_extras();
  try {
    std::vector<const char*> opts = {argv[0]};
    for (const auto& opt : split.options) opts.push_back(opt.c_str());
    app.parse(static_cast<int>(opts.size()), opts.data());
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  }
  if (!app.remaining().empty()) {
    Log("refusing to run: the kernel's values must follow `--` (got '" + app.remaining()[0] +
        "' among the options)");
    return 2;
  }
  auto size = ParseSize(max_size);
  auto btmax = ParseSize(bt_max);
  auto hist = ParseDurationNs(history);
  auto htimeout = ParseDurationNs(history_timeout);
  auto args = ParseHookArgs(split.values);
  if (!size.ok() || !btmax.ok() || !hist.ok() || !htimeout.ok() || !args.ok()) {
    std::string msg = !args.ok()    ? args.status().message()
                      : !size.ok()  ? size.status().message()
                      : !btmax.ok() ? btmax.status().message()
                      : !hist.ok()  ? hist.status().message()
                                    : htimeout.status().message();
    Log("refusing to run: " + msg);
    return 2;
  }
  o.max_core_bytes = *size;
  o.backtrace_memory_max = *btmax;
  if (fixed_level) o.compression.adapt = false;
  o.history_ns = *hist;
  o.history_timeout_ms = static_cast<int>(std::clamp<int64_t>(*htimeout / 1'000'000, 1, 600'000));
  *args_out = *args;
  return -1;
}

}  // namespace flightrec::coredump
