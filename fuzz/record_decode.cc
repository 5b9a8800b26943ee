#include "fuzz/record_decode.h"

#include <sys/mman.h>
#include <unistd.h>
#include <xxhash.h>

#include <cstring>
#include <fstream>
#include <sstream>

#include <fmt/format.h>

#include "common/checked_json.h"
#include "common/scoped_fd.h"
#include "recorder/analysis/replay.h"
#include "recorder/cli/cli.h"
#include "store/record_file.h"

namespace flightrec::fuzz {
namespace {

using store::kPrefixSize;
using store::kTrailerSize;

uint32_t Le32(const std::string& b, size_t at) {
  uint32_t v;
  std::memcpy(&v, b.data() + at, 4);
  return v;
}
uint64_t Le64(const std::string& b, size_t at) {
  uint64_t v;
  std::memcpy(&v, b.data() + at, 8);
  return v;
}
void Put64(std::string* b, size_t at, uint64_t v) { std::memcpy(b->data() + at, &v, 8); }

// A record in memory, as an fd the reader can open (memfds are regular files).
ScopedFd MemFile(std::string_view bytes) {
  ScopedFd fd(memfd_create("fuzz-record", MFD_CLOEXEC));
  if (!fd) return fd;
  for (size_t off = 0; off < bytes.size();) {
    ssize_t n = write(fd.get(), bytes.data() + off, bytes.size() - off);
    if (n <= 0) return ScopedFd();
    off += static_cast<size_t>(n);
  }
  return fd;
}

// Recomputes the checksums a mutation broke (docs/FORMAT.md: header hash over
// prefix[0..16) + header JSON; each section's XXH3 over its stored bytes, in
// the table of contents; the TOC's XXH3 in the trailer).
std::string FixChecksums(std::string b) {
  if (b.size() < kPrefixSize + kTrailerSize) return b;
  const uint32_t hlen = Le32(b, 12);
  if (hlen <= b.size() - kPrefixSize) {
    XXH3_state_t* s = XXH3_createState();
    XXH3_64bits_reset(s);
    XXH3_64bits_update(s, b.data(), 16);
    XXH3_64bits_update(s, b.data() + kPrefixSize, hlen);
    Put64(&b, 16, XXH3_64bits_digest(s));
    XXH3_freeState(s);
    Put64(&b, 24, 0);
  }
  const size_t t = b.size() - kTrailerSize;
  if (std::memcmp(b.data() + t, store::kTrailerMagic, 8) != 0) return b;
  const uint64_t toc_off = Le64(b, t + 8);
  if (toc_off > t || Le64(b, t + 16) != t - toc_off) return b;
  std::string toc = b.substr(toc_off, t - toc_off);
  json::Json j = json::ParseBounded(toc);
  if (j.is_object() && j.contains("sections") && j["sections"].is_array()) {
    bool changed = false;
    for (auto& s : j["sections"]) {
      const uint64_t off = json::Get<uint64_t>(s, "offset", UINT64_MAX);
      const uint64_t len = json::Get<uint64_t>(s, "stored_size", UINT64_MAX);
      if (!s.is_object() || off > toc_off || len > toc_off - off) continue;
      std::string want = fmt::format("{:016x}", XXH3_64bits(b.data() + off, len));
      if (json::Str(s, "xxh3") != want) {
        s["xxh3"] = want;
        changed = true;
      }
    }
    if (changed) {
      toc = json::Dump(j);
      std::string trailer = b.substr(t);
      b.resize(toc_off);
      b += toc;
      Put64(&trailer, 16, toc.size());
      b += trailer;
    }
  }
  const size_t t2 = b.size() - kTrailerSize;
  Put64(&b, t2 + 24, XXH3_64bits(b.data() + Le64(b, t2 + 8), Le64(b, t2 + 16)));
  return b;
}

// Unpacked form: magic, then entries of [u8 name length][name][u32 length]
// [bytes]; "!header" holds the header JSON, "!meta" the meta JSON, any other
// name is a section. Parsing stops at the first entry that does not fit.
std::string PackFromUnpacked(std::string_view in) {
  in.remove_prefix(kUnpackedMagic.size());
  store::RecordHeader header;
  header.id = "fuzz";
  header.kind = "record";
  json::Json meta = json::Json::object();
  std::vector<std::pair<std::string, std::string_view>> sections;
  while (in.size() >= 1) {
    const size_t nlen = static_cast<unsigned char>(in[0]);
    if (in.size() < 1 + nlen + 4) break;
    std::string name(in.substr(1, nlen));
    uint32_t len;
    std::memcpy(&len, in.data() + 1 + nlen, 4);
    in.remove_prefix(1 + nlen + 4);
    if (len > in.size()) break;
    std::string_view body = in.substr(0, len);
    in.remove_prefix(len);
    if (name == "!header") {
      json::Json h = json::ParseBounded(body);
      header.id = json::Str(h, "id", header.id);
      header.kind = json::Str(h, "kind", header.kind);
      header.created_ns = json::Get<int64_t>(h, "created_ns", 0);
      header.host = json::Str(h, "host");
    } else if (name == "!meta") {
      json::Json m = json::ParseBounded(body);
      if (!m.is_discarded()) meta = std::move(m);
    } else {
      sections.emplace_back(std::move(name), body);
    }
  }
  // The writer is trusted code fed by trusted code in production; here it
  // only builds a well-formed file around mutated contents.
  ScopedFd fd(memfd_create("fuzz-pack", MFD_CLOEXEC));
  if (!fd) return "";
  const int raw = fd.get();
  store::WriterOptions wo;
  wo.level = 1;
  wo.workers = 0;
  auto w = store::RecordWriter::Create(ScopedFd(dup(raw)), "fuzz", header, wo);
  if (!w.ok()) return "";
  for (const auto& [name, body] : sections) {
    (void)(*w)->AddSection(name, body);  // duplicate or bad names are skipped
  }
  try {
    if (!(*w)->Finish(meta).ok()) return "";
  } catch (const std::exception&) {
    return "";  // meta that nlohmann cannot serialize (invalid UTF-8)
  }
  std::string out((*w)->bytes_written(), '\0');
  if (pread(raw, out.data(), out.size(), 0) != static_cast<ssize_t>(out.size())) return "";
  return out;
}

}  // namespace

std::string RecordFileFor(std::string_view in) {
  if (in.substr(0, kUnpackedMagic.size()) == kUnpackedMagic) return PackFromUnpacked(in);
  return FixChecksums(std::string(in));
}

void DecodeRecordBytes(const uint8_t* data, size_t size, bool every_variant) {
  const std::string bytes =
      RecordFileFor(std::string_view(reinterpret_cast<const char*>(data), size));
  if (bytes.empty()) return;
  auto reader = store::RecordReader::OpenFd(MemFile(bytes), "fuzz.frec");
  if (!reader.ok()) return;
  const store::RecordReader& r = **reader;
  (void)r.Verify();
  const int pick = every_variant ? -1 : static_cast<int>(XXH3_64bits(data, size) % 1000);
  (void)recorder::cli::ExerciseReportCommands(r, pick);
  (void)recorder::cli::ExerciseScriptCommand(r, pick);
  (void)recorder::cli::ExerciseExportCommand(r, pick);
  (void)recorder::cli::ExerciseCrashCommands(r, pick);
  (void)recorder::cli::ExerciseTraceCommand(r, pick);
  std::fflush(stdout);
}

std::string UnpackRecordFile(const std::string& path, size_t max_section_bytes, bool* ok) {
  *ok = false;
  auto reader = store::RecordReader::Open(path);
  if (!reader.ok()) return "";
  std::string out(kUnpackedMagic);
  auto entry = [&](const std::string& name, std::string_view body) {
    out += static_cast<char>(name.size());
    out += name;
    uint32_t len = static_cast<uint32_t>(body.size());
    out.append(reinterpret_cast<const char*>(&len), 4);
    out += body;
  };
  entry("!header", json::Dump((*reader)->header().ToJson()));
  entry("!meta", json::Dump((*reader)->meta()));
  for (const auto& s : (*reader)->sections()) {
    auto body = (*reader)->ReadSection(s.name);
    if (!body.ok()) return "";
    if (body->size() > max_section_bytes) {
      body->resize(max_section_bytes);
      if (s.name == "kallsyms") body->resize(body->rfind('\n') + 1);
    }
    entry(s.name, *body);
  }
  *ok = true;
  return out;
}

}  // namespace flightrec::fuzz
