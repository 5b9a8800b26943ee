// Record files: one file per record, named sections each stored as zstd
// frame(s) behind a table of contents (docs/FORMAT.md).
//
// RecordWriter streams: a section of any size (a 20 GiB core) goes through a
// bounded buffer, so the writer's memory does not depend on the input.
// RecordReader validates everything it reads against the file's size before
// trusting it, so a truncated, bit-flipped or foreign file gives a Status that
// names the file and the section, never a crash.
//
// Thread: a writer or reader is used by one thread at a time. zstd may run its
// own worker threads inside a writer (ZSTD_c_nbWorkers).
#pragma once

#include <zstd.h>

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "common/scoped_fd.h"
#include "common/status.h"

namespace flightrec::store {

inline constexpr uint16_t kFormatMajor = 1;
inline constexpr uint16_t kFormatMinor = 0;
// 8-byte magics; the \r\n catches text-mode mangling (as PNG's signature does).
inline constexpr char kFileMagic[8] = {'F', 'L', 'T', 'R', 'E', 'C', '\r', '\n'};
inline constexpr char kTrailerMagic[8] = {'F', 'L', 'T', 'T', 'O', 'C', '\r', '\n'};
inline constexpr size_t kPrefixSize = 32;
inline constexpr size_t kTrailerSize = 32;
// A new zstd frame starts every kFrameRawBytes of input so that a reader can
// seek into a large section without decompressing what precedes it.
inline constexpr uint64_t kFrameRawBytes = 64ull << 20;
// Sanity bounds for lengths read from disk (hostile files).
inline constexpr uint64_t kMaxHeaderBytes = 1ull << 20;
inline constexpr uint64_t kMaxTocBytes = 64ull << 20;
// Bounds on what a TOC may declare, so that opening or verifying a hostile
// record costs little: flightrec writes fewer than ten sections, and a
// frame holds 64 MiB of input (65 536 frames = 4 TiB).
inline constexpr size_t kMaxSections = 1024;
inline constexpr size_t kMaxFrames = 65536;
inline constexpr size_t kMaxHeaderFieldBytes = 4096;

// The header checksum (docs/FORMAT.md, "File layout"): XXH3-64 over the first
// 16 bytes of the prefix (magic, versions, header length) and the header
// JSON, so that no byte before the sections can change unnoticed. (Bytes
// 24-31 of the prefix are reserved and must be zero.)
uint64_t HeaderChecksum(const char* prefix, const std::string& header_json);

struct RecordHeader {
  std::string id;
  std::string kind;        // "dump", "crash", ...
  int64_t created_ns = 0;  // wall clock
  std::string host;
  std::string kernel;
  std::string boot_id;
  uint16_t major = kFormatMajor;
  uint16_t minor = kFormatMinor;
  nlohmann::json ToJson() const;
};

struct FrameInfo {
  uint64_t offset = 0;  // relative to the section's offset
  uint64_t stored = 0;
  uint64_t raw = 0;
};

struct SectionInfo {
  std::string name;
  uint64_t offset = 0;       // absolute file offset of the first frame
  uint64_t stored_size = 0;  // compressed bytes
  uint64_t raw_size = 0;     // uncompressed bytes
  uint64_t xxh3 = 0;         // XXH3-64 of the stored bytes
  std::vector<FrameInfo> frames;
};

struct WriterOptions {
  int level = 3;    // zstd level (the CLI's default)
  int workers = 2;  // zstd worker threads (0 = single-threaded)
  bool operator==(const WriterOptions&) const = default;
};

// Writes one record into an open fd, from offset 0. The caller (Store) owns
// the temporary file, fsync and rename.
class RecordWriter {
 public:
  static StatusOr<std::unique_ptr<RecordWriter>> Create(ScopedFd fd, std::string display_name,
                                                        const RecordHeader& header,
                                                        const WriterOptions& options);
  ~RecordWriter();

