#include "recorder/fleet/s3_client.h"

#include <curl/curl.h>
#include <fcntl.h>
#include <openssl/evp.h>
#include <sys/stat.h>
#include <unistd.h>

#include <fmt/format.h>

#include <algorithm>
#include <cstring>
#include <mutex>

#include "common/scoped_fd.h"

namespace flightrec::fleet {
namespace {

constexpr size_t kIoBuffer = 1 << 20;
constexpr size_t kMaxXmlBody = 1 << 20;         // error and multipart replies are small
constexpr uint64_t kMaxHeaderBytes = 64 << 10;  // S3 replies carry a few hundred bytes

std::string Hex(const unsigned char* p, size_t n) {
  static const char* d = "0123456789abcdef";
  std::string s(n * 2, '0');
  for (size_t i = 0; i < n; ++i) {
    s[2 * i] = d[p[i] >> 4];
    s[2 * i + 1] = d[p[i] & 15];
  }
  return s;
}

std::string Base64(const unsigned char* p, size_t n) {
  std::string out(4 * ((n + 2) / 3) + 1, '\0');
  int len = EVP_EncodeBlock(reinterpret_cast<unsigned char*>(out.data()), p, static_cast<int>(n));
  out.resize(static_cast<size_t>(len));
  return out;
}

// One streaming digest (SHA-256 or MD5) over OpenSSL's EVP interface.
class Digest {
 public:
  explicit Digest(const EVP_MD* md) : ctx_(EVP_MD_CTX_new()) {
    EVP_DigestInit_ex(ctx_, md, nullptr);
  }
  ~Digest() { EVP_MD_CTX_free(ctx_); }
  Digest(const Digest&) = delete;
  Digest& operator=(const Digest&) = delete;
  void Update(const void* p, size_t n) { EVP_DigestUpdate(ctx_, p, n); }
  std::string Final(bool base64) {
    unsigned char out[EVP_MAX_MD_SIZE];
    unsigned int n = 0;
    EVP_DigestFinal_ex(ctx_, out, &n);
    return base64 ? Base64(out, n) : Hex(out, n);
  }

