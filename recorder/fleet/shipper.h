// Shipper: uploads every committed record of a store to S3, once.
//
// Flow (docs/ARCHITECTURE.md, "Fleet mode"): a committed record
// (`<store>/<id>.frec`, made visible by the store's rename) → SHA-256 of the
// file → HEAD of its key `HOST/YYYY/MM/DD/<id>.frec` (an object already there
// with the same x-amz-meta-sha256 is not uploaded again: a restart between
// upload and journal costs a HEAD, never a second copy) → PUT or multipart
// upload, verified by the gateway → on_uploaded (fleet-pg's index insert)
// → one line appended to the journal `<store>/fleet/journal` and fsynced.
// A backlog goes in batches: up to batch_records uploads, then one index
// transaction and one journal write + fdatasync for all of them.
// A record is "confirmed" once its line is in the journal; the store's
// retention (store/store.cc, Store::Vacuum) never removes a record that is
// not confirmed while that journal exists, so nothing is deleted locally
// before its upload (and index row) is confirmed.
//
// The shipper runs on its own thread (Start/Stop), woken by inotify when a
// record is renamed into the store and every `rescan_interval` otherwise.
// While the gateway is away (connection refused, 5xx) or refuses (quota,
// credentials), it retries with exponential backoff up to `backoff_max`,
// logging each distinct error once. It never blocks the recorder.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "common/scoped_fd.h"
#include "common/status.h"
#include "recorder/fleet/fleet_config.h"
#include "recorder/fleet/s3_client.h"

namespace flightrec::fleet {

struct UploadedRecord {
  std::string record_id;
  std::string key;     // object key in the bucket
  std::string sha256;  // hex, of the whole record file
  uint64_t bytes = 0;
  std::filesystem::path path;    // the local record file
  bool already_present = false;  // found in the bucket by HEAD, not PUT
};

struct ShipperOptions {
  std::filesystem::path store_dir;
  std::string host_id;
  S3Options s3;
  // Index insertion (fleet-pg). Called after the object is confirmed in S3
  // and before the journal line: an error leaves the record unconfirmed and
  // it is retried (the upload then costs one HEAD), so the callback must be
  // idempotent (e.g. INSERT ... ON CONFLICT DO NOTHING).
  std::function<Status(const UploadedRecord&)> on_uploaded;
  // The same for several records at once (one index transaction for a
  // backlog, e.g. after an outage); preferred to on_uploaded when set. An
  // error leaves every record of the batch unconfirmed.
  std::function<Status(const std::vector<UploadedRecord>&)> on_uploaded_batch;
  // A batch is at most this many records or bytes: the records of a backlog
  // are uploaded one by one, then indexed and journaled (one fdatasync)
  // together. 1 confirms each record as soon as it is uploaded.
  size_t batch_records = 64;
  uint64_t batch_bytes = 256ull << 20;
  std::chrono::milliseconds rescan_interval{30'000};
  std::chrono::milliseconds backoff_initial{500};
  std::chrono::milliseconds backoff_max{60'000};
};

// ShipperOptions from a loaded fleet config.
ShipperOptions ShipperOptionsFromConfig(const FleetConfig& config,
                                        const std::filesystem::path& store_dir);

// `HOST/YYYY/MM/DD/<id>.frec` for a store record id
// ("20261122T120633Z-3f9a2c"); InvalidArgument for anything else.
StatusOr<std::string> ObjectKeyFor(const std::string& host_id, const std::string& record_id);

// The journal's path in a store, and the ids it confirms (a torn last line,
// from a crash mid-append, is ignored).
std::filesystem::path JournalPath(const std::filesystem::path& store_dir);
StatusOr<std::set<std::string>> ReadJournal(const std::filesystem::path& store_dir);

// What `recorder status` shows of the shipper (recorderd's "fleet" object).
struct ShipperStats {
  uint64_t uploaded = 0;              // objects PUT by this process
  uint64_t already_present = 0;       // found by HEAD with the same sha256
  uint64_t shipped_bytes = 0;         // bytes of the records this process confirmed
  uint64_t confirmed = 0;             // journal lines (all time)
  uint64_t failures = 0;              // failed attempts, each followed by a retry
  uint64_t consecutive_failures = 0;  // since the last pass that succeeded
  uint64_t pending = 0;               // committed records not yet confirmed (last scan)
  uint64_t pending_bytes = 0;         // their bytes
  std::string last_error;             // empty once a pass succeeds
  int64_t last_error_unix_ns = 0;
  int64_t last_success_unix_ns = 0;  // a record last confirmed (0: none yet)
  int64_t backoff_ms = 0;            // the wait before the next attempt (0: not backing off)
  std::string uploading;             // the record being sent now, if any
};

class Shipper {
 public:
  static StatusOr<std::unique_ptr<Shipper>> Create(ShipperOptions options);
  ~Shipper();

  // One pass over the store: every unconfirmed record is shipped. Returns
  // the number confirmed, or the first error (the pass stops there: the
  // gateway is down or refusing).
  StatusOr<int> ShipOnce();

  void Start();  // the worker thread
  void Stop();   // joins it; an upload in flight is abandoned (and retried next time)
  ShipperStats stats() const;

 private:
  explicit Shipper(ShipperOptions options) : options_(std::move(options)) {}
  // Uploads one record unless the bucket has it; nullopt if the file is
  // gone (removed before fleet mode was on, or quarantined).
  StatusOr<std::optional<UploadedRecord>> Upload(const std::string& id);
  // Indexes (on_uploaded*) then journals the batch, and clears it.
  Status Confirm(std::vector<UploadedRecord>* batch);
  Status AppendJournal(const std::vector<UploadedRecord>& recs);
  void Loop();

  ShipperOptions options_;
  std::unique_ptr<S3Client> s3_;
  ScopedFd journal_fd_;
  ScopedFd inotify_fd_;
  ScopedFd wake_fd_;  // eventfd: Stop()
  std::set<std::string> confirmed_;
  std::thread thread_;
  std::atomic<bool> stop_{false};
  mutable std::mutex mu_;  // guards stats_
  ShipperStats stats_;
};

}  // namespace flightrec::fleet
