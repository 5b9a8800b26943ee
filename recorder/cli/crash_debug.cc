// recorder crash debug: gdb on the crash's executable and core (modelled on
// coredumpctl debug).
#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "common/checked_json.h"
#include "common/regular_file.h"
#include "common/scoped_fd.h"
#include "common/subprocess.h"
#include "common/terminal_escape.h"
#include "recorder/cli/crash_internal.h"

namespace flightrec::recorder::cli {

namespace {

// Splits ARGS like a shell would (quotes and backslashes), as coredumpctl's
// --debugger-arguments does.
StatusOr<std::vector<std::string>> SplitArgs(const std::string& s) {
  std::vector<std::string> out;
  std::string cur;
  bool in_word = false;
  char quote = 0;
  for (size_t i = 0; i < s.size(); ++i) {
    char c = s[i];
    if (quote) {
      if (c == quote) {
        quote = 0;
      } else if (c == '\\' && quote == '"' && i + 1 < s.size()) {
        cur += s[++i];
      } else {
        cur += c;
      }
    } else if (c == '\'' || c == '"') {
      quote = c;
      in_word = true;
    } else if (c == '\\' && i + 1 < s.size()) {
      cur += s[++i];
      in_word = true;
    } else if (c == ' ' || c == '\t' || c == '\n') {
      if (in_word) out.push_back(std::move(cur));
      cur.clear();
      in_word = false;
    } else {
      cur += c;
      in_word = true;
    }
  }
  if (quote) return InvalidArgument("unterminated quote in --debugger-arguments");
  if (in_word) out.push_back(std::move(cur));
  return out;
}

// Why the recorded executable is not given to gdb ("" when it is). Only an
// absolute path to a regular file is (opened non-blocking: a FIFO put in its
// place would hang gdb).
std::string WhyNotTheExecutable(const std::string& exe) {
  if (exe.empty()) return "no executable path recorded (see `recorder crash info`)";
  const std::string shown = EscapeForTerminal(exe);
  if (exe.front() != '/') return fmt::format("the recorded executable '{}' is not a path", shown);
  if (!OpenRegularFile(exe)) {
    return fmt::format("{}: {}", shown, errno == EINVAL ? "not a regular file" : strerror(errno));
  }
  return "";
}

}  // namespace

std::vector<std::string> GdbArgv(const std::vector<std::string>& extra, const std::string& core,
                                 const std::string& exe) {
  std::vector<std::string> argv = {"gdb"};
  argv.insert(argv.end(), extra.begin(), extra.end());
  // gdb reads options up to `--` (getopt); positionals after it are the
  // executable, and the core comes by option, so nothing is guessed from
  // position (a second positional that is a number is a pid to attach).
  argv.push_back("--core=" + core);
  argv.push_back("--");
  if (!exe.empty() && exe.front() == '/') argv.push_back(exe);
  return argv;
}

// Runs gdb on the executable and the core, decompressed into a private
// directory (mkdtemp, 0700; the file created O_EXCL|O_NOFOLLOW) that is
// removed when gdb exits.
Status RunCrashDebug(const CliContext& ctx, const std::string& id, const std::string& gdb_args,
                     bool as_json) {
  ASSIGN_OR_RETURN(auto extra, SplitArgs(gdb_args));
  const char* tmpdir = getenv("TMPDIR");
  // Cores are large: /var/tmp rather than a RAM-backed /tmp, as coredumpctl.
  std::string dir =
      std::string(tmpdir && *tmpdir ? tmpdir : "/var/tmp") + "/flightrec-debug-XXXXXX";
  if (mkdtemp(dir.data()) == nullptr) return ErrnoStatus("creating a directory for the core");
  const std::string core = dir + "/core";
  std::string exe;
  Status st;
  {
    ScopedFd fd(open(core.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600));
    st = fd ? WriteCore(ctx, id, fd.get(), &exe) : ErrnoStatus("creating " + core);
  }
  int gdb_status = 0;
  if (st.ok()) {
    std::fprintf(stderr, "core extracted to %s (removed when gdb exits)\n", core.c_str());
    const std::string why_not = WhyNotTheExecutable(exe);
    if (!why_not.empty()) {
      std::fprintf(stderr, "recorder: %s: gdb runs on the core alone\n", why_not.c_str());
    }
    std::fflush(stderr);
    std::vector<std::string> argv = GdbArgv(extra, core, why_not.empty() ? exe : "");
    // gdb owns the terminal meanwhile: ^C is for it, not for us (the
    // directory must still be removed).
    struct sigaction ign {
    }, old_int{}, old_quit{};
    ign.sa_handler = SIG_IGN;
    sigaction(SIGINT, &ign, &old_int);
    sigaction(SIGQUIT, &ign, &old_quit);
    std::vector<char*> cargv;
    for (auto& a : argv) cargv.push_back(a.data());
    cargv.push_back(nullptr);
    auto gdb = Subprocess::Fork([&]() -> int {
      sigaction(SIGINT, &old_int, nullptr);
      sigaction(SIGQUIT, &old_quit, nullptr);
      execvp("gdb", cargv.data());
      std::fprintf(stderr, "recorder: cannot run gdb: %s\n", std::strerror(errno));
      return 127;
    });
    if (!gdb.ok()) {
      st = gdb.status();
    } else if (auto ws = gdb->Wait(); ws.ok()) {
      gdb_status = *ws;
    } else {
      st = ws.status();
    }
    sigaction(SIGINT, &old_int, nullptr);
    sigaction(SIGQUIT, &old_quit, nullptr);
  }
  unlink(core.c_str());
  rmdir(dir.c_str());
  RETURN_IF_ERROR(st);
  if (as_json) {
    // After gdb's own output: how the session ended, for scripts that run
    // gdb in batch mode (-A "-batch -ex bt").
    nlohmann::json out = {{"crash", id}};
    json::SetText(out, "exe", exe);
    if (WIFEXITED(gdb_status)) out["gdb_exit_status"] = WEXITSTATUS(gdb_status);
    if (WIFSIGNALED(gdb_status)) out["gdb_signal"] = WTERMSIG(gdb_status);
    std::printf("%s\n", json::Dump(out, 2).c_str());
  }
  if (!WIFEXITED(gdb_status) || WEXITSTATUS(gdb_status) != 0) {
    return Internal(WIFEXITED(gdb_status)
                        ? fmt::format("gdb exited with status {}", WEXITSTATUS(gdb_status))
                        : fmt::format("gdb died from signal {}", WTERMSIG(gdb_status)));
  }
  return OkStatus();
}

}  // namespace flightrec::recorder::cli
