#include "recorder/fleet/shipper.h"

#include <dirent.h>
#include <fcntl.h>
#include <poll.h>
#include <sys/eventfd.h>
#include <sys/inotify.h>
#include <sys/stat.h>
#include <unistd.h>

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <chrono>
#include <vector>

namespace flightrec::fleet {
namespace {

constexpr const char* kSuffix = ".frec";
// The journal is read whole at start; a line is ~150 bytes, so this is
// about a million records, far more than a store's retention keeps.
constexpr uint64_t kMaxJournalBytes = 256ull << 20;

int64_t UnixNowNs() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

bool ValidRecordId(const std::string& id) {
  // store::NewRecordId: "YYYYMMDDTHHMMSSZ-hex".
  if (id.size() < 18 || id.size() > 64 || id[8] != 'T' || id[15] != 'Z' || id[16] != '-') {
    return false;
  }
  for (size_t i = 0; i < id.size(); ++i) {
    if (i == 8 || i == 15 || i == 16) continue;
    bool digit = std::isdigit(static_cast<unsigned char>(id[i]));
    if (i < 15 ? !digit : !(digit || (id[i] >= 'a' && id[i] <= 'f') || id[i] == '-')) return false;
  }
  return true;
}

}  // namespace

ShipperOptions ShipperOptionsFromConfig(const FleetConfig& c,
                                        const std::filesystem::path& store_dir) {
  ShipperOptions o;
  o.store_dir = store_dir;
  o.host_id = c.host_id;
  o.s3.endpoint = c.s3_endpoint;
  o.s3.bucket = c.s3_bucket;
  o.s3.region = c.s3_region;
  o.s3.access_key = c.s3_access_key;
  o.s3.secret_key = c.s3_secret_key;
  o.s3.max_send_bytes_per_sec = c.max_upload_bytes_per_sec;
  o.s3.low_speed_time_s = c.s3_timeout_s;
  o.s3.connect_timeout_s = std::min<long>(o.s3.connect_timeout_s, c.s3_timeout_s);
  o.backoff_max = std::chrono::milliseconds(c.retry_max_delay_ms);
  o.backoff_initial = std::min(o.backoff_initial, o.backoff_max);
  return o;
}

StatusOr<std::string> ObjectKeyFor(const std::string& host_id, const std::string& id) {
  if (!ValidRecordId(id)) return InvalidArgument("not a record id: '" + id.substr(0, 64) + "'");
  std::string key = fmt::format("{}/{}/{}/{}/{}{}", host_id, id.substr(0, 4), id.substr(4, 2),
                                id.substr(6, 2), id, kSuffix);
  if (!ValidObjectKey(key)) return InvalidArgument("host id not usable in an object key");
  return key;
}

std::filesystem::path JournalPath(const std::filesystem::path& store_dir) {
  return store_dir / "fleet" / "journal";
}

StatusOr<std::set<std::string>> ReadJournal(const std::filesystem::path& store_dir) {
  std::set<std::string> ids;
  auto path = JournalPath(store_dir);
  ScopedFd fd(open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW));
  if (!fd) {
    if (errno == ENOENT) return ids;
    return ErrnoStatus(path.string() + ": open");
  }
  struct stat st {};
  if (fstat(fd.get(), &st) != 0) return ErrnoStatus(path.string() + ": fstat");
  if (static_cast<uint64_t>(st.st_size) > kMaxJournalBytes) {
    return Corrupt(fmt::format("{}: larger than {} bytes", path.string(), kMaxJournalBytes));
  }
  std::string text(static_cast<size_t>(st.st_size), '\0');
  size_t got = 0;
  while (got < text.size()) {
    ssize_t n = read(fd.get(), text.data() + got, text.size() - got);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return ErrnoStatus(path.string() + ": read");
    if (n == 0) break;
    got += static_cast<size_t>(n);
  }
  text.resize(got);
  size_t pos = 0;
  for (;;) {
    size_t nl = text.find('\n', pos);
    if (nl == std::string::npos) break;  // a torn last line confirms nothing
    std::string line = text.substr(pos, nl - pos);
    pos = nl + 1;
    std::string id = line.substr(0, line.find(' '));
    if (ValidRecordId(id)) ids.insert(id);
  }
  return ids;
}

StatusOr<std::unique_ptr<Shipper>> Shipper::Create(ShipperOptions options) {
  if (options.host_id.empty()) return InvalidArgument("fleet: no host id");
  std::unique_ptr<Shipper> s(new Shipper(std::move(options)));
  s->options_.s3.abort = &s->stop_;
  ASSIGN_OR_RETURN(s->s3_, S3Client::Create(s->options_.s3));
  auto dir = s->options_.store_dir / "fleet";
  if (mkdir(dir.c_str(), 0700) != 0 && errno != EEXIST) {
    return ErrnoStatus(dir.string() + ": mkdir");
  }
  ASSIGN_OR_RETURN(s->confirmed_, ReadJournal(s->options_.store_dir));
  auto jp = JournalPath(s->options_.store_dir);
  // Its existence is what tells the store's retention to keep unconfirmed
  // records (store/store.cc), so it is created before anything is shipped.
  s->journal_fd_.reset(
      open(jp.c_str(), O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600));
  if (!s->journal_fd_) return ErrnoStatus(jp.string() + ": open");
  s->stats_.confirmed = s->confirmed_.size();
  return s;
}