 private:
  EVP_MD_CTX* ctx_;
};

std::string EmptySha256() {
  Digest d(EVP_sha256());
  return d.Final(false);
}

std::string Sha256Hex(const std::string& s) {
  Digest d(EVP_sha256());
  d.Update(s.data(), s.size());
  return d.Final(false);
}

std::string Md5Base64(const std::string& s) {
  Digest d(EVP_md5());
  d.Update(s.data(), s.size());
  return d.Final(true);
}

struct RegionDigest {
  std::string sha256_hex;
  std::string md5_base64;
};

// Digests of [offset, offset+length) of fd: what the request for that
// region must declare so the gateway can verify what it received.
StatusOr<RegionDigest> DigestRegion(int fd, uint64_t offset, uint64_t length,
                                    const std::string& name, Digest* whole) {
  Digest sha(EVP_sha256()), md5(EVP_md5());
  std::vector<char> buf(kIoBuffer);
  uint64_t done = 0;
  while (done < length) {
    size_t want = static_cast<size_t>(std::min<uint64_t>(buf.size(), length - done));
    ssize_t n = pread(fd, buf.data(), want, static_cast<off_t>(offset + done));
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return ErrnoStatus(name + ": read");
    if (n == 0) return Corrupt(fmt::format("{}: file shrank while uploading", name));
    sha.Update(buf.data(), static_cast<size_t>(n));
    md5.Update(buf.data(), static_cast<size_t>(n));
    if (whole) whole->Update(buf.data(), static_cast<size_t>(n));
    done += static_cast<uint64_t>(n);
  }
  return RegionDigest{sha.Final(false), md5.Final(true)};
}

std::string Lower(std::string s) {
  for (auto& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

// The text of <Tag>...</Tag> in a small XML reply, limited to characters an
// S3 code or id uses (the reply is from the network: never printed raw).
std::string XmlField(const std::string& body, const std::string& tag) {
  auto b = body.find("<" + tag + ">");
  if (b == std::string::npos) return "";
  b += tag.size() + 2;
  auto e = body.find("</" + tag + ">", b);
  if (e == std::string::npos || e - b > 1024) return "";
  std::string v = body.substr(b, e - b);
  for (char c : v) {
    if (!std::isalnum(static_cast<unsigned char>(c)) && !std::strchr("-_.~/+=:\" ", c)) return "?";
  }
  return v;
}

StatusCode CodeFor(long http, const std::string& s3code) {
  // The S3 code decides; radosgw answers QuotaExceeded with a 403 too.
  if (s3code == "QuotaExceeded" || s3code == "EntityTooLarge") return StatusCode::kNoSpace;
  if (s3code == "BadDigest" || s3code == "XAmzContentSHA256Mismatch" || s3code == "InvalidDigest") {
    return StatusCode::kCorrupt;
  }
  if (s3code == "NoSuchKey" || s3code == "NoSuchBucket" || s3code == "NoSuchUpload") {
    return StatusCode::kNotFound;
  }
  if (http >= 500 || http == 429 || s3code == "SlowDown" || s3code == "RequestTimeout") {
    return StatusCode::kUnavailable;
  }
  if (http == 401 || http == 403) return StatusCode::kPermissionDenied;
  if (http == 404) return StatusCode::kNotFound;
  return StatusCode::kInvalidArgument;
}

void GlobalInit() {
  static std::once_flag once;
  std::call_once(once, [] { curl_global_init(CURL_GLOBAL_DEFAULT); });
}

}  // namespace

bool ValidObjectKey(const std::string& key) {
  if (key.empty() || key.size() > 1024 || key.front() == '/') return false;
  if (key.find("..") != std::string::npos || key.find("//") != std::string::npos) return false;
  return key.find_first_not_of(
             "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._/-") ==
         std::string::npos;
}

StatusOr<FileDigest> DigestFile(const std::filesystem::path& path) {
  ScopedFd fd(open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW));
  if (!fd) return ErrnoStatus(path.string() + ": open");
  Digest sha(EVP_sha256());
  std::vector<char> buf(kIoBuffer);
  FileDigest out;
  for (;;) {
    ssize_t n = read(fd.get(), buf.data(), buf.size());
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return ErrnoStatus(path.string() + ": read");
    if (n == 0) break;
    sha.Update(buf.data(), static_cast<size_t>(n));
    out.size += static_cast<uint64_t>(n);
  }
  out.sha256_hex = sha.Final(false);
  return out;
}

// What one request sends: nothing, a string, or a region of a file.
struct S3Client::Request {
  std::string method = "GET";
  std::string key;
  std::string query;  // without '?'
  std::vector<std::string> headers;
  std::string payload_sha256;  // hex; the empty body's when unset
  std::string body;
  int fd = -1;
  uint64_t offset = 0, length = 0, sent = 0;
  // Download: bytes of a 2xx reply go to sink_fd, hashed into sink_sha.
  int sink_fd = -1;
  Digest* sink_sha = nullptr;
  uint64_t received = 0;
  // More than this many body bytes aborts the download (what HEAD or the
  // index said the object has: a server must not fill the disk).
  uint64_t sink_limit = UINT64_MAX;
  uint64_t header_bytes = 0;
  Status sink_error;
};

struct S3Client::Response {
  long http = 0;
  std::string body;                            // non-2xx bodies and small replies (bounded)
  std::map<std::string, std::string> headers;  // lower-case names
};

namespace {

struct CallbackState {
  S3Client::Request* req = nullptr;
  S3Client::Response* resp = nullptr;
  CURL* curl = nullptr;
};

}  // namespace

StatusOr<std::unique_ptr<S3Client>> S3Client::Create(const S3Options& options) {
  if (options.endpoint.rfind("http://", 0) != 0 && options.endpoint.rfind("https://", 0) != 0) {
    return InvalidArgument("S3 endpoint must start with http:// or https://");
  }
  if (options.bucket.empty() || options.access_key.empty() || options.secret_key.empty()) {
    return InvalidArgument("S3: bucket, access key and secret key are required");
  }
  if (options.part_size < (5ull << 20)) return InvalidArgument("S3: part size below 5 MiB");
  GlobalInit();
  std::unique_ptr<S3Client> c(new S3Client(options));
  c->curl_ = curl_easy_init();
  if (!c->curl_) return Internal("curl_easy_init failed");
  return c;
}

S3Client::~S3Client() {
  if (curl_) curl_easy_cleanup(static_cast<CURL*>(curl_));
}

StatusOr<std::string> S3Client::Url(const std::string& key, const std::string& query) const {
  if (!key.empty() && !ValidObjectKey(key)) {
    return InvalidArgument("S3: object key has characters outside [A-Za-z0-9._/-]");
  }
  std::string url = options_.endpoint + "/" + options_.bucket;
  if (!key.empty()) url += "/" + key;
  if (!query.empty()) url += "?" + query;
  return url;
}

Status S3Client::Perform(Request& req, Response* resp) {
  CURL* c = static_cast<CURL*>(curl_);
  curl_easy_reset(c);  // keeps the connection cache
  ASSIGN_OR_RETURN(std::string url, Url(req.key, req.query));
  CallbackState st{&req, resp, c};
  char errbuf[CURL_ERROR_SIZE] = {0};
  std::string sigv4 = "aws:amz:" + options_.region + ":s3";
  curl_easy_setopt(c, CURLOPT_URL, url.c_str());
  curl_easy_setopt(c, CURLOPT_PROTOCOLS_STR, "http,https");
  curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
  curl_easy_setopt(c, CURLOPT_ERRORBUFFER, errbuf);
  curl_easy_setopt(c, CURLOPT_AWS_SIGV4, sigv4.c_str());
  curl_easy_setopt(c, CURLOPT_USERNAME, options_.access_key.c_str());
  curl_easy_setopt(c, CURLOPT_PASSWORD, options_.secret_key.c_str());
  curl_easy_setopt(c, CURLOPT_CONNECTTIMEOUT, options_.connect_timeout_s);
  curl_easy_setopt(c, CURLOPT_LOW_SPEED_LIMIT, options_.low_speed_bytes);
  curl_easy_setopt(c, CURLOPT_LOW_SPEED_TIME, options_.low_speed_time_s);
  curl_easy_setopt(c, CURLOPT_UPLOAD_BUFFERSIZE, 512L * 1024);
  curl_easy_setopt(c, CURLOPT_BUFFERSIZE, 512L * 1024);
  if (options_.max_send_bytes_per_sec > 0) {
    curl_easy_setopt(c, CURLOPT_MAX_SEND_SPEED_LARGE,
                     static_cast<curl_off_t>(options_.max_send_bytes_per_sec));
  }

  if (options_.abort) {
    auto progress_cb = +[](void* ud, curl_off_t, curl_off_t, curl_off_t, curl_off_t) -> int {
      return static_cast<const std::atomic<bool>*>(ud)->load() ? 1 : 0;
    };
    curl_easy_setopt(c, CURLOPT_XFERINFOFUNCTION, progress_cb);
    curl_easy_setopt(c, CURLOPT_XFERINFODATA, const_cast<std::atomic<bool>*>(options_.abort));
    curl_easy_setopt(c, CURLOPT_NOPROGRESS, 0L);
  }

  struct curl_slist* hdrs = nullptr;
  std::string sha = req.payload_sha256.empty() ? EmptySha256() : req.payload_sha256;
  std::vector<std::string> all = req.headers;
  all.push_back("x-amz-content-sha256: " + sha);
  for (const auto& h : all) hdrs = curl_slist_append(hdrs, h.c_str());
  curl_easy_setopt(c, CURLOPT_HTTPHEADER, hdrs);

  auto header_cb = +[](char* p, size_t sz, size_t n, void* ud) -> size_t {
    auto* s = static_cast<CallbackState*>(ud);
    std::string line(p, sz * n);
    // Headers are kept in memory: a server streaming endless ones is cut off.
    s->req->header_bytes += line.size();
    if (s->req->header_bytes > kMaxHeaderBytes) {
      s->req->sink_error = Corrupt(fmt::format("more than {} bytes of headers", kMaxHeaderBytes));
      return 0;  // aborts the transfer
    }
    if (line.rfind("HTTP/", 0) == 0) s->resp->headers.clear();  // a new response (after 100)
    auto colon = line.find(':');
    if (colon != std::string::npos) {
      std::string v = line.substr(colon + 1);
      while (!v.empty() && (v.back() == '\r' || v.back() == '\n' || v.back() == ' ')) v.pop_back();
      while (!v.empty() && v.front() == ' ') v.erase(0, 1);
      s->resp->headers[Lower(line.substr(0, colon))] = v.substr(0, 1024);
    }
    return sz * n;
  };
  curl_easy_setopt(c, CURLOPT_HEADERFUNCTION, header_cb);
  curl_easy_setopt(c, CURLOPT_HEADERDATA, &st);

  auto write_cb = +[](char* p, size_t sz, size_t n, void* ud) -> size_t {
    auto* s = static_cast<CallbackState*>(ud);
    size_t len = sz * n;
    long code = 0;
    curl_easy_getinfo(s->curl, CURLINFO_RESPONSE_CODE, &code);
    if (s->req->sink_fd >= 0 && code >= 200 && code < 300) {
      if (len > s->req->sink_limit - s->req->received) {
        s->req->sink_error =
            Corrupt(fmt::format("the server sent more than the {} bytes expected; transfer aborted",
                                s->req->sink_limit));
        return 0;  // aborts the transfer
      }
      size_t off = 0;
      while (off < len) {
        ssize_t w = write(s->req->sink_fd, p + off, len - off);
        if (w < 0 && errno == EINTR) continue;
        if (w < 0) {
          s->req->sink_error = ErrnoStatus("writing the downloaded object");
          return 0;  // aborts the transfer
        }
        off += static_cast<size_t>(w);
      }
      s->req->sink_sha->Update(p, len);
      s->req->received += len;
      return len;
    }
    if (s->resp->body.size() + len > kMaxXmlBody) return 0;
    s->resp->body.append(p, len);
    return len;
  };
  if (req.sink_fd >= 0 && req.sink_limit != UINT64_MAX) {
    // A declared Content-Length over the limit is refused before any byte.
    curl_easy_setopt(c, CURLOPT_MAXFILESIZE_LARGE, static_cast<curl_off_t>(req.sink_limit));
  }
  curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, write_cb);
  curl_easy_setopt(c, CURLOPT_WRITEDATA, &st);

