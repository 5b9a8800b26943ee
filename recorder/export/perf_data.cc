// perf.data export: the file `perf record` writes, so `perf report`,
// `perf script`, hotspot and FlameGraph's stackcollapse-perf read our records.
//
// Layout (tools/perf/Documentation/perf.data-file-format.txt and
// tools/perf/util/header.c, torvalds/linux 00093b3133984ffe80697b5d2e7f204983660dd9):
//
//   perf_file_header   magic "PERFILE2", size 104, attr_size, the attrs, data
//                      and event_types sections, the 256-bit feature bitmap
//   attrs              one struct perf_file_attr: perf_event_attr + ids section
//   data               PERF_RECORD_COMM / MMAP2 / SAMPLE records, time order
//   feature index      one perf_file_section per feature bit set, in bit
//                      order, at data.offset + data.size (header.c
//                      perf_header__process_sections)
//   feature payloads   BUILD_ID, HOSTNAME, OSRELEASE, ARCH, NRCPUS, CMDLINE,
//                      SAMPLE_TIME
//
// Records hold a user frame as (file, file offset), not as the address it had
// in the process: each file gets a window of its own in a synthetic address
// space (the same window in every process) and an MMAP2 record with pgoff 0
// maps it there, so perf's map_ip (ip - start + pgoff) gives back the file
// offset, which is what perf computes from a live recording too. Mappings
// carry the build-id (PERF_RECORD_MISC_MMAP_BUILD_ID) or else the device and
// inode; the BUILD_ID feature lists every file with a build-id so perf finds
// it on disk or in ~/.debug and refuses a different file at the same path.
// vDSO frames get a window of their own, mapped as "[vdso]" (VdsoIp).
//
// Kernel frames: a root record's frames are kernel addresses and go out as
// they are, under a kernel map (KernelMmap) perf names them through, from
// /proc/kallsyms; a user's record holds only names, which perf.data cannot
// carry, so those frames show as [unknown] in perf. Fork/exit are not
// written: perf creates a thread on its first sample, and threads of a
// process share its maps.
#include <linux/perf_event.h>
#include <sys/sysmacros.h>

#include <algorithm>
#include <charconv>
#include <cstring>
#include <fstream>
#include <map>
#include <set>
#include <unordered_map>

#include <fmt/format.h>

#include "common/checked_json.h"
#include "common/terminal_escape.h"
#include "recorder/attribution/vdso.h"
#include "recorder/export/exporters.h"
#include "recorder/export/perf_data.h"
#include "recorder/model/perf_sideband.h"

