// recorder crash core: a crash's core, decompressed into a file.
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "common/atomic_output_file.h"
#include "common/checked_json.h"
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
  if (row.kind == RecordKind::kPanic) {
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

// Writes the core to `out` through an AtomicOutputFile (mode 0600: a core
// holds the process's memory).
Status ExtractCore(const CliContext& ctx, const std::string& id_arg, const std::string& out) {
  ASSIGN_OR_RETURN(auto file, AtomicOutputFile::Open(out, 0600));
  RETURN_IF_ERROR(WriteCore(ctx, id_arg, file.fd(), nullptr));
  return file.Commit();
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
