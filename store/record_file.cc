#include "store/record_file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>
#include <xxhash.h>

#include <algorithm>
#include <cstring>

#include <fmt/format.h>

#include "common/checked_json.h"
#include "common/regular_file.h"

namespace flightrec::store {
namespace {

void PutLe16(char* p, uint16_t v) { std::memcpy(p, &v, 2); }  // x86_64/arm64: little-endian
void PutLe32(char* p, uint32_t v) { std::memcpy(p, &v, 4); }
void PutLe64(char* p, uint64_t v) { std::memcpy(p, &v, 8); }
uint16_t GetLe16(const char* p) {
  uint16_t v;
  std::memcpy(&v, p, 2);
  return v;
}
uint32_t GetLe32(const char* p) {
  uint32_t v;
  std::memcpy(&v, p, 4);
  return v;
}
uint64_t GetLe64(const char* p) {
  uint64_t v;
  std::memcpy(&v, p, 8);
  return v;
}

std::string Hex64(uint64_t v) { return fmt::format("{:016x}", v); }

XXH3_state_t* NewHash() {
  XXH3_state_t* s = XXH3_createState();
  XXH3_64bits_reset(s);
  return s;
}

Status PreadFull(int fd, void* buf, size_t len, uint64_t off, const std::string& what) {
  char* p = static_cast<char*>(buf);
  while (len > 0) {
    ssize_t n = pread(fd, p, len, static_cast<off_t>(off));
    if (n < 0) {
      if (errno == EINTR) continue;
      return ErrnoStatus(what);
    }
    if (n == 0) return Corrupt(what + ": unexpected end of file (truncated)");
    p += n;
    len -= static_cast<size_t>(n);
    off += static_cast<uint64_t>(n);
  }
  return OkStatus();
}

}  // namespace

uint64_t HeaderChecksum(const char* prefix, const std::string& header_json) {
  XXH3_state_t* s = XXH3_createState();
  XXH3_64bits_reset(s);
  XXH3_64bits_update(s, prefix, 16);
  XXH3_64bits_update(s, header_json.data(), header_json.size());
  uint64_t h = XXH3_64bits_digest(s);
  XXH3_freeState(s);
  return h;
}

nlohmann::json RecordHeader::ToJson() const {
  return {{"id", id},     {"kind", kind},     {"created_ns", created_ns},
          {"host", host}, {"kernel", kernel}, {"boot_id", boot_id}};
}

// ---------------------------------------------------------------- writer

StatusOr<std::unique_ptr<RecordWriter>> RecordWriter::Create(ScopedFd fd, std::string display_name,
                                                             const RecordHeader& header,
                                                             const WriterOptions& options) {
  std::unique_ptr<RecordWriter> w(new RecordWriter());
  w->fd_ = std::move(fd);
  w->name_ = std::move(display_name);
  w->header_ = header;
  w->cctx_ = ZSTD_createCCtx();
  if (w->cctx_ == nullptr) return Internal("zstd: cannot create a compression context");
  ZSTD_CCtx_setParameter(w->cctx_, ZSTD_c_checksumFlag, 1);
  w->wanted_ = options;
  w->options_ = {.level = options.level, .workers = -1};  // nothing applied yet
  w->ApplyWanted();
  w->out_.resize(ZSTD_CStreamOutSize());

  // Header and meta carry callers' text (a crashed program's name is bytes):
  // json::Dump never throws on text that is not UTF-8, so a record is never
  // lost for it (callers keep exact bytes as `key_hex`, terminal_escape.h).
  std::string hjson = json::Dump(header.ToJson());
  char prefix[kPrefixSize] = {};
  std::memcpy(prefix, kFileMagic, 8);
  PutLe16(prefix + 8, header.major);
  PutLe16(prefix + 10, header.minor);
  PutLe32(prefix + 12, static_cast<uint32_t>(hjson.size()));
  PutLe64(prefix + 16, HeaderChecksum(prefix, hjson));
  RETURN_IF_ERROR(w->WriteRaw(prefix, sizeof(prefix)));
  RETURN_IF_ERROR(w->WriteRaw(hjson.data(), hjson.size()));
  return w;
}

void RecordWriter::ApplyWanted() {
  if (wanted_.workers <= 0 && options_.workers > 0) {
    // Back to single-threaded: a fresh context, so the workers' threads and
    // buffers go now rather than when the record is done (a caller drops
    // them when only small sections are left).
    ZSTD_CCtx* fresh = ZSTD_createCCtx();
    if (fresh != nullptr) {
      ZSTD_freeCCtx(cctx_);
      cctx_ = fresh;
      ZSTD_CCtx_setParameter(cctx_, ZSTD_c_checksumFlag, 1);
      options_.workers = 0;
    }
  }
  if (wanted_.workers != options_.workers) {
    // Fails harmlessly (returns an error code) on a libzstd built without
    // threads; compression then stays single-threaded.
    ZSTD_CCtx_setParameter(cctx_, ZSTD_c_nbWorkers, std::max(0, wanted_.workers));
    // zstd's default job size at level 3 is 4 windows (8 MiB) and it keeps
    // several jobs' input and output buffers per worker, which took a 2-worker
    // writer to ~60 MiB resident. 2 MiB jobs keep it near 30 MiB with the
    // same compression ratio (jobs still share their window via overlap).
    if (wanted_.workers > 0) ZSTD_CCtx_setParameter(cctx_, ZSTD_c_jobSize, 2 << 20);
  }
  ZSTD_CCtx_setParameter(cctx_, ZSTD_c_compressionLevel, wanted_.level);
  options_ = wanted_;
}

void RecordWriter::SetCompression(int level, int workers) {
  wanted_ = {.level = level, .workers = workers};
  if (frame_raw_ == 0) {
    ApplyWanted();
  } else if (level != options_.level && options_.workers > 0 &&
             !ZSTD_isError(ZSTD_CCtx_setParameter(cctx_, ZSTD_c_compressionLevel, level))) {
    options_.level = level;  // from zstd's next job
  }
}

RecordWriter::~RecordWriter() {
  if (cctx_ != nullptr) ZSTD_freeCCtx(cctx_);
  if (hash_state_ != nullptr) XXH3_freeState(static_cast<XXH3_state_t*>(hash_state_));
}

Status RecordWriter::WriteRaw(const void* data, size_t len) {
  const char* p = static_cast<const char*>(data);
  while (len > 0) {
    ssize_t n = write(fd_.get(), p, len);
    if (n < 0) {
      if (errno == EINTR) continue;
      return ErrnoStatus(fmt::format("writing record {}", name_));
    }
    p += n;
    len -= static_cast<size_t>(n);
    pos_ += static_cast<uint64_t>(n);
  }
  return OkStatus();
}

Status RecordWriter::BeginSection(const std::string& name) {
  if (in_section_ || finished_) return Internal("BeginSection: a section is already open");
  if (name.empty() || name.size() > 255) return InvalidArgument("section name must be 1-255 bytes");
  for (const auto& s : sections_) {
    if (s.name == name) return InvalidArgument(fmt::format("duplicate section '{}'", name));
  }
  SectionInfo info;
  info.name = name;
  info.offset = pos_;
  sections_.push_back(info);
  in_section_ = true;
  hash_state_ = NewHash();
  frame_start_ = pos_;
  frame_raw_ = 0;
  return OkStatus();
}

Status RecordWriter::Compress(std::string_view in, ZSTD_EndDirective mode) {
  ZSTD_inBuffer zin{in.data(), in.size(), 0};
  auto* hs = static_cast<XXH3_state_t*>(hash_state_);
  for (;;) {
    ZSTD_outBuffer zout{out_.data(), out_.size(), 0};
    size_t rem = ZSTD_compressStream2(cctx_, &zout, &zin, mode);
    if (ZSTD_isError(rem)) {
      return Internal(
          fmt::format("zstd compression failed for record {}: {}", name_, ZSTD_getErrorName(rem)));
    }
    if (zout.pos > 0) {
      XXH3_64bits_update(hs, out_.data(), zout.pos);
      RETURN_IF_ERROR(WriteRaw(out_.data(), zout.pos));
    }
    bool input_done = zin.pos == zin.size;
    if (mode == ZSTD_e_continue ? input_done : (input_done && rem == 0)) break;
  }
  return OkStatus();
}

Status RecordWriter::EndFrame() {
  if (frame_raw_ == 0) return OkStatus();
  RETURN_IF_ERROR(Compress({}, ZSTD_e_end));
  auto& s = sections_.back();
  s.frames.push_back({frame_start_ - s.offset, pos_ - frame_start_, frame_raw_});
  frame_start_ = pos_;
  frame_raw_ = 0;
  return OkStatus();
}

Status RecordWriter::Write(std::string_view data) {
  if (!in_section_) return Internal("Write outside a section");
  while (!data.empty()) {
    if (frame_raw_ == 0 && !(wanted_ == options_)) ApplyWanted();
    uint64_t room = kFrameRawBytes - frame_raw_;
    size_t n = static_cast<size_t>(std::min<uint64_t>(room, data.size()));
    RETURN_IF_ERROR(Compress(data.substr(0, n), ZSTD_e_continue));
    frame_raw_ += n;
    raw_total_ += n;
    sections_.back().raw_size += n;
    data.remove_prefix(n);
    if (frame_raw_ == kFrameRawBytes) RETURN_IF_ERROR(EndFrame());
  }
  return OkStatus();
}

Status RecordWriter::WriteFromFd(int fd, uint64_t limit, uint64_t* copied, bool* truncated) {
  // 1 MiB: large enough to keep zstd's workers busy, small against the 64 MiB
  // memory budget.
  std::vector<char> buf(1 << 20);
  *copied = 0;
  *truncated = false;
  for (;;) {
    size_t want = buf.size();
    if (*copied >= limit) {
      // Probe for one more byte to tell "exactly at the limit" from "cut".
      char probe;
      ssize_t n;
      do n = read(fd, &probe, 1);
      while (n < 0 && errno == EINTR);
      *truncated = n > 0;
      return OkStatus();
    }
    want = static_cast<size_t>(std::min<uint64_t>(want, limit - *copied));
    ssize_t n = read(fd, buf.data(), want);
    if (n < 0) {
      if (errno == EINTR) continue;
      return ErrnoStatus(fmt::format("reading input for record {}", name_));
    }
    if (n == 0) return OkStatus();
    RETURN_IF_ERROR(Write(std::string_view(buf.data(), static_cast<size_t>(n))));
    *copied += static_cast<uint64_t>(n);
  }
}

Status RecordWriter::EndSection() {
  if (!in_section_) return Internal("EndSection without BeginSection");
  RETURN_IF_ERROR(EndFrame());
  auto& s = sections_.back();
  auto* hs = static_cast<XXH3_state_t*>(hash_state_);
  s.stored_size = pos_ - s.offset;
  s.xxh3 = XXH3_64bits_digest(hs);
  XXH3_freeState(hs);
  hash_state_ = nullptr;
  in_section_ = false;
  return OkStatus();
}

Status RecordWriter::AddSection(const std::string& name, std::string_view data) {
  RETURN_IF_ERROR(BeginSection(name));
  RETURN_IF_ERROR(Write(data));
  return EndSection();
}

Status RecordWriter::Finish(const nlohmann::json& meta) {
  if (in_section_) RETURN_IF_ERROR(EndSection());
  if (finished_) return Internal("Finish called twice");
  nlohmann::json toc;
  toc["sections"] = nlohmann::json::array();
  for (const auto& s : sections_) {
    nlohmann::json frames = nlohmann::json::array();
    for (const auto& f : s.frames) frames.push_back({f.offset, f.stored, f.raw});
    toc["sections"].push_back({{"name", s.name},
                               {"offset", s.offset},
                               {"stored_size", s.stored_size},
                               {"raw_size", s.raw_size},
                               {"xxh3", Hex64(s.xxh3)},
                               {"frames", frames}});
  }
  toc["meta"] = meta;
  std::string tjson = json::Dump(toc);
  uint64_t toc_offset = pos_;
  RETURN_IF_ERROR(WriteRaw(tjson.data(), tjson.size()));
  char trailer[kTrailerSize] = {};
  std::memcpy(trailer, kTrailerMagic, 8);
  PutLe64(trailer + 8, toc_offset);
  PutLe64(trailer + 16, tjson.size());
  PutLe64(trailer + 24, XXH3_64bits(tjson.data(), tjson.size()));
  RETURN_IF_ERROR(WriteRaw(trailer, sizeof(trailer)));
  if (fsync(fd_.get()) != 0) return ErrnoStatus(fmt::format("fsync of record {}", name_));
  finished_ = true;
  return OkStatus();
}

// ---------------------------------------------------------------- reader

StatusOr<std::unique_ptr<RecordReader>> RecordReader::Open(const std::string& path) {
  ScopedFd fd = OpenRegularFileAt(AT_FDCWD, path, O_NOFOLLOW);
  if (!fd && errno == EINVAL) return Corrupt(fmt::format("{}: not a regular file", path));
  if (!fd) return ErrnoStatus(fmt::format("cannot open record {}", path));
  return OpenFd(std::move(fd), path);
}

StatusOr<std::unique_ptr<RecordReader>> RecordReader::OpenFd(ScopedFd fd, std::string display) {
  std::unique_ptr<RecordReader> r(new RecordReader());
  r->fd_ = std::move(fd);
  r->display_ = display;
  struct stat st {};
  if (fstat(r->fd_.get(), &st) != 0) return ErrnoStatus(fmt::format("stat {}", display));
  if (!S_ISREG(st.st_mode)) return Corrupt(fmt::format("{}: not a regular file", display));
  r->file_size_ = static_cast<uint64_t>(st.st_size);
  const uint64_t size = r->file_size_;
  if (size == 0) return Corrupt(fmt::format("{}: empty file (not a flightrec record)", display));
  if (size < kPrefixSize + kTrailerSize) {
    return Corrupt(fmt::format("{}: {} bytes is too short for a flightrec record (truncated?)",
                               display, size));
  }
  char prefix[kPrefixSize];
  RETURN_IF_ERROR(PreadFull(r->fd_.get(), prefix, sizeof(prefix), 0, display + ": header"));
  if (std::memcmp(prefix, kFileMagic, 8) != 0) {
    return Corrupt(fmt::format("{}: not a flightrec record (bad magic)", display));
  }
  uint16_t major = GetLe16(prefix + 8);
  uint16_t minor = GetLe16(prefix + 10);
  if (major != kFormatMajor) {
    return Status(StatusCode::kUnsupported,
                  fmt::format("{}: record format {}.{} is not supported; this flightrec reads "
                              "format {}.x — upgrade flightrec to read it",
                              display, major, minor, kFormatMajor));
  }
  uint32_t hlen = GetLe32(prefix + 12);
  if (hlen > kMaxHeaderBytes || kPrefixSize + hlen + kTrailerSize > size) {
    return Corrupt(fmt::format("{}: header: length {} does not fit the file", display, hlen));
  }
  std::string hjson(hlen, '\0');
  RETURN_IF_ERROR(PreadFull(r->fd_.get(), hjson.data(), hlen, kPrefixSize, display + ": header"));
  if (HeaderChecksum(prefix, hjson) != GetLe64(prefix + 16) || GetLe64(prefix + 24) != 0) {
    return Corrupt(fmt::format("{}: header: checksum mismatch", display));
  }
  // Every field is type-checked: the file is untrusted (a hostile .frec
  // planted in the store must give an error, not abort recovery).
  ASSIGN_OR_RETURN(auto h, json::ParseUntrusted(hjson, display + ": header"));
  if (!h.is_object()) return Corrupt(fmt::format("{}: header: not a JSON object", display));
  auto str_field = [&](const char* key, bool required, std::string* out) -> Status {
    auto it = h.find(key);
    if (it == h.end()) {
      return required ? Corrupt(fmt::format("{}: header: no '{}'", display, key)) : OkStatus();
    }
    if (!it->is_string()) {
      return Corrupt(fmt::format("{}: header: '{}' is not a string", display, key));
    }
    *out = it->get<std::string>();
    if (out->size() > kMaxHeaderFieldBytes) {
      return Corrupt(fmt::format("{}: header: '{}' is too long", display, key));
    }
    return OkStatus();
  };
  RETURN_IF_ERROR(str_field("id", true, &r->header_.id));
  RETURN_IF_ERROR(str_field("kind", true, &r->header_.kind));
  RETURN_IF_ERROR(str_field("host", false, &r->header_.host));
  RETURN_IF_ERROR(str_field("kernel", false, &r->header_.kernel));
  RETURN_IF_ERROR(str_field("boot_id", false, &r->header_.boot_id));
  if (!h.contains("created_ns") || !h["created_ns"].is_number_integer()) {
    return Corrupt(fmt::format("{}: header: 'created_ns' is missing or not an integer", display));
  }
  r->header_.created_ns = h["created_ns"].get<int64_t>();
  r->header_.major = major;
  r->header_.minor = minor;

  char trailer[kTrailerSize];
  RETURN_IF_ERROR(PreadFull(r->fd_.get(), trailer, sizeof(trailer), size - kTrailerSize,
                            display + ": trailer"));
  if (std::memcmp(trailer, kTrailerMagic, 8) != 0) {
    return Corrupt(fmt::format(
        "{}: no table of contents at the end (the record is truncated or was never finished)",
        display));
  }
  uint64_t toc_off = GetLe64(trailer + 8);
  uint64_t toc_len = GetLe64(trailer + 16);
  const uint64_t data_start = kPrefixSize + hlen;
  if (toc_len > kMaxTocBytes || toc_off < data_start || toc_off > size - kTrailerSize ||
      toc_len != size - kTrailerSize - toc_off) {
    return Corrupt(fmt::format("{}: table of contents: offset/length out of range", display));
  }
  std::string tjson(toc_len, '\0');
  RETURN_IF_ERROR(
      PreadFull(r->fd_.get(), tjson.data(), toc_len, toc_off, display + ": table of contents"));
  if (XXH3_64bits(tjson.data(), tjson.size()) != GetLe64(trailer + 24)) {
    return Corrupt(fmt::format("{}: table of contents: checksum mismatch", display));
  }
  ASSIGN_OR_RETURN(auto toc, json::ParseUntrusted(tjson, display + ": table of contents"));
  auto bad = [&](const std::string& what) {
    return Corrupt(fmt::format("{}: table of contents: {}", display, what));
  };
  if (!toc.is_object()) return bad("not a JSON object");
  if (!toc.contains("sections") || !toc["sections"].is_array()) return bad("no 'sections' array");
  if (toc["sections"].size() > kMaxSections) {
    return bad(fmt::format("{} sections, more than the {} a record may have",
                           toc["sections"].size(), kMaxSections));
  }
  auto u64 = [](const nlohmann::json& s, const char* key, uint64_t* out) {
    auto it = s.find(key);
    if (it == s.end() || !it->is_number_unsigned()) return false;
    *out = it->get<uint64_t>();
    return true;
  };
  size_t total_frames = 0;
  for (const auto& s : toc["sections"]) {
    SectionInfo info;
    if (!s.is_object() || !s.contains("name") || !s["name"].is_string()) {
      return bad("a section without a name");
    }
    info.name = s["name"].get<std::string>();
    if (info.name.empty() || info.name.size() > 255)
      return bad("a section name is not 1-255 bytes");
    auto sbad = [&](const std::string& what) {
      return Corrupt(fmt::format("{}: section '{}': {}", display, info.name, what));
    };
    if (!u64(s, "offset", &info.offset) || !u64(s, "stored_size", &info.stored_size) ||
        !u64(s, "raw_size", &info.raw_size)) {
      return sbad("offset or sizes missing or not unsigned integers");
    }
    auto xit = s.find("xxh3");
    if (xit == s.end() || !xit->is_string() || xit->get_ref<const std::string&>().empty() ||
        xit->get_ref<const std::string&>().size() > 16 ||
        xit->get_ref<const std::string&>().find_first_not_of("0123456789abcdefABCDEF") !=
            std::string::npos) {
      return sbad("checksum is not 1-16 hex digits");
    }
    info.xxh3 = std::stoull(xit->get<std::string>(), nullptr, 16);
    if (info.offset < data_start || info.offset > toc_off ||
        info.stored_size > toc_off - info.offset) {
      return sbad("extent out of range");
    }
    auto fit = s.find("frames");
    if (fit == s.end() || !fit->is_array()) return sbad("no frame table");
    total_frames += fit->size();
    if (total_frames > kMaxFrames) {
      return bad(fmt::format("more than {} frames in all", kMaxFrames));
    }
    uint64_t expect = 0;
    for (const auto& f : *fit) {
      FrameInfo fi;
      if (!f.is_array() || f.size() != 3 || !f[0].is_number_unsigned() ||
          !f[1].is_number_unsigned() || !f[2].is_number_unsigned()) {
        return sbad("frame table inconsistent");
      }
      fi = {f[0].get<uint64_t>(), f[1].get<uint64_t>(), f[2].get<uint64_t>()};
      if (fi.offset != expect || fi.stored > info.stored_size - fi.offset) {
        return sbad("frame table inconsistent");
      }
      expect += fi.stored;
      info.frames.push_back(fi);
    }
    if (expect != info.stored_size) return sbad("frame table inconsistent");
    r->sections_.push_back(std::move(info));
  }
  auto mit = toc.find("meta");
  if (mit == toc.end() || mit->is_null()) {
    // null: what Commit(rec, {}) wrote before it normalised meta to {}.
    r->meta_ = nlohmann::json::object();
  } else if (mit->is_object()) {
    r->meta_ = std::move(*mit);
  } else {
    return bad("'meta' is not a JSON object");
  }
  return r;
}

const SectionInfo* RecordReader::FindSection(const std::string& name) const {
  for (const auto& s : sections_) {
    if (s.name == name) return &s;
  }
  return nullptr;
}

StatusOr<std::unique_ptr<SectionReader>> RecordReader::OpenSection(const std::string& name) const {
  const SectionInfo* info = FindSection(name);
  if (info == nullptr) {
    return NotFound(fmt::format("{}: no section '{}'", display_, name));
  }
  std::unique_ptr<SectionReader> s(new SectionReader());
  s->fd_ = fd_.get();
  s->display_ = fmt::format("{}: section '{}'", display_, name);
  s->info_ = *info;
  s->dctx_ = ZSTD_createDCtx();
  if (s->dctx_ == nullptr) return Internal("zstd: cannot create a decompression context");
  // Refuse frames that would need a window over 1 GiB: our writer never makes
  // them, and a hostile one would make us allocate it.
  ZSTD_DCtx_setParameter(s->dctx_, ZSTD_d_windowLogMax, 30);
  s->in_.resize(ZSTD_DStreamInSize());
  s->hash_state_ = NewHash();
  return s;
}

StatusOr<std::string> RecordReader::ReadSection(const std::string& name, uint64_t max_bytes) const {
  ASSIGN_OR_RETURN(auto sec, OpenSection(name));
  if (sec->info().raw_size > max_bytes) {
    return Status(StatusCode::kResourceExhausted,
                  fmt::format("{}: section '{}' is {} bytes, over the {} byte limit for reading "
                              "it into memory",
                              display_, name, sec->info().raw_size, max_bytes));
  }
  std::string out;
  out.resize(static_cast<size_t>(sec->info().raw_size));
  size_t got = 0;
  for (;;) {
    char buf[65536];
    ASSIGN_OR_RETURN(size_t n, sec->Read(buf, sizeof(buf)));
    if (n == 0) break;
    if (got + n > out.size())
      return Corrupt(
          fmt::format("{}: section '{}': longer than its "
                      "table of contents says",
                      display_, name));
    std::memcpy(out.data() + got, buf, n);
    got += n;
  }
  return out;
}

Status RecordReader::Verify() const {
  for (const auto& s : sections_) RETURN_IF_ERROR(VerifySection(s.name));
  return OkStatus();
}

Status RecordReader::VerifySection(const std::string& name) const {
  ASSIGN_OR_RETURN(auto sec, OpenSection(name));
  std::vector<char> buf(1 << 20);
  for (;;) {
    ASSIGN_OR_RETURN(size_t n, sec->Read(buf.data(), buf.size()));
    if (n == 0) break;
  }
  return OkStatus();
}

SectionReader::~SectionReader() {
  if (dctx_ != nullptr) ZSTD_freeDCtx(dctx_);
  if (hash_state_ != nullptr) XXH3_freeState(static_cast<XXH3_state_t*>(hash_state_));
}

Status SectionReader::Fill() {
  uint64_t left = info_.stored_size - stored_read_;
  size_t n = static_cast<size_t>(std::min<uint64_t>(left, in_.size()));
  RETURN_IF_ERROR(PreadFull(fd_, in_.data(), n, info_.offset + stored_read_, display_));
  XXH3_64bits_update(static_cast<XXH3_state_t*>(hash_state_), in_.data(), n);
  stored_read_ += n;
  zin_ = {in_.data(), n, 0};
  return OkStatus();
}

Status SectionReader::Check() {
  if (checked_) return OkStatus();
  checked_ = true;
  if (XXH3_64bits_digest(static_cast<XXH3_state_t*>(hash_state_)) != info_.xxh3) {
    return Corrupt(display_ + ": checksum mismatch (the stored bytes were altered)");
  }
  if (last_ret_ != 0) return Corrupt(display_ + ": ends inside a zstd frame (truncated)");
  if (raw_read_ != info_.raw_size) {
    return Corrupt(fmt::format("{}: decompressed to {} bytes, table of contents says {}", display_,
                               raw_read_, info_.raw_size));
  }
  return OkStatus();
}

StatusOr<size_t> SectionReader::Read(void* buf, size_t len) {
  if (len == 0) return static_cast<size_t>(0);
  ZSTD_outBuffer zout{buf, len, 0};
  while (zout.pos == 0) {
    if (zin_.pos == zin_.size) {
      if (stored_read_ == info_.stored_size) {
        RETURN_IF_ERROR(Check());
        return static_cast<size_t>(0);
      }
      RETURN_IF_ERROR(Fill());
    }
    size_t ret = ZSTD_decompressStream(dctx_, &zout, &zin_);
    if (ZSTD_isError(ret)) {
      return Corrupt(fmt::format("{}: cannot decompress: {} (the record is damaged)", display_,
                                 ZSTD_getErrorName(ret)));
    }
    last_ret_ = ret;
    if (raw_read_ + zout.pos > info_.raw_size) {
      return Corrupt(display_ + ": decompresses to more bytes than its table of contents says");
    }
  }
  raw_read_ += zout.pos;
  return zout.pos;
}

}  // namespace flightrec::store