namespace flightrec::recorder::exporter {

namespace perfdata {

void Buf::Str(std::string_view s, size_t align) {
  size_t len = (s.size() + 1 + align - 1) / align * align;
  data_.append(s);
  data_.append(len - s.size(), '\0');
}

void Buf::HeaderString(std::string_view s) {
  // struct perf_header_string: u32 len (with the NUL, padded to NAME_ALIGN
  // 64), then the bytes (header.c do_write_string).
  U32(static_cast<uint32_t>((s.size() + 1 + 63) / 64 * 64));
  Str(s, 64);
}

std::string BuildIdBytes(std::string_view hex) {
  if (hex.empty() || hex.size() % 2 != 0 || hex.size() > 2 * kMaxBuildId) return "";
  std::string out;
  for (size_t i = 0; i < hex.size(); i += 2) {
    auto nibble = [](char c) -> int {
      if (c >= '0' && c <= '9') return c - '0';
      if (c >= 'a' && c <= 'f') return c - 'a' + 10;
      if (c >= 'A' && c <= 'F') return c - 'A' + 10;
      return -1;
    };
    int hi = nibble(hex[i]), lo = nibble(hex[i + 1]);
    if (hi < 0 || lo < 0) return "";
    out += static_cast<char>(hi << 4 | lo);
  }
  return out;
}

StatusOr<EventAttr> AttrForEvent(std::string_view event, uint64_t frequency_hz) {
  EventAttr a;
  if (event.empty() || event == "cpu-clock") {
    a.type = PERF_TYPE_SOFTWARE;
    a.config = PERF_COUNT_SW_CPU_CLOCK;
    a.period = frequency_hz ? 1'000'000'000 / frequency_hz : 0;
    a.name = "cpu-clock";
    return a;
  }
  if (event == "cycles") {
    a.type = PERF_TYPE_HARDWARE;
    a.config = PERF_COUNT_HW_CPU_CYCLES;
    a.freq = frequency_hz;
    a.name = "cycles";
    return a;
  }
  // The perf backend's name for an event given by number.
  unsigned long long type = 0, config = 0, period = 0;
  int end = 0;
  std::string text(event.substr(0, 128));
  if (event.size() < 128 &&
      std::sscanf(text.c_str(), "type %llu config %llu period %llu%n", &type, &config, &period,
                  &end) == 3 &&
      static_cast<size_t>(end) == text.size() && type <= UINT32_MAX) {
    a.type = static_cast<uint32_t>(type);
    a.config = config;
    a.period = period;
    a.name = text;
    return a;
  }
  return InvalidArgument(fmt::format("the record's event '{}' has no perf_event_attr equivalent",
                                     EscapeForTerminal(event.substr(0, 64))));
}

std::string FileAttr(const EventAttr& ev) {
  // struct perf_event_attr as of PERF_ATTR_SIZE_VER7 (128 bytes, what perf
  // 6.1 knows; read_attr refuses a larger size), then the ids section.
  perf_event_attr attr{};
  static_assert(sizeof(attr) >= kAttrSize);
  attr.type = ev.type;
  attr.size = kAttrSize;
  attr.config = ev.config;
  if (ev.freq) {
    attr.freq = 1;
    attr.sample_freq = ev.freq;
  } else {
    attr.sample_period = ev.period;
  }
  attr.sample_type = kSampleType;
  attr.disabled = 1;
  attr.inherit = 1;
  attr.exclude_guest = 1;  // as perf record sets it; perf then names the event plainly
  SetSidebandRecordBits(&attr);
  std::string out(reinterpret_cast<const char*>(&attr), kAttrSize);
  out.append(16, '\0');  // ids: none (one attr: every record is its)
  return out;
}

std::string CurrentBootId() {
  std::ifstream in("/proc/sys/kernel/random/boot_id");
  std::string id;
  std::getline(in, id);
  return id;
}

uint64_t KallsymsAddress(const std::string& path, std::string_view symbol) {
  std::ifstream in(path);
  std::string line;
  while (std::getline(in, line)) {
    // "ffffffff81000000 T _text": the name is the third field.
    size_t sp1 = line.find(' ');
    if (sp1 == std::string::npos || line.size() < sp1 + 3) continue;
    std::string_view name = std::string_view(line).substr(sp1 + 3);
    if (name != symbol) continue;
    uint64_t addr = 0;
    auto [p, ec] = std::from_chars(line.data(), line.data() + sp1, addr, 16);
    return ec == std::errc() && p == line.data() + sp1 ? addr : 0;
  }
  return 0;
}

}  // namespace perfdata

namespace {

using perfdata::Buf;

// Where the synthetic address space puts files: a 4 GiB window each, from
// 16 TiB up to 80 TiB — far from where Linux puts executables (0x55..,
// 0x7f..), so an unmapped frame's raw address rarely lands in a window.
constexpr uint64_t kWindowBase = 0x1000'0000'0000;
constexpr uint64_t kWindowSize = 1ull << 32;
constexpr uint64_t kWindowEnd = 0x5000'0000'0000;
constexpr char kVdsoName[] = "[vdso]";  // the name perf record gives the vDSO's map
// A kernel frame below this is a name reference (a user's record), not an
// address (attribution.h KernelSymbols::NameRef).
constexpr uint64_t kKernelHalf = 0xffff'8000'0000'0000;
// A record's header.size is u16: 64 bytes of fields and at most 8000 frames.
constexpr size_t kMaxChain = 8000;
constexpr size_t kMaxPath = 4095;               // PATH_MAX with its NUL
constexpr size_t kMaxComm = 64;                 // more than TASK_COMM_LEN; bounds odd ones
constexpr uint16_t kMiscBuildIdSize = 1 << 15;  // PERF_RECORD_MISC_BUILD_ID_SIZE
constexpr uint16_t kMiscMmapBuildId = 1 << 14;  // PERF_RECORD_MISC_MMAP_BUILD_ID

// Feature bits (header.h enum, listed in perf.data-file-format.txt).
enum Feature : int {
  kBuildId = 2,
  kHostname = 3,
  kOsRelease = 4,
  kArch = 6,
  kNrCpus = 7,
  kCmdline = 11,
  kSampleTime = 21,
};

class PerfData : public Exporter {
 public:
  void Begin(const analysis::RecordInfo& info, std::ostream* out) override {
    out_ = out;
    info_ = info;
    const auto& backend = json::Object(info.config, "backend");
    auto attr = perfdata::AttrForEvent(json::Str(backend, "event"),
                                       json::Get<uint64_t>(backend, "frequency_hz", 0));
    if (!attr.ok()) {
      Fail(attr.status());
      return;
    }
    attr_ = *attr;
  }

