#include "recorder/analysis/pt_trace.h"

#include <fmt/format.h>

#include "recorder/attribution/process_table.h"
#include "recorder/elf/build_id.h"
#include "recorder/record/dump_record.h"
#include "recorder/symbolize/symbolizer.h"

namespace flightrec::recorder::analysis {
namespace {

// The executable file mappings of `pid`; a file whose build-id differs from
// the one the record names is another build and is left out (noted).
std::vector<PtImageFile> ImageOf(const attribution::ProcessTable& table, uint32_t pid,
                                 std::vector<std::string>* notes) {
  std::vector<PtImageFile> out;
  const attribution::Process* p = table.Find(pid);
  if (p == nullptr) {
    notes->push_back(fmt::format("the record has no mappings of pid {}", pid));
    return out;
  }
  for (const auto& [start, m] : p->maps) {
    if (!m.exec || m.cookie == 0) continue;
    const attribution::Cookie* c = table.cookies().Get(m.cookie);
    if (c == nullptr || c->path.empty() || c->path[0] != '/') continue;
    if (!c->build_id.empty() && elf::HexBuildId(elf::ReadBuildId(c->path)) != c->build_id) {
      notes->push_back(fmt::format("{}: missing, or not the build the record names", c->path));
      continue;
    }
    out.push_back({m.start, m.end - m.start, m.pgoff, c->path});
  }
  return out;
}

class Namer {
 public:
  Namer(const attribution::ProcessTable& table, symbolize::Symbolizer& sym, uint32_t pid)
      : table_(table), sym_(sym), pid_(pid) {}
  std::string Name(uint64_t ip) {
    if (ip == 0) return "";
    const attribution::Mapping* m = table_.Lookup(pid_, ip);
    if (m == nullptr || m->cookie == 0) return fmt::format("{:#x}", ip);
    attribution::Frame f;
    f.cookie = m->cookie;
    f.offset = ip - m->start + m->pgoff;
    return sym_.Resolve(f).Display();
  }

 private:
  const attribution::ProcessTable& table_;
  symbolize::Symbolizer& sym_;
  uint32_t pid_;
};

std::optional<uint64_t> TimeOf(const AuxTrace& t, bool has_tsc, uint64_t tsc) {
  if (!has_tsc) return std::nullopt;
  return TscToPerfTime(tsc, t.time_mult, t.time_shift, t.time_zero);
}

Status NameFlow(const AuxTrace& t, Namer& namer, int64_t last_ns, CpuFlow* f) {
  std::optional<uint64_t> end;
  for (const auto& s : f->decoded.steps) {
    if (auto tm = TimeOf(t, s.has_tsc, s.tsc)) end = std::max(end.value_or(0), *tm);
  }
  if (last_ns > 0 && !end && !f->decoded.steps.empty()) {
    return InvalidArgument(fmt::format(
        "--last: CPU {}'s trace has no timing packets (TSC), so it cannot be cut by time; "
        "drop --last",
        f->meta.cpu));
  }
  for (auto& s : f->decoded.steps) {
    const auto time = TimeOf(t, s.has_tsc, s.tsc);
    NamedStep n{std::move(s), "", "", time};
    if (last_ns > 0 && (!n.time_ns || *n.time_ns + static_cast<uint64_t>(last_ns) < *end)) {
      ++f->steps_before_window;
      continue;
    }
    n.function = namer.Name(n.step.ip);
    n.target_function = namer.Name(n.step.target);
    f->steps.push_back(std::move(n));
  }
  for (const auto& i : f->decoded.last) {
    f->last.push_back({i, namer.Name(i.ip), TimeOf(t, i.has_tsc, i.tsc)});
  }
  f->decoded.steps.clear();
  f->decoded.last.clear();
  return OkStatus();
}

}  // namespace

StatusOr<RecordTrace> DecodeRecordTrace(const store::RecordReader& reader, const TraceQuery& q) {
  ASSIGN_OR_RETURN(AuxTrace trace, LoadAuxTrace(reader));
  if (trace.pmu != "intel_pt") {
    return InvalidArgument(
        fmt::format("record {}: the trace is from PMU '{}'; recorder trace decodes intel_pt only",
                    reader.display_name(), trace.pmu));
  }
  ASSIGN_OR_RETURN(LoadedDump dump, LoadDump(reader));
  attribution::CookieTable cookies;
  attribution::ProcessTable table(&cookies);
  for (const auto& e : dump.events) table.Apply(e);
  auto kernel = dump.Kernel();
  attribution::KernelSymbols no_kernel;
  symbolize::Symbolizer sym(&cookies, kernel.ok() ? &*kernel : &no_kernel);
  sym.set_vdso(dump.vdso);
  sym.set_want_lines(false);
  RecordTrace out;
  out.pmu = trace.pmu;
  for (auto& c : trace.cpus) {
    if ((q.pid && c.pid != *q.pid) || (q.cpu && c.cpu != *q.cpu)) continue;
    CpuFlow f;
    f.bytes = c.data.size();
    auto image = ImageOf(table, c.pid, &f.image_notes);
    ASSIGN_OR_RETURN(f.decoded, DecodePt(c.data, image, q.decode));
    for (auto& n : f.decoded.image_notes) f.image_notes.push_back(std::move(n));
    c.data.clear();
    f.meta = c;
    if (const attribution::Process* p = table.Find(c.pid)) f.comm = p->comm;
    Namer namer(table, sym, c.pid);
    RETURN_IF_ERROR(NameFlow(trace, namer, q.last_ns, &f));
    out.cpus.push_back(std::move(f));
  }
  if (out.cpus.empty() && (q.pid || q.cpu)) {
    return NotFound(fmt::format("record {}: no CPU's trace matches{}{}", reader.display_name(),
                                q.pid ? fmt::format(" pid {}", *q.pid) : "",
                                q.cpu ? fmt::format(" cpu {}", *q.cpu) : ""));
  }
  return out;
}

}  // namespace flightrec::recorder::analysis