  if (req.method == "PUT") {
    curl_easy_setopt(c, CURLOPT_UPLOAD, 1L);
    uint64_t size = req.fd >= 0 ? req.length : req.body.size();
    curl_easy_setopt(c, CURLOPT_INFILESIZE_LARGE, static_cast<curl_off_t>(size));
    auto read_cb = +[](char* p, size_t sz, size_t n, void* ud) -> size_t {
      auto* r = static_cast<CallbackState*>(ud)->req;
      size_t want = sz * n;
      uint64_t total = r->fd >= 0 ? r->length : r->body.size();
      want = static_cast<size_t>(std::min<uint64_t>(want, total - r->sent));
      if (want == 0) return 0;
      if (r->fd < 0) {
        std::memcpy(p, r->body.data() + r->sent, want);
        r->sent += want;
        return want;
      }
      for (;;) {
        ssize_t got = pread(r->fd, p, want, static_cast<off_t>(r->offset + r->sent));
        if (got < 0 && errno == EINTR) continue;
        if (got <= 0) return CURL_READFUNC_ABORT;  // a short file: the hash would not match
        r->sent += static_cast<uint64_t>(got);
        return static_cast<size_t>(got);
      }
    };
    curl_easy_setopt(c, CURLOPT_READFUNCTION, read_cb);
    curl_easy_setopt(c, CURLOPT_READDATA, &st);
    // curl rewinds when it must resend (e.g. after a redirect or a 417).
    auto seek_cb = +[](void* ud, curl_off_t off, int origin) -> int {
      if (origin != SEEK_SET || off < 0) return CURL_SEEKFUNC_CANTSEEK;
      static_cast<CallbackState*>(ud)->req->sent = static_cast<uint64_t>(off);
      return CURL_SEEKFUNC_OK;
    };
    curl_easy_setopt(c, CURLOPT_SEEKFUNCTION, seek_cb);
    curl_easy_setopt(c, CURLOPT_SEEKDATA, &st);
  } else if (req.method == "POST") {
    curl_easy_setopt(c, CURLOPT_POST, 1L);
    curl_easy_setopt(c, CURLOPT_POSTFIELDS, req.body.c_str());
    curl_easy_setopt(c, CURLOPT_POSTFIELDSIZE_LARGE, static_cast<curl_off_t>(req.body.size()));
  } else if (req.method == "HEAD") {
    curl_easy_setopt(c, CURLOPT_NOBODY, 1L);
  } else if (req.method == "DELETE") {
    curl_easy_setopt(c, CURLOPT_CUSTOMREQUEST, "DELETE");
  }