Shipper::~Shipper() { Stop(); }

Status Shipper::AppendJournal(const std::vector<UploadedRecord>& recs) {
  // One write of whole lines (O_APPEND), then fdatasync: after a crash the
  // journal ends with whole lines or one torn line, which ReadJournal skips.
  std::string lines;
  for (const auto& rec : recs) {
    lines += fmt::format("{} {} {} {}\n", rec.record_id, rec.sha256, rec.bytes, rec.key);
  }
  ssize_t n = write(journal_fd_.get(), lines.data(), lines.size());
  if (n != static_cast<ssize_t>(lines.size())) {
    return ErrnoStatus(JournalPath(options_.store_dir).string() + ": append");
  }
  if (fdatasync(journal_fd_.get()) != 0) {
    return ErrnoStatus(JournalPath(options_.store_dir).string() + ": fdatasync");
  }
  for (const auto& rec : recs) confirmed_.insert(rec.record_id);
  std::lock_guard<std::mutex> l(mu_);
  stats_.confirmed = confirmed_.size();
  return OkStatus();
}

StatusOr<std::optional<UploadedRecord>> Shipper::Upload(const std::string& id) {
  UploadedRecord rec;
  rec.record_id = id;
  rec.path = options_.store_dir / (id + kSuffix);
  ASSIGN_OR_RETURN(rec.key, ObjectKeyFor(options_.host_id, id));
  // A committed record is immutable: its digest now is what gets uploaded
  // (PutFile re-checks it while sending).
  auto digest = DigestFile(rec.path);
  if (!digest.ok()) {
    // Removed by retention before fleet mode was on, or quarantined.
    if (digest.status().code() == StatusCode::kNotFound) return std::optional<UploadedRecord>();
    return digest.status();
  }
  rec.sha256 = digest->sha256_hex;
  rec.bytes = digest->size;
  ASSIGN_OR_RETURN(auto head, s3_->Head(rec.key));
  if (head.has_value()) {
    if (head->sha256 != rec.sha256) {
      // Never overwrite: a different object under this record's key is a
      // conflict someone must look at (same host id on two machines?).
      return Status(
          StatusCode::kAlreadyExists,
          fmt::format("fleet: {} exists in bucket {} with sha256 {}, the local record "
                      "has {} (two hosts with one HostId?)",
                      rec.key, options_.s3.bucket, head->sha256.substr(0, 64), rec.sha256));
    }
    rec.already_present = true;
    return std::optional<UploadedRecord>(std::move(rec));
  }
  spdlog::info("fleet: uploading {} ({} bytes) to {}", id, rec.bytes, rec.key);
  {
    std::lock_guard<std::mutex> l(mu_);
    stats_.uploading = id;
  }
  Status put = s3_->PutFile(rec.key, rec.path, *digest);
  {
    std::lock_guard<std::mutex> l(mu_);
    stats_.uploading.clear();
  }
  RETURN_IF_ERROR(put);
  return std::optional<UploadedRecord>(std::move(rec));
}

Status Shipper::Confirm(std::vector<UploadedRecord>* batch) {
  if (batch->empty()) return OkStatus();
  if (options_.on_uploaded_batch) {
    RETURN_IF_ERROR(options_.on_uploaded_batch(*batch));
  } else if (options_.on_uploaded) {
    for (const auto& rec : *batch) RETURN_IF_ERROR(options_.on_uploaded(rec));
  }
  RETURN_IF_ERROR(AppendJournal(*batch));
  std::lock_guard<std::mutex> l(mu_);
  for (const auto& rec : *batch) {
    (rec.already_present ? stats_.already_present : stats_.uploaded)++;
    stats_.shipped_bytes += rec.bytes;
    stats_.pending -= std::min<uint64_t>(stats_.pending, 1);
    stats_.pending_bytes -= std::min(stats_.pending_bytes, rec.bytes);
  }
  stats_.last_success_unix_ns = UnixNowNs();
  batch->clear();
  return OkStatus();
}

