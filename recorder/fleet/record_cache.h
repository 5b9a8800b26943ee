// Records fetched from the fleet's object storage, cached locally by id and
// verified by their SHA-256 from the index, so that `recorder --fleet CONFIG
// report|script|timeline|export ID` run the same pipeline as for a local
// record, on a file whose bytes are exactly those the host shipped.
//
// The object storage side is an ObjectFetcher (the S3 client implements it);
// this file owns the cache and the verification, which is where a truncated
// download, a corrupted object or a wrong key would otherwise become a wrong
// report. A cached file is re-verified on every use (a cache directory is
// no more trustworthy than a download).
//
// Thread: one RecordCache per thread; several processes may share the
// directory (a download lands in a private temporary file and is renamed
// into place).
#pragma once

#include <cstdint>
#include <string>

#include "common/status.h"
#include "recorder/fleet/fleet_index.h"

namespace flightrec::fleet {

class ObjectFetcher {
 public:
  virtual ~ObjectFetcher() = default;
  // Writes object `key`'s bytes to `fd` (an empty file open for writing).
  // More than `max_bytes` is an error (the index says how large it is).
  // kUnavailable when the store may answer later.
  virtual Status Fetch(const std::string& key, int fd, uint64_t max_bytes) = 0;
};

class RecordCache {
 public:
  // Creates `dir` (0700) if needed. It and every directory above it must be
  // root's or the caller's and writable by nobody else (CheckPrivateDir):
  // whoever controls it could replace a record between its check and its use.
  // The cached records together stay within `max_bytes` ([Fleet]
  // CacheMaxUse=), the least recently used removed first.
  static StatusOr<RecordCache> Open(const std::string& dir, uint64_t max_bytes);

  // The local path of `rec`'s file: from the cache when a file there has
  // its size and SHA-256, else fetched (a cached file that fails the check
  // is replaced). Corrupt when the fetched bytes are not the index's.
  StatusOr<std::string> Get(const IndexRecord& rec, ObjectFetcher& fetcher);

  // Where `rec` is cached (whether or not it is there yet).
  StatusOr<std::string> PathFor(const IndexRecord& rec) const;
  const std::string& dir() const { return dir_; }

 private:
  RecordCache(std::string dir, uint64_t max_bytes) : dir_(std::move(dir)), max_bytes_(max_bytes) {}
  // Removes cached records, least recently used first, until `incoming`
  // more bytes fit within max_bytes_.
  Status MakeRoom(uint64_t incoming);
  std::string dir_;
  uint64_t max_bytes_;
};

// The hook `report/script/timeline/export ID` use: the index names the
// record (ID, HOST/ID or a unique prefix), the cache provides its file.
StatusOr<std::string> FetchRecord(FleetIndex& index, RecordCache& cache, ObjectFetcher& fetcher,
                                  const std::string& id);

}  // namespace flightrec::fleet