  CURLcode rc = curl_easy_perform(c);
  curl_slist_free_all(hdrs);
  curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &resp->http);
  std::string what = fmt::format("S3 {} {}/{}", req.method, options_.bucket, req.key);
  if (!req.sink_error.ok()) return req.sink_error.Annotate(what);
  if (rc == CURLE_FILESIZE_EXCEEDED) {
    return Corrupt(fmt::format("{}: the server announced more than the {} bytes expected", what,
                               req.sink_limit));
  }
  if (rc != CURLE_OK) {
    // Connection refused, reset, timed out: the gateway is away; retry later.
    return Unavailable(
        fmt::format("{}: {}{}{}", what, curl_easy_strerror(rc), errbuf[0] ? ": " : "", errbuf));
  }
  if (resp->http < 200 || resp->http >= 300) {
    std::string code = XmlField(resp->body, "Code");
    return Status(CodeFor(resp->http, code),
                  fmt::format("{}: HTTP {}{}{}", what, resp->http, code.empty() ? "" : " ", code));
  }
  return OkStatus();
}

StatusOr<std::optional<ObjectInfo>> S3Client::Head(const std::string& key) {
  Request req;
  req.method = "HEAD";
  req.key = key;
  Response resp;
  Status st = Perform(req, &resp);
  if (!st.ok()) {
    if (resp.http == 404) return std::optional<ObjectInfo>();
    if (resp.http >= 400 && resp.http < 500) {
      // A HEAD reply has no body, so no S3 error code: ask for one byte to
      // learn why (SignatureDoesNotMatch, InvalidAccessKeyId, ...).
      Request get;
      get.key = key;
      get.headers.push_back("Range: bytes=0-0");
      Response why;
      Status detailed = Perform(get, &why);
      if (!detailed.ok() && why.http == resp.http) return detailed;
    }
    return st;
  }
  ObjectInfo info;
  info.size = std::strtoull(resp.headers["content-length"].c_str(), nullptr, 10);
  info.etag = resp.headers["etag"];
  info.sha256 = Lower(resp.headers["x-amz-meta-sha256"]);
  return std::optional<ObjectInfo>(info);
}

