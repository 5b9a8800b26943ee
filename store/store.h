// Store: a directory of record files plus their sqlite index.
//
// Commit protocol (docs/FORMAT.md, "Commit and recovery"): a record is
// written to `tmp/.tmp-<id>` in the store directory, created
// O_EXCL|O_NOFOLLOW and held under flock(LOCK_EX) while it is written; fsync;
// renameat2 (RENAME_NOREPLACE) to `<id>.frec`; fsync of the directory; then
// its index row in one transaction. Every path is resolved relative to the
// directory fd, so a symlink planted in the store is never followed.
//
// Opening recovers: temporaries whose writer is dead (flock free) are
// removed, complete files without a row are indexed from their table of
// contents, rows whose file vanished are marked `missing`. A `.frec` that
// cannot be read (damaged or hostile: every record is untrusted) is moved to
// `quarantine/` with one line on stderr saying which file and why. The walk
// of the directory that finds these is skipped while the directory is as the
// last reconcile (or the store's own changes since) left it
// (store/reconcile.cc); tmp/ is listed on every open.
//
// Thread: a Store is used by one thread; several processes may each open the
// same directory at once (a daemon and crash handlers).
#pragma once

#include <sys/types.h>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "common/scoped_fd.h"
#include "common/status.h"
#include "store/index.h"
#include "store/record_file.h"

namespace flightrec::store {

// /var/lib/flightrec for root; $XDG_STATE_HOME/flightrec or
// ~/.local/state/flightrec otherwise. FLIGHTREC_STORE overrides both.
std::string DefaultStoreDir();

struct RetentionLimits {
  // Unset = the systemd-coredump-like default computed from the filesystem:
  // max_use = 10% of its size capped at 4 GiB, keep_free = 15% capped at 4 GiB.
  std::optional<uint64_t> max_use;
  std::optional<uint64_t> keep_free;
  std::optional<int64_t> max_age_ns;  // unset = no age limit
  std::optional<uint64_t> max_count;  // unset = no count limit
  // Fleet mode keeps records until they are shipped; these bound what it
  // keeps while the endpoint is away, so that one user's crashes cannot
  // fill the disk. Unset = max_use (total) and half of that (per owner uid).
  std::optional<uint64_t> max_unshipped_use;
  std::optional<uint64_t> max_unshipped_use_per_uid;
};

struct StoreOptions {
  bool create = true;
  bool group_readable = false;  // 0750 instead of 0700 for a new store
  bool read_only = false;       // no recovery, no writes (for readers like `list`)
  // Walk and reconcile the whole directory even if it is unchanged since the
  // last reconcile (recorderd's start, `recorder verify`).
  bool full_recovery = false;
  WriterOptions writer;
  RetentionLimits retention;
  bool apply_retention_on_commit = true;
  // false: closing the store leaves the index's WAL for the next writer
  // (its auto-checkpoint every ~1000 pages, or its close) rather than
  // checkpointing and deleting it, ~4 syncs a short-lived writer such as
  // the coredump hook would wait for at every crash. Durability is not
  // weakened: a record is durable once its file and the directory are
  // fsynced in Commit; with synchronous=NORMAL the index row never was
  // synced by the commit itself, and a row lost with the WAL is re-indexed
  // from the file by the next writable Store::Open (Recover).
  bool checkpoint_index_on_close = true;
};

struct RecoveryReport {
  // The directory was walked and compared with every index row (false: it
  // was as the last reconcile left it, and only tmp/ was looked at).
  bool walked = false;
  int temporaries_removed = 0;
  int reindexed = 0;
  int marked_missing = 0;
  int unreadable = 0;  // complete-looking files that failed to open
  // One line per file moved to quarantine/ (also written to stderr).
  std::vector<std::string> quarantined;
  int links_removed = 0;      // by-uid/ links whose record is gone
  int foreign_in_by_uid = 0;  // non-links found in by-uid/<uid>/ (left alone)
};

struct VacuumReport {
  std::vector<std::string> removed;  // ids, in removal order
  // "age", "count", "max_use", "keep_free", "unshipped_per_uid", "unshipped"
  std::vector<std::string> reasons;
  uint64_t bytes_freed = 0;
  // keep_free could not be met even by removing every removable record (the
  // filesystem is full of other files), so nothing was removed for it.
  bool refused = false;
  std::vector<std::string> notes;  // why, for the user (and the record's meta)
};

struct CommitOptions {
  // Records retention must not remove while committing (e.g. the history
  // dump a crash refers to). Commit also protects the id in the committed
  // meta's `crash.history`.
  std::set<std::string> protect;
  // Whose space the record uses (meta `owner_uid`); unset = from the meta
  // (`crash.uid`), else root.
  std::optional<uint32_t> owner_uid;
};

// A record being written; obtained from Store::BeginRecord. Destroying it
// without Commit removes the temporary file.
class PendingRecord {
 public:
  ~PendingRecord();
  RecordWriter& writer() { return *writer_; }
  const std::string& id() const { return id_; }

 private:
  friend class Store;
  PendingRecord() = default;
  int tmpfd_ = -1;  // the store's tmp/
  std::string id_;
  std::string tmp_name_;
  std::unique_ptr<RecordWriter> writer_;
  bool done_ = false;
};

class Store {
 public:
  static StatusOr<std::unique_ptr<Store>> Open(const std::string& dir,
                                               const StoreOptions& options = {});
  ~Store();

  const std::string& dir() const { return dir_; }
  const RecoveryReport& recovery() const { return recovery_; }
  Index& index() { return *index_; }

