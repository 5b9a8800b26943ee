#include "recorder/symbolize/debuginfod.h"

#include <elfutils/debuginfod.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <unordered_map>

#include <fmt/format.h>

#include "common/terminal_escape.h"
#include "recorder/symbolize/debuginfo.h"

namespace flightrec::recorder::symbolize {
namespace {

// Progress on stderr while a file downloads, only when it is a terminal;
// erased when the download ends so that output is never mixed with it.
struct Fetch {
  std::string build_id;
  bool shown = false;
};

int ShowProgress(debuginfod_client* client, long done, long total) {
  auto* fetch = static_cast<Fetch*>(debuginfod_get_user_data(client));
  fetch->shown = true;
  std::fprintf(stderr, "\r\033[Kfetching debug info for %s from debuginfod: %ld",
               fetch->build_id.c_str(), done / 1024);
  if (total > 0) std::fprintf(stderr, " of %ld", total / 1024);
  std::fprintf(stderr, " KiB");
  return 0;  // go on
}

class Debuginfod {
 public:
  // The debug file of `build_id` in libdebuginfod's cache, or "".
  std::string Find(const std::string& build_id) {
    std::lock_guard lock(mu_);
    auto [it, fresh] = found_.emplace(build_id, "");
    if (fresh && !given_up_ && IsQueryableBuildId(build_id)) it->second = Query(build_id);
    return it->second;
  }

 private:
  std::string Query(const std::string& build_id) {
    if (client_ == nullptr && !Begin()) return "";
    fetch_ = {build_id, false};
    char* path = nullptr;
    // Length 0: the build-id is given as a NUL-terminated hex string.
    int fd = debuginfod_find_debuginfo(
        client_, reinterpret_cast<const unsigned char*>(build_id.c_str()), 0, &path);
    if (fetch_.shown) std::fprintf(stderr, "\r\033[K");
    if (fd >= 0) {
      close(fd);
      std::string p = path ? path : "";
      std::free(path);
      return p;
    }
    // ENOENT: the servers have no such file. ETIME: no answer in time.
    if (fd == -ETIME) {
      const char* t = std::getenv("DEBUGINFOD_TIMEOUT");
      GiveUp(fmt::format("no answer within {} s ($DEBUGINFOD_TIMEOUT)", t && *t ? t : "90"));
    } else if (fd != -ENOENT) {
      GiveUp(std::strerror(-fd));
    }
    return "";
  }

  bool Begin() {
    client_ = debuginfod_begin();
    if (client_ == nullptr) {
      GiveUp("cannot start the client");
      return false;
    }
    debuginfod_set_user_data(client_, &fetch_);
    if (isatty(STDERR_FILENO)) debuginfod_set_progressfn(client_, ShowProgress);
    return true;
  }

  void GiveUp(const std::string& why) {
    given_up_ = true;
    const char* urls = std::getenv("DEBUGINFOD_URLS");
    std::fprintf(stderr, "recorder: debuginfod (%s): %s; symbolizing without it\n",
                 EscapeForTerminal(urls ? urls : "").c_str(), EscapeForTerminal(why).c_str());
  }

  std::mutex mu_;
  debuginfod_client* client_ = nullptr;  // guarded by mu_, as the library needs
  bool given_up_ = false;
  Fetch fetch_;                                         // what the progress line shows
  std::unordered_map<std::string, std::string> found_;  // by build-id; "" = none
};

}  // namespace

bool IsQueryableBuildId(const std::string& hex) {
  if (hex.size() < 2 || hex.size() > 128 || hex.size() % 2 != 0) return false;
  for (char c : hex) {
    if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'))) return false;
  }
  return true;
}

bool InstallDebuginfod(bool enabled) {
  const char* urls = std::getenv("DEBUGINFOD_URLS");
  if (!enabled || urls == nullptr || *urls == '\0') return false;
  // libdebuginfod retries a failed server twice by default, which makes an
  // unreachable one cost three timeouts; the user's own setting stands.
  // (Called from main before any thread: setenv is safe here.)
  setenv("DEBUGINFOD_RETRY_LIMIT", "0", /*overwrite=*/0);
  static Debuginfod* client = new Debuginfod;  // process-wide, never freed
  SetDebugFileFetcher([](const std::string& build_id) { return client->Find(build_id); });
  return true;
}

}  // namespace flightrec::recorder::symbolize
