#include "recorder/symbolize/debuginfo.h"

#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <mutex>
#include <sstream>

#include <fmt/format.h>

#include "common/subprocess.h"
#include "recorder/elf/build_id.h"
#include "recorder/symbolize/elf_symbols.h"

namespace flightrec::recorder::symbolize {
namespace {

bool Exists(const std::string& path) {
  struct stat st;
  return stat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode);
}

std::string DirName(const std::string& path) {
  size_t slash = path.rfind('/');
  return slash == std::string::npos ? "." : path.substr(0, slash);
}

// `candidate` is a readable ELF file, not `path` itself, whose build-id is
// `build_id` (any, if that is empty).
bool IsDebugFileFor(const std::string& candidate, const std::string& path,
                    const std::string& build_id) {
  if (candidate == path || !Exists(candidate)) return false;
  ElfFacts f;
  if (!ReadElfSymbols(candidate, nullptr, nullptr, &f)) return false;
  // Never trust a debug file that belongs to another build.
  return build_id.empty() || elf::HexBuildId(f.build_id) == build_id;
}

std::mutex fetcher_mu;
DebugFileFetcher* fetcher = nullptr;  // guarded by fetcher_mu; never freed

}  // namespace

void SetDebugFileFetcher(DebugFileFetcher f) {
  std::lock_guard lock(fetcher_mu);
  fetcher = f ? new DebugFileFetcher(std::move(f)) : nullptr;
}

std::string FetchDebugFile(const std::string& path, const std::string& build_id) {
  DebugFileFetcher* f;
  {
    std::lock_guard lock(fetcher_mu);
    f = fetcher;
  }
  if (f == nullptr || build_id.empty()) return "";
  std::string fetched = (*f)(build_id);
  return !fetched.empty() && IsDebugFileFor(fetched, path, build_id) ? fetched : "";
}

std::vector<std::string> DefaultDebugDirs() {
  std::vector<std::string> dirs;
  const char* env = std::getenv("FLIGHTREC_DEBUGINFO_PATH");
  std::string path = env && *env ? env : "/usr/lib/debug";
  std::stringstream ss(path);
  std::string dir;
  while (std::getline(ss, dir, ':')) {
    if (!dir.empty()) dirs.push_back(dir);
  }
  return dirs;
}

std::string FindDebugFile(const std::vector<std::string>& debug_dirs, const std::string& path,
                          const std::string& build_id, const std::string& debuglink) {
  auto matches = [&](const std::string& c) { return IsDebugFileFor(c, path, build_id); };
  if (build_id.size() > 2) {
    for (const auto& d : debug_dirs) {
      std::string c =
          fmt::format("{}/.build-id/{}/{}.debug", d, build_id.substr(0, 2), build_id.substr(2));
      if (matches(c)) return c;
    }
  }
  if (!debuglink.empty() && debuglink.find('/') == std::string::npos) {
    std::string dir = DirName(path);
    std::vector<std::string> cands = {dir + "/" + debuglink, dir + "/.debug/" + debuglink};
    for (const auto& d : debug_dirs) cands.push_back(d + dir + "/" + debuglink);
    for (const auto& c : cands) {
      if (matches(c)) return c;
    }
  }
  return "";
}

// Where decompressed copies of debug files are kept:
// $FLIGHTREC_CACHE_DIR, /var/cache/flightrec for root, else
// $XDG_CACHE_HOME/flightrec or ~/.cache/flightrec.
std::string DefaultDecompressCacheDir() {
  if (const char* d = std::getenv("FLIGHTREC_CACHE_DIR"); d && *d) return d;
  if (geteuid() == 0) return "/var/cache/flightrec";
  if (const char* x = std::getenv("XDG_CACHE_HOME"); x && *x) return std::string(x) + "/flightrec";
  if (const char* h = std::getenv("HOME"); h && *h) return std::string(h) + "/.cache/flightrec";
  return "";
}

// libdw inflates every compressed debug section when it opens a file: for a
// distribution's debug file (libc's: ~0.1 s of zlib) that is paid on every
// query. So a decompressed copy is made once per build-id, with objcopy, into
// the cache directory, and used from then on (mapped, nothing to inflate).
// Any failure falls back to the original file.
std::string DecompressedCopy(const std::string& path, const std::string& dir) {
  ElfFacts f;
  if (!ReadElfSymbols(path, nullptr, nullptr, &f) || !f.compressed_debug || f.build_id.empty()) {
    return path;
  }
  if (dir.empty()) return path;
  std::string hex = elf::HexBuildId(f.build_id);
  std::string cached = fmt::format("{}/debug/{}.debug", dir, hex);
  ElfFacts cf;
  if (ReadElfSymbols(cached, nullptr, nullptr, &cf) && cf.build_id == f.build_id &&
      !cf.compressed_debug) {
    return cached;
  }
  for (const std::string& d : {dir, dir + "/debug"}) {
    if (mkdir(d.c_str(), 0700) != 0 && errno != EEXIST) return path;
  }
  std::string tmp = fmt::format("{}.tmp-{}", cached, getpid());
  // `path` comes from a record: after `--`, a name like `--strip-all` is a
  // file, not an option.
  Status copied =
      RunToCompletion({"/usr/bin/objcopy", "--decompress-debug-sections", "--", path, tmp},
                      SpawnOptions{.quiet = true, .null_stdin = true});
  if (!copied.ok() || rename(tmp.c_str(), cached.c_str()) != 0) {
    unlink(tmp.c_str());
    return path;
  }
  return cached;
}

}  // namespace flightrec::recorder::symbolize
