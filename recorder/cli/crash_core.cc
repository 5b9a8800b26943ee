// recorder crash core: a crash's core, decompressed into a file.
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "common/checked_json.h"
#include "common/regular_file.h"
#include "common/scoped_fd.h"
#include "common/terminal_escape.h"
#include "recorder/cli/crash_internal.h"
#include "recorder/record/crash_record.h"
#include "recorder/record/sections.h"

namespace flightrec::recorder::cli {

Status WriteCore(const CliContext& ctx, const std::string& id_arg, int fd, std::string* exe) {
  ASSIGN_OR_RETURN(auto found, OpenCrash(ctx, id_arg));
  auto& [row, reader] = found;
  const std::string id = row.id;
  if (row.kind == kKindPanic) {
    return InvalidArgument(
        fmt::format("{} is a kernel panic: it has no core (see recorder crash info {})", id, id));
  }
  RETURN_IF_ERROR(CheckAccess(row.meta));
  // The exact bytes of the path (a file name need not be UTF-8).
  if (exe) *exe = json::RawText(json::Object(row.meta, "crash"), "exe");
  if (!reader->FindSection(kCrashSection.core)) {
    return NotFound(
        fmt::format("crash {} has no core stored ({})", id,
                    json::Get<bool>(json::Object(row.meta, "crash"), "rate_limited", false)
                        ? "rate limited"
                        : "see `recorder crash info`"));
  }
  ASSIGN_OR_RETURN(auto sec, reader->OpenSection(kCrashSection.core));
  std::vector<char> buf(1 << 20);
  for (;;) {
    ASSIGN_OR_RETURN(size_t n, sec->Read(buf.data(), buf.size()));
    if (n == 0) break;
    for (size_t off = 0; off < n;) {
      ssize_t w = write(fd, buf.data() + off, n - off);
      if (w < 0 && errno == EINTR) continue;
      if (w <= 0) return ErrnoStatus("writing the core");
      off += static_cast<size_t>(w);
    }
  }
  return OkStatus();
}

namespace {

// Writes the core to `out`: into a new file of an unpredictable name next to
// it (O_EXCL, mode 0600: a core holds the process's memory), renamed into
// place when complete.
// A device or FIFO (-o /dev/null) is written in place, never renamed over.
Status ExtractCore(const CliContext& ctx, const std::string& id_arg, const std::string& out) {
  if (IsExistingNonRegular(out)) {
    ScopedFd fd(open(out.c_str(), O_WRONLY | O_CLOEXEC));
    if (!fd) return ErrnoStatus("cannot write " + out);
    return WriteCore(ctx, id_arg, fd.get(), nullptr);
  }
  std::string tmpl = out + ".tmp-XXXXXX";
  ScopedFd fd(mkostemp(tmpl.data(), O_CLOEXEC));
  if (!fd) return ErrnoStatus("cannot write " + out);
  Status st = WriteCore(ctx, id_arg, fd.get(), nullptr);
  if (st.ok() && fsync(fd.get()) != 0) st = ErrnoStatus("writing " + out);
  if (st.ok() && rename(tmpl.c_str(), out.c_str()) != 0) st = ErrnoStatus("writing " + out);
  if (!st.ok()) unlink(tmpl.c_str());
  return st;
}

}  // namespace

Status RunCrashCore(const CliContext& ctx, const std::string& id, const std::string& out,
                    bool as_json) {
  RETURN_IF_ERROR(ExtractCore(ctx, id, out));
  if (as_json) {
    struct stat st {};
    uint64_t bytes = stat(out.c_str(), &st) == 0 ? static_cast<uint64_t>(st.st_size) : 0;
    std::printf(
        "%s\n",
        json::Dump(nlohmann::json{{"crash", id}, {"output", out}, {"bytes", bytes}}, 2).c_str());
    return OkStatus();
  }
  std::fprintf(stderr, "wrote the core of %s to %s\n", EscapeForTerminal(id).c_str(),
               EscapeForTerminal(out).c_str());
  return OkStatus();
}

}  // namespace flightrec::recorder::cli