  void Add(const analysis::ResolvedSample& rs) override {
    if (!error_.ok()) return;
    const auto& s = *rs.sample;
    if (first_time_ == 0 || s.time_ns < first_time_) first_time_ = s.time_ns;
    last_time_ = std::max(last_time_, s.time_ns);
    max_cpu_ = std::max(max_cpu_, s.cpu);
    Comm(s);
    // Innermost first: kernel frames, then user frames, each part behind its
    // context marker as the kernel writes callchains (perf_callchain_store
    // after PERF_CONTEXT_KERNEL / PERF_CONTEXT_USER).
    std::vector<uint64_t> chain;
    bool in_kernel = false;
    bool user_started = false;
    for (size_t i = 0; i < s.frames.size(); ++i) {
      const auto& f = s.frames[i];
      if (chain.size() >= kMaxChain) break;  // the root end goes, as with perf's max_stack
      if (f.kernel) {
        if (!in_kernel && !user_started) {
          chain.push_back(PERF_CONTEXT_KERNEL);
          in_kernel = true;
        }
        chain.push_back(f.offset);
        // Kernel frames are never expanded into inlined ones, so stack[i]
        // is this frame's symbol: the core kernel's extent is that of its
        // frames (modules stay outside, and unnamed in perf).
        if (f.offset >= kKernelHalf && i < rs.stack.size() &&
            rs.stack[i]->dso == "[kernel.kallsyms]") {
          kernel_lo_ = std::min(kernel_lo_, f.offset);
          kernel_hi_ = std::max(kernel_hi_, f.offset);
        }
        continue;
      }
      if (!user_started) {
        chain.push_back(PERF_CONTEXT_USER);
        user_started = true;
      }
      chain.push_back(UserIp(s.pid, f, rs.cookies, s.time_ns, s.cpu));
    }
    uint64_t leaf = 0;
    for (uint64_t ip : chain) {
      if (ip < PERF_CONTEXT_MAX) {
        leaf = ip;
        break;
      }
    }
    Buf r;
    // PERF_RECORD_SAMPLE fields in sample_type bit order (perf_event.h).
    r.U64(leaf);
    r.U32(s.pid);
    r.U32(s.tid);
    r.U64(s.time_ns);
    r.U32(s.cpu);
    r.U32(0);
    r.U64(s.period);
    r.U64(chain.size());
    for (uint64_t ip : chain) r.U64(ip);
    Record(PERF_RECORD_SAMPLE, in_kernel ? PERF_RECORD_MISC_KERNEL : PERF_RECORD_MISC_USER, r,
           /*sample_id=*/false, s);
    ++samples_;
  }

  std::vector<std::string> Notes() const override {
    std::vector<std::string> notes;
    for (const auto& [why, n] : unplaced_) {
      notes.push_back(fmt::format(
          "perf.data: {} frames {} are written as unknown addresses (perf shows [unknown]); "
          "the other formats name them",
          n, why));
    }
    if (foreign_vdso_frames_) {
      notes.push_back(fmt::format(
          "perf.data: {} [vdso] frames are in another kernel's vDSO (build-id {}), which perf "
          "names only from that image in its build-id cache; the other formats name them from "
          "the record",
          foreign_vdso_frames_, info_.vdso_build_id));
    }
    return notes;
  }