Status S3Client::Delete(const std::string& key) {
  Request req;
  req.method = "DELETE";
  req.key = key;
  Response resp;
  return Perform(req, &resp);
}

Status S3Client::CreateBucket() {
  Request req;
  req.method = "PUT";
  Response resp;
  Status st = Perform(req, &resp);
  if (!st.ok() && XmlField(resp.body, "Code") == "BucketAlreadyOwnedByYou") return OkStatus();
  return st;
}

StatusOr<std::string> S3Client::CreateMultipart(const std::string& key,
                                                const std::string& sha256_hex) {
  Request req;
  req.method = "POST";
  req.key = key;
  req.query = "uploads=";  // the canonical form SigV4 signs
  req.headers.push_back("x-amz-meta-sha256: " + sha256_hex);
  req.headers.push_back("Content-Type: application/octet-stream");
  Response resp;
  RETURN_IF_ERROR(Perform(req, &resp));
  std::string id = XmlField(resp.body, "UploadId");
  if (id.empty() || id == "?" || id.find_first_of("/+=:\" ") != std::string::npos) {
    return Corrupt(fmt::format("S3 POST {}/{}?uploads: no usable UploadId in the reply",
                               options_.bucket, key));
  }
  return id;
}

StatusOr<std::string> S3Client::UploadPart(const std::string& key, const std::string& upload_id,
                                           int part_number, int fd, uint64_t offset,
                                           uint64_t length) {
  ASSIGN_OR_RETURN(RegionDigest d, DigestRegion(fd, offset, length, key, nullptr));
  return SendPart(key, upload_id, part_number, fd, offset, length, d.sha256_hex, d.md5_base64);
}