  const RecordHeader& header() const { return header_; }
  Status BeginSection(const std::string& name);
  Status Write(std::string_view data);
  // Streams up to `limit` bytes from fd (a pipe or file) into the open
  // section. *truncated is set if more input remained past the limit.
  Status WriteFromFd(int fd, uint64_t limit, uint64_t* copied, bool* truncated);
  Status EndSection();
  // Convenience: a whole small section.
  Status AddSection(const std::string& name, std::string_view data);
  // Writes the table of contents (with meta) and trailer, then fsyncs.
  Status Finish(const nlohmann::json& meta);
  // Changes zstd's level and workers for what is written from now on: a new
  // level from zstd's next job when workers run (zstd allows that within a
  // frame), else from the next frame; new workers from the next frame.
  // Every frame stays a standard zstd frame: readers see no difference.
  void SetCompression(int level, int workers);

  uint64_t bytes_written() const { return pos_; }
  uint64_t raw_bytes() const { return raw_total_; }
  const std::vector<SectionInfo>& sections() const { return sections_; }
  int fd() const { return fd_.get(); }

 private:
  RecordWriter() = default;
  Status WriteRaw(const void* data, size_t len);
  Status Compress(std::string_view in, ZSTD_EndDirective mode);
  Status EndFrame();

  ScopedFd fd_;
  std::string name_;
  RecordHeader header_;
  WriterOptions options_;  // what the compression context runs with
  WriterOptions wanted_;   // SetCompression's, applied at the next frame
  void ApplyWanted();
  ZSTD_CCtx* cctx_ = nullptr;
  std::vector<char> out_;
  uint64_t pos_ = 0;
  uint64_t raw_total_ = 0;
  bool in_section_ = false;
  bool finished_ = false;
  std::vector<SectionInfo> sections_;
  void* hash_state_ = nullptr;  // XXH3_state_t of the open section
  uint64_t frame_start_ = 0;
  uint64_t frame_raw_ = 0;
};

class RecordReader;

// Streams one section's uncompressed bytes; checks the stored bytes' XXH3 and
// the raw size when the end is reached.
class SectionReader {
 public:
  ~SectionReader();
  // Returns bytes read into buf (0 at the end of the section).
  StatusOr<size_t> Read(void* buf, size_t len);
  const SectionInfo& info() const { return info_; }

 private:
  friend class RecordReader;
  SectionReader() = default;
  Status Fill();
  Status Check();
  int fd_ = -1;
  std::string display_;
  SectionInfo info_;
  ZSTD_DCtx* dctx_ = nullptr;
  std::vector<char> in_;
  ZSTD_inBuffer zin_{nullptr, 0, 0};
  uint64_t stored_read_ = 0;
  uint64_t raw_read_ = 0;
  void* hash_state_ = nullptr;
  bool checked_ = false;
  size_t last_ret_ = 0;
};

class RecordReader {
 public:
  // Opens and validates prefix, header, trailer and TOC. Errors name the file.
  static StatusOr<std::unique_ptr<RecordReader>> Open(const std::string& path);
  // Same, on an fd already open (e.g. opened relative to the store dir).
  static StatusOr<std::unique_ptr<RecordReader>> OpenFd(ScopedFd fd, std::string display_name);

  const RecordHeader& header() const { return header_; }
  const std::vector<SectionInfo>& sections() const { return sections_; }
  const nlohmann::json& meta() const { return meta_; }
  uint64_t file_size() const { return file_size_; }
  const SectionInfo* FindSection(const std::string& name) const;
  StatusOr<std::unique_ptr<SectionReader>> OpenSection(const std::string& name) const;
  // Reads a whole section into memory; refuses sections over max_bytes.
  StatusOr<std::string> ReadSection(const std::string& name, uint64_t max_bytes = 1ull << 30) const;
  // Decompresses every section and checks every checksum.
  Status Verify() const;
  // The same for one section (one of sections()).
  Status VerifySection(const std::string& name) const;
  const std::string& display_name() const { return display_; }

 private:
  RecordReader() = default;
  ScopedFd fd_;
  std::string display_;
  RecordHeader header_;
  std::vector<SectionInfo> sections_;
  nlohmann::json meta_;
  uint64_t file_size_ = 0;
};

}  // namespace flightrec::store