  Status Finish() override {
    if (!error_.ok()) return error_;
    // Feature payloads, in bit order.
    std::map<int, std::string> features;
    Buf ids;
    for (const auto& [path, bid] : build_ids_) {
      // struct perf_record_header_build_id (36 bytes) + the name padded to
      // NAME_ALIGN; pid -1 is the host (header.c write_buildid).
      Buf b;
      b.U32(static_cast<uint32_t>(-1));
      std::string raw = bid;
      raw.resize(20, '\0');
      b.Bytes(raw);
      b.U8(static_cast<uint8_t>(bid.size()));
      b.U8(0);
      b.U16(0);
      b.Str(path, 64);
      ids.U32(perfdata::kRecordHeaderBuildId);
      ids.U16(PERF_RECORD_MISC_USER | kMiscBuildIdSize);
      ids.U16(static_cast<uint16_t>(8 + b.size()));
      ids.Bytes(b.data());
    }
    if (ids.size()) features[kBuildId] = ids.data();
    auto string_feature = [&](int bit, std::string_view s) {
      if (s.empty()) return;
      Buf b;
      b.HeaderString(s.substr(0, 256));
      features[bit] = b.data();
    };
    string_feature(kHostname, info_.host);
    string_feature(kOsRelease, info_.kernel);
#if defined(__x86_64__)
    string_feature(kArch, "x86_64");
#elif defined(__aarch64__)
    string_feature(kArch, "aarch64");
#endif
    {
      // struct nr_cpus: available, then online (header.c process_nrcpus).
      // The record keeps only the CPUs it sampled on.
      Buf b;
      b.U32(max_cpu_ + 1);
      b.U32(max_cpu_ + 1);
      features[kNrCpus] = b.data();
    }
    {
      Buf b;  // perf_header_string_list: how the file was made
      std::vector<std::string> argv = {"recorder", "export", info_.id.substr(0, 128), "-f", "perf"};
      b.U32(static_cast<uint32_t>(argv.size()));
      for (const auto& a : argv) b.HeaderString(a);
      features[kCmdline] = b.data();
    }
    if (samples_) {
      Buf b;
      b.U64(first_time_);
      b.U64(last_time_);
      features[kSampleTime] = b.data();
    }

    if (kernel_lo_ <= kernel_hi_) KernelMmap();
    const std::string attr = perfdata::FileAttr(attr_);
    const uint64_t attrs_at = perfdata::kFileHeaderSize;
    const uint64_t data_at = attrs_at + attr.size();
    const uint64_t index_at = data_at + data_.size();
    Buf head;
    head.U64(perfdata::kMagic);
    head.U64(perfdata::kFileHeaderSize);
    head.U64(attr.size());  // perf_file_attr: the attr and its ids section
    head.U64(attrs_at);
    head.U64(attr.size());
    head.U64(data_at);
    head.U64(data_.size());
    head.U64(0);  // event_types: unused since perf 3.x
    head.U64(0);
    uint64_t bits[4] = {};
    for (const auto& [bit, payload] : features) bits[bit / 64] |= 1ull << (bit % 64);
    for (uint64_t w : bits) head.U64(w);
    Buf index;
    uint64_t at = index_at + features.size() * 16;
    for (const auto& [bit, payload] : features) {
      index.U64(at);
      index.U64(payload.size());
      at += payload.size();
    }
    out_->write(head.data().data(), static_cast<std::streamsize>(head.size()));
    out_->write(attr.data(), static_cast<std::streamsize>(attr.size()));
    out_->write(data_.data(), static_cast<std::streamsize>(data_.size()));
    out_->write(index.data().data(), static_cast<std::streamsize>(index.size()));
    for (const auto& [bit, payload] : features) {
      out_->write(payload.data(), static_cast<std::streamsize>(payload.size()));
    }
    return out_->good() ? OkStatus() : Status(StatusCode::kInternal, "writing perf.data failed");
  }

 private:
  void Fail(Status st) {
    if (error_.ok()) error_ = std::move(st);
  }

  // Appends a record; non-sample records end in the sample_id_all fields
  // (pid/tid, time, cpu: the TID, TIME and CPU bits of sample_type).
  void Record(uint32_t type, uint16_t misc, const Buf& body, bool sample_id,
              const attribution::AttributedSample& s) {
    Buf r;
    r.Bytes(body.data());
    if (sample_id) {
      r.U32(s.pid);
      r.U32(s.tid);
      r.U64(s.time_ns);
      r.U32(s.cpu);
      r.U32(0);
    }
    data_.append(reinterpret_cast<const char*>(&type), 4);
    data_.append(reinterpret_cast<const char*>(&misc), 2);
    uint16_t size = static_cast<uint16_t>(8 + r.size());
    data_.append(reinterpret_cast<const char*>(&size), 2);
    data_.append(r.data());
  }

  // A thread's name, written when perf has not seen it yet or it changed.
  void Comm(const attribution::AttributedSample& s) {
    std::string comm = EscapeForTerminal(s.comm.substr(0, kMaxComm));
    auto [it, fresh] = comms_.try_emplace(s.tid, comm);
    if (!fresh && it->second == comm) return;
    it->second = comm;
    Buf b;
    b.U32(s.pid);
    b.U32(s.tid);
    b.Str(comm, 8);
    Record(PERF_RECORD_COMM, PERF_RECORD_MISC_USER, b, true, s);
  }

