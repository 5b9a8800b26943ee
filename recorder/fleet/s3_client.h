// S3Client: the few S3 calls fleet mode needs, over libcurl's SigV4 signing
// (CURLOPT_AWS_SIGV4; Debian's libcurl4-openssl-dev), path-style URLs.
//
// Integrity: every request carries the SHA-256 of its body in the signed
// x-amz-content-sha256 header and, for bodies, Content-MD5; radosgw 16.2
// verifies both (XAmzContentSHA256Mismatch, BadDigest) before it stores
// anything. The whole object's SHA-256 is also stored as user metadata
// (x-amz-meta-sha256), which HEAD returns: that is what makes an upload
// idempotent (same key, same sha256 = already there) and what a GET checks
// the downloaded bytes against.
//
// Errors: Status with the HTTP status and the S3 error Code from the XML
// body ("S3 PUT bucket/key: HTTP 403 InvalidAccessKeyId"). Codes map to
// kPermissionDenied (credentials), kNoSpace (QuotaExceeded), kNotFound,
// kCorrupt (a checksum mismatch), kUnavailable (connection failures, 5xx:
// worth retrying). The access key and secret are never put in a message.
//
// Thread: one S3Client per thread (it owns one curl easy handle, reused so
// connections are kept alive).
#pragma once

#include <atomic>
#include <cstdint>
#include <filesystem>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "common/status.h"

namespace flightrec::fleet {

struct S3Options {
  std::string endpoint;  // http://host:port (no trailing slash)
  std::string bucket;
  std::string region = "us-east-1";
  std::string access_key;
  std::string secret_key;
  uint64_t max_send_bytes_per_sec = 0;  // 0 = unlimited
  // Objects at least this large go up in parts of part_size bytes.
  uint64_t multipart_threshold = 64ull << 20;
  uint64_t part_size = 16ull << 20;  // S3: >= 5 MiB except the last part
  long connect_timeout_s = 10;
  // A transfer slower than low_speed_bytes for low_speed_time_s is aborted
  // (a gateway that died mid-upload must not hang the shipper).
  long low_speed_bytes = 1024;
  long low_speed_time_s = 30;
  // When set and true, a transfer in flight is aborted (kUnavailable) within
  // about a second: how the shipper's Stop() interrupts an upload.
  const std::atomic<bool>* abort = nullptr;
};

struct ObjectInfo {
  uint64_t size = 0;
  std::string etag;
  std::string sha256;  // x-amz-meta-sha256, hex; empty if the object has none
};

struct FileDigest {
  std::string sha256_hex;
  uint64_t size = 0;
};

// SHA-256 of a file, streamed.
StatusOr<FileDigest> DigestFile(const std::filesystem::path& path);

class S3Client {
 public:
  static StatusOr<std::unique_ptr<S3Client>> Create(const S3Options& options);
  ~S3Client();
  S3Client(const S3Client&) = delete;
  S3Client& operator=(const S3Client&) = delete;

  // Uploads `path` to `key` (multipart above the threshold), with the
  // file's SHA-256 as x-amz-meta-sha256. `digest` is the file's digest if
  // the caller has it (else it is computed).
  Status PutFile(const std::string& key, const std::filesystem::path& path,
                 const std::optional<FileDigest>& digest = std::nullopt);
  // nullopt: no such object.
  StatusOr<std::optional<ObjectInfo>> Head(const std::string& key);
  // Streams `key` to `path` (via a temporary next to it, renamed when the
  // SHA-256 of what arrived equals x-amz-meta-sha256, or `expect_sha256`
  // when given); a mismatch is kCorrupt and leaves nothing at `path`.
  // The transfer is aborted (kCorrupt, the temporary removed) as soon as
  // more than `max_bytes` arrive: by default the size a HEAD reports.
  StatusOr<ObjectInfo> GetToFile(const std::string& key, const std::filesystem::path& path,
                                 const std::string& expect_sha256 = "",
                                 std::optional<uint64_t> max_bytes = std::nullopt);
  Status Delete(const std::string& key);
  // Creates the bucket (tests and benchmarks; a fleet's bucket is made by
  // its operator). An existing bucket of ours is not an error.
  Status CreateBucket();

  // Multipart steps (PutFile uses them; public for tests and aborts).
  StatusOr<std::string> CreateMultipart(const std::string& key, const std::string& sha256_hex);
  // Returns the part's ETag.
  StatusOr<std::string> UploadPart(const std::string& key, const std::string& upload_id,
                                   int part_number, int fd, uint64_t offset, uint64_t length);
  Status CompleteMultipart(const std::string& key, const std::string& upload_id,
                           const std::vector<std::string>& etags);
  Status AbortMultipart(const std::string& key, const std::string& upload_id);

  const S3Options& options() const { return options_; }

  // One request and its reply (defined in s3_client.cc).
  struct Response;
  struct Request;

 private:
  explicit S3Client(const S3Options& options) : options_(options) {}
  StatusOr<std::string> Url(const std::string& key, const std::string& query) const;
  Status Perform(Request& req, Response* resp);
  StatusOr<std::string> SendPart(const std::string& key, const std::string& upload_id,
                                 int part_number, int fd, uint64_t offset, uint64_t length,
                                 const std::string& sha256_hex, const std::string& md5_base64);

  S3Options options_;
  void* curl_ = nullptr;  // CURL*
};

// Key names are limited to [A-Za-z0-9._/-] (no "..", no leading '/'), so
// they need no escaping in the signed URL.
bool ValidObjectKey(const std::string& key);

}  // namespace flightrec::fleet