StatusOr<int> Shipper::ShipOnce() {
  std::vector<std::string> ids;
  {
    DIR* d = opendir(options_.store_dir.c_str());
    if (!d) return ErrnoStatus(options_.store_dir.string() + ": opendir");
    while (struct dirent* e = readdir(d)) {
      std::string name = e->d_name;
      if (name.size() <= 5 || name.compare(name.size() - 5, 5, kSuffix) != 0) continue;
      std::string id = name.substr(0, name.size() - 5);
      if (ValidRecordId(id) && !confirmed_.count(id)) ids.push_back(id);
    }
    closedir(d);
  }
  std::sort(ids.begin(), ids.end());  // oldest first: ids sort by time
  uint64_t pending_bytes = 0;
  for (const auto& id : ids) {
    struct stat st {};
    auto p = options_.store_dir / (id + kSuffix);
    if (stat(p.c_str(), &st) == 0) pending_bytes += static_cast<uint64_t>(st.st_size);
  }
  {
    std::lock_guard<std::mutex> l(mu_);
    stats_.pending = ids.size();
    stats_.pending_bytes = pending_bytes;
  }
  int done = 0;
  std::vector<UploadedRecord> batch;
  uint64_t batch_bytes = 0;
  Status st;
  for (const auto& id : ids) {
    if (stop_) break;
    auto up = Upload(id);
    if (!up.ok()) {
      st = up.status();
      break;
    }
    if (!up->has_value()) {  // gone: nothing to ship
      std::lock_guard<std::mutex> l(mu_);
      stats_.pending -= std::min<uint64_t>(stats_.pending, 1);
      continue;
    }
    batch_bytes += (*up)->bytes;
    batch.push_back(std::move(**up));
    if (batch.size() >= std::max<size_t>(options_.batch_records, 1) ||
        batch_bytes >= options_.batch_bytes) {
      const size_t n = batch.size();
      st = Confirm(&batch);
      if (!st.ok()) {
        batch.clear();  // unconfirmed; the next pass finds them by HEAD
        break;
      }
      done += static_cast<int>(n);
      batch_bytes = 0;
    }
  }
  // What was uploaded before an upload error (or a stop) is confirmed now:
  // the next pass then starts after it.
  if (!batch.empty()) {
    const size_t n = batch.size();
    Status c = Confirm(&batch);
    if (c.ok()) done += static_cast<int>(n);
    if (st.ok()) st = c;
  }
  std::lock_guard<std::mutex> l(mu_);
  if (!st.ok()) {
    if (st.code() == StatusCode::kNoSpace) {
      // Say what it means for this host, not only what the gateway said.
      st = st.Annotate(
          "the bucket is full (its quota): records stay in the local store until it "
          "is raised");
    }
    ++stats_.failures;
    ++stats_.consecutive_failures;
    stats_.last_error = st.message();
    stats_.last_error_unix_ns = UnixNowNs();
    return st;
  }
  stats_.last_error.clear();
  stats_.consecutive_failures = 0;
  return done;
}

ShipperStats Shipper::stats() const {
  std::lock_guard<std::mutex> l(mu_);
  return stats_;
}

void Shipper::Start() {
  if (thread_.joinable()) return;
  stop_ = false;
  inotify_fd_.reset(inotify_init1(IN_NONBLOCK | IN_CLOEXEC));
  // IN_MOVED_TO: the store commits by renaming a temporary to <id>.frec.
  if (inotify_fd_ &&
      inotify_add_watch(inotify_fd_.get(), options_.store_dir.c_str(), IN_MOVED_TO) < 0) {
    inotify_fd_.reset();
  }
  wake_fd_.reset(eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC));
  thread_ = std::thread([this] { Loop(); });
}

void Shipper::Stop() {
  if (!thread_.joinable()) return;
  stop_ = true;
  uint64_t one = 1;
  if (write(wake_fd_.get(), &one, sizeof one) < 0) {
    // The loop also checks stop_ after every wait of at most a second.
  }
  thread_.join();
}

void Shipper::Loop() {
  using Clock = std::chrono::steady_clock;
  std::chrono::milliseconds backoff{0};
  std::string logged_error;
  auto next = Clock::now();  // a pass at start: records committed while we were away
  while (!stop_) {
    auto now = Clock::now();
    if (now >= next) {
      auto r = ShipOnce();
      if (stop_) break;  // an upload aborted by Stop() is not an error to log
      if (r.ok()) {
        if (!logged_error.empty()) spdlog::info("fleet: shipping again");
        logged_error.clear();
        backoff = std::chrono::milliseconds(0);
        next = Clock::now() + options_.rescan_interval;
        std::lock_guard<std::mutex> l(mu_);
        stats_.backoff_ms = 0;
      } else {
        backoff = backoff.count() == 0 ? options_.backoff_initial
                                       : std::min(backoff * 2, options_.backoff_max);
        // Each distinct error once, not once per retry.
        if (r.status().message() != logged_error) {
          spdlog::error("fleet: {} (retrying with backoff up to {} s)", r.status().message(),
                        options_.backoff_max.count() / 1000);
          logged_error = r.status().message();
        }
        next = Clock::now() + backoff;
        std::lock_guard<std::mutex> l(mu_);
        stats_.backoff_ms = backoff.count();
      }
      continue;
    }
    auto wait_ms = std::chrono::duration_cast<std::chrono::milliseconds>(next - now).count();
    struct pollfd pfd[2] = {{wake_fd_.get(), POLLIN, 0}, {inotify_fd_.get(), POLLIN, 0}};
    int n = poll(pfd, inotify_fd_ ? 2 : 1, static_cast<int>(std::min<int64_t>(wait_ms, 1000)));
    if (n > 0 && (pfd[1].revents & POLLIN)) {
      alignas(struct inotify_event) char buf[4096];
      while (read(inotify_fd_.get(), buf, sizeof buf) > 0) {
      }
      // A new record: ship it now, unless we are backing off from an error.
      if (backoff.count() == 0) next = Clock::now();
    }
  }
}

}  // namespace flightrec::fleet