  // Counts a frame written as address 0, which perf shows as [unknown].
  uint64_t Unplaced(const std::string& why) {
    ++unplaced_[why];
    return 0;
  }

  // A user frame's address in the synthetic space, mapping its file into the
  // process first if this is the file's first frame there.
  uint64_t UserIp(uint32_t pid, const attribution::Frame& f,
                  const attribution::CookieTable* cookies, uint64_t time_ns, uint32_t cpu) {
    const attribution::Cookie* c = f.cookie && cookies ? cookies->Get(f.cookie) : nullptr;
    if (!c && f.special == "[vdso]" && f.offset < kWindowSize) {
      return VdsoIp(pid, f.offset, time_ns, cpu);
    }
    if (!c) {
      // Anonymous or unknown: the raw address, unless it would land in a
      // file's window and be named after that file.
      return f.offset >= kWindowBase && f.offset < kWindowEnd ? 0 : f.offset;
    }
    // A frame perf.data cannot place (an executable mapping more than 4 GiB
    // into its file, more files than windows, a file without a path) goes
    // out as an unknown address: a user's odd mapping must not cost root
    // the export of everyone else's samples.
    if (f.offset >= kWindowSize) return Unplaced("past 4 GiB into their file");
    auto wit = windows_.find(c->id);
    if (wit == windows_.end()) {
      if (c->path.empty() || c->path.size() > kMaxPath || c->path.find('\0') != std::string::npos) {
        return Unplaced("in files without a usable path");
      }
      const uint64_t base = NextWindow();
      if (base == 0) return Unplaced(TooManyFiles());
      wit = windows_.emplace(c->id, base).first;
      std::string bid = perfdata::BuildIdBytes(c->build_id);
      if (!bid.empty()) build_ids_[c->path] = bid;
    }
    const uint64_t base = wit->second;
    if (mapped_.insert({pid, c->id}).second) {
      Mmap2(pid, c->path, perfdata::BuildIdBytes(c->build_id), c->dev, c->ino, base, time_ns, cpu);
    }
    return base + f.offset;
  }

  // A vDSO frame: an offset into the image every process of the recording
  // kernel maps. perf record maps it as "[vdso]" at pgoff 0 (the image is
  // linked at 0, so offset = address in the ELF). perf report looks a
  // [vdso] with a build-id up in its build-id cache only (which perf record
  // fills and we do not: "not found, continuing without symbols"); one
  // without a build-id it names from its own vDSO (machine.c
  // machine__findnew_vdso: a copy of perf's [vdso] in a temporary file).
  // So the map goes without a build-id when the record's image is this
  // machine's (or, for a record without an image, it is of this boot), and
  // with the record's build-id otherwise: perf then names the frames only
  // from that very image, never from a different kernel's.
  uint64_t VdsoIp(uint32_t pid, uint64_t offset, uint64_t time_ns, uint32_t cpu) {
    if (vdso_base_ == 0) {
      const std::string& theirs = info_.vdso_build_id;
      if (theirs.empty() && (info_.boot_id.empty() || info_.boot_id != perfdata::CurrentBootId())) {
        return Unplaced("in the vDSO of another boot, which the record keeps no image of");
      }
      vdso_base_ = NextWindow();
      if (vdso_base_ == 0) return Unplaced(TooManyFiles());
      auto own = attribution::ReadOwnVdso();
      if (!theirs.empty() && (!own.ok() || attribution::VdsoBuildId(*own) != theirs)) {
        vdso_build_id_ = perfdata::BuildIdBytes(theirs);
        build_ids_[kVdsoName] = vdso_build_id_;
      }
    }
    if (!vdso_build_id_.empty()) ++foreign_vdso_frames_;
    if (vdso_mapped_.insert(pid).second) {
      Mmap2(pid, kVdsoName, vdso_build_id_, 0, 0, vdso_base_, time_ns, cpu);
    }
    return vdso_base_ + offset;
  }

  // The base of a window no file has yet; 0 when every window is taken.
  uint64_t NextWindow() {
    const uint64_t base = kWindowBase + windows_taken_ * kWindowSize;
    if (base + kWindowSize > kWindowEnd) return 0;
    ++windows_taken_;
    return base;
  }
  static std::string TooManyFiles() {
    return fmt::format("in files beyond the first {}", (kWindowEnd - kWindowBase) / kWindowSize);
  }

