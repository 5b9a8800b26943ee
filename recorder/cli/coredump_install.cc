// recorder coredump install|uninstall: makes recorder-coredump the kernel's
// core_pattern handler, through the hook library's configuration interface
// (coredump-hook/coredump.h: CorePattern, WriteHookConfig). Part of the
// administrative CLI library, not of the query commands.
#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>

#include <nlohmann/json.hpp>

#include "common/atomic_output_file.h"
#include "common/checked_json.h"
#include "common/terminal_escape.h"
#include "coredump-hook/coredump.h"
#include "recorder/cli/cli.h"

namespace flightrec::recorder::cli {
namespace {

constexpr const char* kPattern = "/proc/sys/kernel/core_pattern";
constexpr const char* kPipeLimit = "/proc/sys/kernel/core_pipe_limit";
constexpr const char* kSysctlDropIn = "/etc/sysctl.d/50-flightrec-coredump.conf";

StatusOr<std::string> ReadLine(const std::string& path) {
  std::ifstream in(path);
  std::string s;
  if (!std::getline(in, s)) return ErrnoStatus("reading " + path);
  return s;
}
Status WriteLine(const std::string& path, const std::string& v) {
  std::ofstream out(path);
  if (!(out << v << "\n") || !out.flush()) return ErrnoStatus("writing " + path);
  return OkStatus();
}

std::string DefaultHookPath() {
  std::error_code ec;
  auto self = std::filesystem::read_symlink("/proc/self/exe", ec).parent_path();
  for (const auto& c :
       {self / "recorder-coredump", self / "../../coredump-hook/recorder-coredump"}) {
    if (std::filesystem::exists(c, ec)) return std::filesystem::weakly_canonical(c, ec).string();
  }
  return "/usr/local/bin/recorder-coredump";
}

Status RunInstall(const CliContext& ctx, std::string hook, bool persist, bool as_json) {
  if (geteuid() != 0) return Status(StatusCode::kPermissionDenied, "coredump install needs root");
  if (hook.empty()) hook = DefaultHookPath();
  if (access(hook.c_str(), X_OK) != 0) return ErrnoStatus("hook " + hook + " is not executable");
  ASSIGN_OR_RETURN(std::string old_pattern, ReadLine(kPattern));
  ASSIGN_OR_RETURN(std::string old_limit, ReadLine(kPipeLimit));
  ASSIGN_OR_RETURN(std::string pattern, coredump::CorePattern(hook));
  coredump::HookOptions ho;
  ho.store_dir = ctx.store_dir;
  ho.socket_path = ctx.socket_path;
  RETURN_IF_ERROR(coredump::WriteHookConfig(ho));
  std::filesystem::create_directories(ctx.store_dir);
  // Users read their own crashes through per-file ACLs the hook sets, found
  // through by-uid/<uid>/: the store is searchable by others but not listable
  // (the names are every user's record ids), the index (everyone's metadata)
  // root's.
  chmod(ctx.store_dir.c_str(), 0711);
  for (const char* f : {"/index.sqlite", "/index.sqlite-wal", "/index.sqlite-shm"}) {
    chmod((ctx.store_dir + f).c_str(), 0600);
  }
  std::string saved = ctx.store_dir + "/core_pattern.saved";
  // Keep the pattern from before the first install, not our own.
  if (old_pattern.find("recorder-coredump") == std::string::npos) {
    RETURN_IF_ERROR(WriteFileAtomically(
        saved, nlohmann::json{{"core_pattern", old_pattern}, {"core_pipe_limit", old_limit}}.dump(),
        0600));
  }
  // core_pipe_limit > 0 keeps the crashing process until the hook has read
  // its /proc entries; crashes beyond it at once are skipped by the kernel,
  // so it is set high enough for a storm (the hook rate-limits cores).
  RETURN_IF_ERROR(WriteLine(kPipeLimit, "64"));
  RETURN_IF_ERROR(WriteLine(kPattern, pattern));
  if (persist) {
    RETURN_IF_ERROR(WriteFileAtomically(
        kSysctlDropIn, "# written by `recorder coredump install --persist`\nkernel.core_pattern=" +
                           pattern + "\nkernel.core_pipe_limit=64\n"));
  }
  if (as_json) {
    std::printf("%s\n", json::Dump(nlohmann::json{{"core_pattern", pattern},
                                                  {"previous", old_pattern},
                                                  {"saved", saved},
                                                  {"store", ctx.store_dir},
                                                  {"persist", persist}},
                                   2)
                            .c_str());
    return OkStatus();
  }
  std::printf("core_pattern: %s\n(previous: %s, saved in %s)\n", pattern.c_str(),
              EscapeForTerminal(old_pattern).c_str(), saved.c_str());
  return OkStatus();
}

Status RunUninstall(const CliContext& ctx, bool as_json) {
  if (geteuid() != 0) return Status(StatusCode::kPermissionDenied, "coredump uninstall needs root");
  std::string saved = ctx.store_dir + "/core_pattern.saved";
  std::ifstream s(saved);
  auto j = nlohmann::json::parse(s, nullptr, false);
  if (j.is_discarded()) {
    return NotFound("no saved core_pattern in " + saved +
                    " (was `coredump install` run with this --store?)");
  }
  RETURN_IF_ERROR(WriteLine(kPattern, json::Str(j, "core_pattern", "core")));
  RETURN_IF_ERROR(WriteLine(kPipeLimit, json::Str(j, "core_pipe_limit", "0")));
  std::error_code ec;
  std::filesystem::remove(kSysctlDropIn, ec);
  std::filesystem::remove(saved, ec);
  std::filesystem::remove(coredump::kHookConfig, ec);
  if (as_json) {
    std::printf(
        "%s\n",
        json::Dump(nlohmann::json{{"core_pattern", json::Str(j, "core_pattern", "core")},
                                  {"core_pipe_limit", json::Str(j, "core_pipe_limit", "0")}},
                   2)
            .c_str());
    return OkStatus();
  }
  std::printf("core_pattern restored: %s\n",
              EscapeForTerminal(json::Str(j, "core_pattern", "core")).c_str());
  return OkStatus();
}

}  // namespace

void AddCoredumpCommands(CLI::App& app, CliContext& ctx) {
  auto* cd = app.add_subcommand("coredump", "Install or remove the core_pattern handler");
  cd->require_subcommand(1);
  auto hook = std::make_shared<std::string>();
  auto persist = std::make_shared<bool>(false);
  auto* inst = cd->add_subcommand(
      "install", "Make recorder-coredump the kernel's core handler (saves the previous pattern)");
  inst->add_option("--hook", *hook, "Path of recorder-coredump (default: next to recorder)");
  inst->add_flag("--persist", *persist, "Also write " + std::string(kSysctlDropIn));
  auto ijson = std::make_shared<bool>(false);
  inst->add_flag("--json", *ijson, "Machine-readable output");
  inst->callback([&ctx, hook, persist, ijson] {
    ctx.action = [&ctx, hook, persist, ijson] { return RunInstall(ctx, *hook, *persist, *ijson); };
  });
  auto ujson = std::make_shared<bool>(false);
  auto* un = cd->add_subcommand("uninstall", "Restore the core_pattern saved by install");
  un->add_flag("--json", *ujson, "Machine-readable output");
  un->callback([&ctx, ujson] { ctx.action = [&ctx, ujson] { return RunUninstall(ctx, *ujson); }; });
}

}  // namespace flightrec::recorder::cli