StatusOr<std::string> S3Client::SendPart(const std::string& key, const std::string& upload_id,
                                         int part_number, int fd, uint64_t offset, uint64_t length,
                                         const std::string& sha256_hex,
                                         const std::string& md5_base64) {
  Request req;
  req.method = "PUT";
  req.key = key;
  req.query = fmt::format("partNumber={}&uploadId={}", part_number, upload_id);
  req.payload_sha256 = sha256_hex;
  req.headers.push_back("Content-MD5: " + md5_base64);
  req.fd = fd;
  req.offset = offset;
  req.length = length;
  Response resp;
  RETURN_IF_ERROR(Perform(req, &resp));
  std::string etag = resp.headers["etag"];
  if (etag.empty()) return Corrupt(fmt::format("S3 PUT {} part {}: no ETag", key, part_number));
  return etag;
}

Status S3Client::CompleteMultipart(const std::string& key, const std::string& upload_id,
                                   const std::vector<std::string>& etags) {
  std::string xml = "<CompleteMultipartUpload>";
  for (size_t i = 0; i < etags.size(); ++i) {
    xml += fmt::format("<Part><PartNumber>{}</PartNumber><ETag>{}</ETag></Part>", i + 1, etags[i]);
  }
  xml += "</CompleteMultipartUpload>";
  Request req;
  req.method = "POST";
  req.key = key;
  req.query = "uploadId=" + upload_id;
  req.body = xml;
  req.payload_sha256 = Sha256Hex(xml);
  req.headers.push_back("Content-MD5: " + Md5Base64(xml));
  req.headers.push_back("Content-Type: application/xml");
  Response resp;
  RETURN_IF_ERROR(Perform(req, &resp));
  // S3 may answer 200 and still report an error in the body.
  if (resp.body.find("<Error>") != std::string::npos) {
    std::string code = XmlField(resp.body, "Code");
    return Status(CodeFor(500, code), fmt::format("S3 POST {}/{}?uploadId: completion failed: {}",
                                                  options_.bucket, key, code));
  }
  return OkStatus();
}

Status S3Client::AbortMultipart(const std::string& key, const std::string& upload_id) {
  Request req;
  req.method = "DELETE";
  req.key = key;
  req.query = "uploadId=" + upload_id;
  Response resp;
  return Perform(req, &resp);
}