  // The core kernel's map, in front of every other record, as perf record
  // writes it (perf_event__synthesize_kernel_mmap): pid -1, named
  // "[kernel.kallsyms]" + the relocation symbol, whose address at record time
  // is pgoff (machine.c machine__process_kernel_mmap_event). perf names the
  // frames from /proc/kallsyms, shifted by how far that symbol moved. Only
  // this boot's _text is known, so a record of another boot gets pgoff 0: no
  // relocation, and perf warns that names may be wrong, as they may.
  void KernelMmap() {
    const uint64_t start = kernel_lo_ & ~uint64_t{0xfff};
    const uint64_t end = (kernel_hi_ | 0xfff) + 1;
    const uint64_t text = info_.boot_id.empty() || info_.boot_id != perfdata::CurrentBootId()
                              ? 0
                              : perfdata::KallsymsAddress("/proc/kallsyms", "_text");
    Buf b;
    b.U32(UINT32_MAX);
    b.U32(0);
    b.U64(start);
    b.U64(end - start);
    b.U64(text);
    b.Str(text ? "[kernel.kallsyms]_text" : "[kernel.kallsyms]", 8);
    attribution::AttributedSample at;
    at.pid = UINT32_MAX;
    at.time_ns = first_time_;
    std::string body = std::move(data_);
    data_.clear();
    Record(PERF_RECORD_MMAP, PERF_RECORD_MISC_KERNEL, b, true, at);
    data_ += body;
  }

  void Mmap2(uint32_t pid, const std::string& path, std::string bid, uint64_t dev, uint64_t ino,
             uint64_t base, uint64_t time_ns, uint32_t cpu) {
    // struct perf_record_mmap2 (perf_event.h PERF_RECORD_MMAP2): the threads
    // of a process share its maps in perf, so tid = pid.
    Buf b;
    b.U32(pid);
    b.U32(pid);
    b.U64(base);
    b.U64(kWindowSize);
    b.U64(0);  // pgoff: the window starts at file offset 0
    uint16_t misc = PERF_RECORD_MISC_USER;
    if (!bid.empty()) {
      misc |= kMiscMmapBuildId;
      b.U8(static_cast<uint8_t>(bid.size()));
      b.U8(0);
      b.U16(0);
      bid.resize(20, '\0');
      b.Bytes(bid);
    } else {
      b.U32(major(dev));
      b.U32(minor(dev));
      b.U64(ino);
      b.U64(0);  // ino_generation
    }
    b.U32(0x5);  // PROT_READ | PROT_EXEC
    b.U32(0x2);  // MAP_PRIVATE
    b.Str(path, 8);
    attribution::AttributedSample at;
    at.pid = pid;
    at.tid = pid;
    at.time_ns = time_ns;
    at.cpu = cpu;
    Record(PERF_RECORD_MMAP2, misc, b, true, at);
  }

  std::ostream* out_ = nullptr;
  analysis::RecordInfo info_;
  perfdata::EventAttr attr_;
  Status error_;
  std::string data_;
  uint64_t samples_ = 0;
  uint64_t first_time_ = 0, last_time_ = 0;
  uint32_t max_cpu_ = 0;
  uint64_t kernel_lo_ = UINT64_MAX, kernel_hi_ = 0;  // core kernel frames' addresses
  std::unordered_map<uint32_t, std::string> comms_;  // by tid
  std::unordered_map<uint32_t, uint64_t> windows_;   // by cookie id: the file's base
  uint64_t windows_taken_ = 0;                       // files' and the vDSO's
  uint64_t vdso_base_ = 0;                           // the vDSO's window, 0 = none yet
  std::set<uint32_t> vdso_mapped_;                   // pids with a [vdso] MMAP2
  std::string vdso_build_id_;  // raw; set when the record's vDSO is not this machine's
  uint64_t foreign_vdso_frames_ = 0;
  std::set<std::pair<uint32_t, uint32_t>> mapped_;  // (pid, cookie) with an MMAP2
  std::map<std::string, std::string> build_ids_;    // path → raw build-id
  std::map<std::string, uint64_t> unplaced_;        // why → frames written as unknown
};

}  // namespace

std::unique_ptr<Exporter> MakePerfData() { return std::make_unique<PerfData>(); }

}  // namespace flightrec::recorder::exporter
