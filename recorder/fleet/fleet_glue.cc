#include "recorder/fleet/fleet_glue.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <optional>
#include <vector>

#include <fmt/format.h>

#include "common/scoped_fd.h"
#include "recorder/fleet/fleet_index.h"
#include "recorder/fleet/index_shipped_pg.h"

namespace flightrec::fleet {
namespace {

// The callback's state: one connection, owned by the shipper's thread.
struct Indexer {
  std::string conninfo;
  std::string password;
  std::string host_id;
  std::optional<FleetIndex> index;
  bool migrated = false;

  Status Ready() {
    if (!index) {
      auto idx = FleetIndex::Connect(conninfo, password);
      if (!idx.ok()) return idx.status().Annotate("fleet index (PostgreSQL)");
      index.emplace(std::move(*idx));
    }
    if (!migrated) {
      Status st = index->Migrate();
      if (!st.ok()) return st.Annotate("fleet index (PostgreSQL) schema migration");
      migrated = true;
    }
    return OkStatus();
  }

  ShippedRecord Shipped(const UploadedRecord& rec) const {
    ShippedRecord s;
    s.host_id = host_id;
    s.record_id = rec.record_id;
    s.object_key = rec.key;
    s.sha256 = rec.sha256;
    s.bytes = rec.bytes;
    s.record_path = rec.path.string();
    return s;
  }

  Status Index(const UploadedRecord& rec) {
    RETURN_IF_ERROR(Ready());
    auto added = IndexShippedRecord(*index, Shipped(rec));
    if (!added.ok()) {
      return added.status().Annotate("fleet index (PostgreSQL) of record " + rec.record_id);
    }
    return OkStatus();
  }

  Status IndexBatch(const std::vector<UploadedRecord>& recs) {
    RETURN_IF_ERROR(Ready());
    std::vector<ShippedRecord> shipped;
    for (const auto& r : recs) shipped.push_back(Shipped(r));
    auto added = IndexShippedRecords(*index, shipped);
    if (!added.ok()) {
      return added.status().Annotate(fmt::format("fleet index (PostgreSQL) of {} record(s) from {}",
                                                 recs.size(), recs.front().record_id));
    }
    return OkStatus();
  }
};

}  // namespace

std::function<Status(const UploadedRecord&)> MakeIndexingCallback(const FleetConfig& config,
                                                                  const std::string& host_id) {
  auto state = std::make_shared<Indexer>();
  state->conninfo = config.pg_conninfo;
  state->password = config.pg_password;
  state->host_id = host_id;
  return [state](const UploadedRecord& rec) { return state->Index(rec); };
}

std::function<Status(const std::vector<UploadedRecord>&)> MakeBatchIndexingCallback(
    const FleetConfig& config, const std::string& host_id) {
  auto state = std::make_shared<Indexer>();
  state->conninfo = config.pg_conninfo;
  state->password = config.pg_password;
  state->host_id = host_id;
  return [state](const std::vector<UploadedRecord>& recs) { return state->IndexBatch(recs); };
}

StatusOr<std::unique_ptr<S3ObjectFetcher>> S3ObjectFetcher::Create(const FleetConfig& config,
                                                                   std::string scratch_dir) {
  S3Options o;
  o.endpoint = config.s3_endpoint;
  o.bucket = config.s3_bucket;
  o.region = config.s3_region;
  o.access_key = config.s3_access_key;
  o.secret_key = config.s3_secret_key;
  ASSIGN_OR_RETURN(auto s3, S3Client::Create(o));
  return std::unique_ptr<S3ObjectFetcher>(
      new S3ObjectFetcher(std::move(s3), std::move(scratch_dir)));
}

Status S3ObjectFetcher::Fetch(const std::string& key, int fd, uint64_t max_bytes) {
  ASSIGN_OR_RETURN(auto head, s3_->Head(key));
  if (!head) return NotFound("no object " + key + " in the bucket");
  if (head->size > max_bytes) {
    return Corrupt(fmt::format("object {} has {} bytes, more than the {} the index says", key,
                               head->size, max_bytes));
  }
  // GetToFile renames its download onto a path; the scratch name is
  // reserved first so two fetches never share it.
  std::string tmp = scratch_dir_ + "/.s3-fetch-XXXXXX";
  ScopedFd reserve(mkostemp(tmp.data(), O_CLOEXEC));
  if (!reserve) return ErrnoStatus("creating a file in " + scratch_dir_);
  reserve.reset();
  // At most the size HEAD announced (and the index allows): a server that
  // streams more is cut off at once, not after filling the disk.
  auto got = s3_->GetToFile(key, tmp, head->sha256, head->size);
  Status st = got.status();
  if (st.ok()) {
    ScopedFd in(open(tmp.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW));
    if (!in) st = ErrnoStatus("opening " + tmp);
    std::vector<char> buf(1 << 20);
    uint64_t total = 0;
    while (st.ok()) {
      ssize_t n = read(in.get(), buf.data(), buf.size());
      if (n < 0 && errno == EINTR) continue;
      if (n < 0) {
        st = ErrnoStatus("reading " + tmp);
        break;
      }
      if (n == 0) break;
      total += static_cast<uint64_t>(n);
      if (total > max_bytes) {
        st = Corrupt(
            fmt::format("object {} is larger than the {} bytes the index says", key, max_bytes));
        break;
      }
      for (ssize_t off = 0; off < n && st.ok();) {
        ssize_t w = write(fd, buf.data() + off, static_cast<size_t>(n - off));
        if (w < 0 && errno == EINTR) continue;
        if (w < 0)
          st = ErrnoStatus("writing the fetched record");
        else
          off += w;
      }
    }
  }
  unlink(tmp.c_str());
  return st;
}

}  // namespace flightrec::fleet
