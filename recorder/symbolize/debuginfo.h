// Where a file's symbols and DWARF come from when the file itself is
// stripped: separate debug files, found like gdb and elfutils find them, and
// (only when the caller asks) decompressed copies of compressed debug files.
#pragma once

#include <functional>
#include <string>
#include <vector>

namespace flightrec::recorder::symbolize {

// Debug directories: $FLIGHTREC_DEBUGINFO_PATH (colon-separated) or
// /usr/lib/debug.
std::vector<std::string> DefaultDebugDirs();

// The separate debug file of `path`: by build-id (hex) under
// <dir>/.build-id/xx/yyyy.debug for each debug directory, then by the file's
// .gnu_debuglink next to it, in its .debug/ subfolder and under
// <dir>/<its folder>/. Only a file whose build-id matches; "" if none.
std::string FindDebugFile(const std::vector<std::string>& debug_dirs, const std::string& path,
                          const std::string& build_id, const std::string& debuglink);

// Fetches the separate debug file of a build-id (hex) from elsewhere and
// returns a local path, or "". Nothing fetches unless a program installs one:
// the recorder CLI installs debuginfod's (debuginfod.h) when $DEBUGINFOD_URLS
// is set; recorderd and the core hook never link it. Called from any thread.
using DebugFileFetcher = std::function<std::string(const std::string& build_id)>;
void SetDebugFileFetcher(DebugFileFetcher fetcher);

// The installed fetcher's debug file for `path`, kept only if it is an ELF
// file of that build-id, read by the same bounded reader as local debug
// files (it is as untrusted as they are); "" if none.
std::string FetchDebugFile(const std::string& path, const std::string& build_id);

// Where decompressed copies of debug files are kept when a caller enables
// them: $FLIGHTREC_CACHE_DIR, /var/cache/flightrec for root, else
// $XDG_CACHE_HOME/flightrec or ~/.cache/flightrec.
std::string DefaultDecompressCacheDir();

// `path` itself, or a copy of it with its debug sections decompressed, made
// once per build-id under cache_dir/debug/ by running objcopy (a child
// process and a file written: only callers that set a cache directory get
// this, see Symbolizer::set_decompress_cache). "" cache_dir: always `path`.
std::string DecompressedCopy(const std::string& path, const std::string& cache_dir);

}  // namespace flightrec::recorder::symbolize