Status S3Client::PutFile(const std::string& key, const std::filesystem::path& path,
                         const std::optional<FileDigest>& digest) {
  if (!ValidObjectKey(key)) {
    return InvalidArgument("S3: object key has characters outside [A-Za-z0-9._/-]");
  }
  ScopedFd fd(open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW));
  if (!fd) return ErrnoStatus(path.string() + ": open");
  struct stat st {};
  if (fstat(fd.get(), &st) != 0) return ErrnoStatus(path.string() + ": fstat");
  uint64_t size = static_cast<uint64_t>(st.st_size);

  if (size < options_.multipart_threshold) {
    ASSIGN_OR_RETURN(RegionDigest d, DigestRegion(fd.get(), 0, size, path.string(), nullptr));
    if (digest && digest->sha256_hex != d.sha256_hex) {
      return Corrupt(path.string() + ": changed since its digest was taken");
    }
    Request req;
    req.method = "PUT";
    req.key = key;
    req.payload_sha256 = d.sha256_hex;
    req.headers.push_back("Content-MD5: " + d.md5_base64);
    req.headers.push_back("x-amz-meta-sha256: " + d.sha256_hex);
    req.headers.push_back("Content-Type: application/octet-stream");
    req.fd = fd.get();
    req.length = size;
    Response resp;
    return Perform(req, &resp);
  }

  // One pass over the file gives the object's SHA-256 (its metadata, sent
  // first) and each part's SHA-256 and MD5 (sent with the part, verified by
  // the gateway); the upload is then a second, plain read.
  Digest whole(EVP_sha256());
  std::vector<RegionDigest> parts;
  for (uint64_t off = 0; off < size; off += options_.part_size) {
    uint64_t len = std::min(options_.part_size, size - off);
    ASSIGN_OR_RETURN(RegionDigest d, DigestRegion(fd.get(), off, len, path.string(), &whole));
    parts.push_back(std::move(d));
  }
  std::string sha = whole.Final(false);
  if (digest && digest->sha256_hex != sha) {
    return Corrupt(path.string() + ": changed since its digest was taken");
  }
  ASSIGN_OR_RETURN(std::string upload_id, CreateMultipart(key, sha));
  std::vector<std::string> etags;
  Status st_parts;
  for (size_t i = 0; i < parts.size(); ++i) {
    uint64_t off = i * options_.part_size;
    uint64_t len = std::min(options_.part_size, size - off);
    auto etag = SendPart(key, upload_id, static_cast<int>(i + 1), fd.get(), off, len,
                         parts[i].sha256_hex, parts[i].md5_base64);
    if (!etag.ok()) {
      st_parts = etag.status();
      break;
    }
    etags.push_back(*etag);
  }
  if (st_parts.ok()) st_parts = CompleteMultipart(key, upload_id, etags);
  if (!st_parts.ok()) {
    // Best effort: the gateway also expires stale uploads, and a retry
    // starts a new one; the error that matters is the first.
    (void)AbortMultipart(key, upload_id);
    return st_parts;
  }
  return OkStatus();
}

StatusOr<ObjectInfo> S3Client::GetToFile(const std::string& key, const std::filesystem::path& path,
                                         const std::string& expect_sha256,
                                         std::optional<uint64_t> max_bytes) {
  if (!max_bytes) {
    // No object: the GET still runs, for the gateway's error code.
    ASSIGN_OR_RETURN(auto head, Head(key));
    max_bytes = head ? head->size : 0;
  }
  std::filesystem::path tmp = path;
  tmp += fmt::format(".part-{}", getpid());
  ScopedFd out(open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0600));
  if (!out) return ErrnoStatus(tmp.string() + ": create");
  Digest sha(EVP_sha256());
  Request req;
  req.method = "GET";
  req.key = key;
  req.sink_fd = out.get();
  req.sink_sha = &sha;
  req.sink_limit = *max_bytes;
  Response resp;
  Status st = Perform(req, &resp);
  auto fail = [&](Status s) {
    unlink(tmp.c_str());
    return s;
  };
  if (!st.ok()) return fail(st);
  ObjectInfo info;
  info.size = req.received;
  info.etag = resp.headers["etag"];
  info.sha256 = Lower(resp.headers["x-amz-meta-sha256"]);
  std::string got = sha.Final(false);
  std::string want = expect_sha256.empty() ? info.sha256 : Lower(expect_sha256);
  if (want.empty()) {
    return fail(Corrupt(fmt::format("S3 GET {}: no sha256 to verify against", key)));
  }
  if (got != want) {
    return fail(Corrupt(fmt::format("S3 GET {}: sha256 of the downloaded bytes is {}, expected {}",
                                    key, got, want)));
  }
  if (fsync(out.get()) != 0) return fail(ErrnoStatus(tmp.string() + ": fsync"));
  if (rename(tmp.c_str(), path.c_str()) != 0) return fail(ErrnoStatus(path.string() + ": rename"));
  return info;
}

}  // namespace flightrec::fleet