  StatusOr<std::unique_ptr<PendingRecord>> BeginRecord(const std::string& kind);
  // Finishes the file with `meta` in its TOC, makes it visible, indexes it,
  // then applies retention (never to the record just committed).
  // Retention notes (keep-free refused) are added to the meta as
  // `store_notes`.
  StatusOr<RecordRow> Commit(std::unique_ptr<PendingRecord> record, const nlohmann::json& meta,
                             const CommitOptions& commit = {});

  StatusOr<std::vector<RecordRow>> List(const ListQuery& q) { return index_->List(q); }
  StatusOr<RecordRow> Get(const std::string& id_or_prefix) { return index_->Resolve(id_or_prefix); }
  StatusOr<std::unique_ptr<RecordReader>> OpenRecord(const std::string& id_or_prefix);
  // Checks one record (or all): file present, its header/TOC agree with the
  // index row, every section's checksum. Returns one problem string per bad
  // record (empty = all good).
  StatusOr<std::vector<std::string>> Verify(const std::optional<std::string>& id);
  // The same checks, with each record's result and each section's (for
  // `recorder verify --json`). Marks rows corrupt/missing/ok like Verify.
  struct SectionCheck {
    std::string name;
    uint64_t raw_size = 0, stored_size = 0;
    std::string error;  // empty: checksum and size good
  };
  struct RecordCheck {
    RecordRow row;
    std::string error;  // empty: the record is good
    std::vector<SectionCheck> sections;
  };
  StatusOr<std::vector<RecordCheck>> Check(const std::optional<std::string>& id);
  StatusOr<VacuumReport> Vacuum(const RetentionLimits& limits, bool dry_run = false,
                                const std::string& keep_id = "");
  // Never removes an id in `protect`. Space (count, max_use, keep_free) is
  // reclaimed from the owner uid using the most first, oldest record first.
  StatusOr<VacuumReport> Vacuum(const RetentionLimits& limits, bool dry_run,
                                const std::set<std::string>& protect);
  // Effective limits after defaults from the filesystem's size.
  StatusOr<RetentionLimits> EffectiveLimits(const RetentionLimits& limits) const;
  StatusOr<uint64_t> TotalBytes();

  // Lets `uid` read one record (an id, unique prefix or `<id>.frec`): a
  // named-user read entry in the file's ACL (as systemd-coredump does), and
  // the link by-uid/<uid>/<id>.frec -> ../../<id>.frec through which the user
  // finds it, since others may search the store but not list it
  // (docs/FORMAT.md, "Who may read what"). Refuses anything in by-uid/ it did
  // not make.
  Status GrantReader(const std::string& record_id_or_file, uid_t uid);

 private:
  Store() = default;
  class DirChange;
  // Removes dead writers' temporaries from tmp/, then walks the directory
  // (Recover) unless it matches the stamp of the last reconcile.
  Status Reconcile();
  Status OpenTmpDir();
  // The store directory and by-uid/'s directories as stat() sees them, one
  // string; MarkDirs gives each a modification time no later change can
  // have (store/reconcile.cc says why).
  StatusOr<std::string> DirStamp();
  void MarkDirs();
  bool LockDir();  // bounded wait; false: not locked
  void UnlockDir();
  Status Recover();
  Status Unlink(const std::string& name);
  void Quarantine(const std::string& name, const Status& why);
  void MakePrivate();
  void RemoveGrants(const std::string& file);  // the by-uid/ links to `file`
  // Drops links whose record is gone; in a store without by-uid/ yet, links
  // the records that `files` grant by ACL.
  void RecoverGrants(const std::set<std::string>& files);
  Status LinkGrant(const std::string& file, uid_t uid);  // by-uid/<uid>/<file>
  // Fleet mode's bound on unshipped records (EffectiveLimits' unshipped
  // limits): removes through `remove`, logs each, and counts them in
  // fleet/evicted.
  using RemoveFn = std::function<Status(const RecordRow&, const char*)>;
  Status EvictUnshippedRecords(const std::vector<RecordRow>& rows,
                               const std::set<std::string>& shipped,
                               const std::set<std::string>& protect,
                               const std::set<std::string>& gone, const RetentionLimits& lim,
                               bool dry_run, const RemoveFn& remove);

  std::string dir_;
  ScopedFd dirfd_;
  ScopedFd tmpfd_;  // tmp/: the temporaries (the store's own directory)
  bool locked_ = false;
  bool live_temps_ = false;  // the walk left a live writer's temporary
  StoreOptions options_;
  std::unique_ptr<Index> index_;
  RecoveryReport recovery_;
};

// For a user who cannot read the index: the record files in `store_dir`
// granted to `uid` (the links in by-uid/<uid>/). With nothing granted, a
// store the caller may list (their own) gives all its record files, one they
// may not (a root store, 0711) gives none. Only names are returned; open them
// with OpenGrantedRecord, which fails for a file not readable by the caller.
StatusOr<std::vector<std::string>> GrantedRecordFiles(const std::string& store_dir, uid_t uid);
StatusOr<std::unique_ptr<RecordReader>> OpenGrantedRecord(const std::string& store_dir,
                                                          const std::string& file);

// Unshipped records retention removed in fleet mode (since the store's
// fleet/ directory was made), kept in `fleet/evicted` for `recorder status`.
struct UnshippedEvictions {
  uint64_t records = 0;
  uint64_t bytes = 0;
};
StatusOr<UnshippedEvictions> ReadUnshippedEvictions(const std::string& store_dir);

// Record ids are time-sortable: "20261122T120633Z-3f9a2c".
std::string NewRecordId(int64_t wall_ns);

}  // namespace flightrec::store
