#include "recorder/daemon/mem_growth.h"

#include <sys/ioctl.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <set>

#include <fmt/format.h>

#include "common/units.h"
#include "recorder/daemon/tracepoint_format.h"
#include "recorder/perf/perf_event.h"
#include "recorder/perf/record_parser.h"

namespace flightrec::recorder {
namespace {

constexpr uint64_t kGrowthSampleType = perf::kSampleType & ~uint64_t{PERF_SAMPLE_PERIOD};

}  // namespace

StatusOr<std::unique_ptr<MemGrowth>> MemGrowth::Create() {
  std::unique_ptr<MemGrowth> g(new MemGrowth());
  for (int cpu : perf::OnlineCpus()) {
    perf_event_attr a{};
    a.size = sizeof(a);
    a.type = PERF_TYPE_SOFTWARE;
    a.config = PERF_COUNT_SW_PAGE_FAULTS;
    a.sample_period = kFaultsPerSample;
    // No PERF_SAMPLE_PERIOD: with it, a software event of fixed period
    // overflows at every event (kernel/events/core.c perf_swevent_event:
    // `if ((sample_type & PERF_SAMPLE_PERIOD) && !attr.freq) { data->period
    // = nr; return perf_swevent_overflow(event, 1, ...); }`), one sample per
    // fault instead of per 64: +38% CPU on a fault-bound program.
    a.sample_type = kGrowthSampleType;
    a.sample_id_all = 1;
    a.write_backward = 1;
    a.use_clockid = 1;
    a.clockid = CLOCK_MONOTONIC;
    // The user stack is what names the grower; the kernel's fault path is
    // the same for every fault and would cost ring space.
    a.exclude_callchain_kernel = 1;
    a.disabled = 1;  // enabled once mapped (see PerfBackend::OpenCpu)
    Cpu c;
    c.cpu = cpu;
    ASSIGN_OR_RETURN(
        c.fd, perf::OpenPerfEvent(a, -1, cpu, -1, fmt::format("page-faults on cpu {}", cpu)));
    ASSIGN_OR_RETURN(auto ring,
                     perf::PerfRingBuffer::Allocate(c.fd.get(), kMemGrowthRingPages, true));
    c.ring.emplace(std::move(ring));
    if (ioctl(c.fd.get(), PERF_EVENT_IOC_ENABLE, 0) != 0) {
      return ErrnoStatus(fmt::format("enabling page-faults on cpu {}", cpu));
    }
    g->cpus_.push_back(std::move(c));
  }
  return g;
}

std::vector<Sample> MemGrowth::Take(uint32_t pid, uint64_t start_ns, uint64_t end_ns) {
  for (auto& c : cpus_) ioctl(c.fd.get(), PERF_EVENT_IOC_PAUSE_OUTPUT, 1);
  std::vector<perf::PerfRingBuffer::Copy> copies;
  for (auto& c : cpus_) copies.push_back(c.ring->CopyBackward());
  for (auto& c : cpus_) ioctl(c.fd.get(), PERF_EVENT_IOC_PAUSE_OUTPUT, 0);
  std::vector<Sample> out;
  for (size_t i = 0; i < copies.size(); ++i) {
    for (size_t k = 0; k < copies[i].size(); ++k) {
      perf::ParseResult r = perf::ParsePerfRecord(copies[i].record(k), kGrowthSampleType,
                                                  static_cast<uint32_t>(cpus_[i].cpu));
      if (r.malformed) ++malformed_;
      auto* s = r.event ? std::get_if<Sample>(&*r.event) : nullptr;
      if (s == nullptr || s->pid != pid || s->time_ns < start_ns || s->time_ns > end_ns) continue;
      s->period = kFaultsPerSample;
      out.push_back(std::move(*s));
    }
  }
  std::stable_sort(out.begin(), out.end(),
                   [](const Sample& a, const Sample& b) { return a.time_ns < b.time_ns; });
  return out;
}

void MemGrowth::SampleRss(uint64_t now_ns) {
  if (now_ns < last_rss_ns_ + kRssIntervalNs) return;
  last_rss_ns_ = now_ns;
  const int64_t t0 = MonotonicNs();
  const uint64_t page = static_cast<uint64_t>(sysconf(_SC_PAGESIZE));
  std::set<uint32_t> seen;
  std::error_code ec;
  for (auto it = std::filesystem::directory_iterator("/proc", ec);
       !ec && it != std::filesystem::directory_iterator() && seen.size() < kMaxRssProcesses;
       it.increment(ec)) {
    const std::string name = it->path().filename().string();
    if (name.empty() || name.find_first_not_of("0123456789") != std::string::npos) continue;
    const uint32_t pid = static_cast<uint32_t>(std::strtoul(name.c_str(), nullptr, 10));
    // statm: size resident shared text lib data dt (pages).
    const std::string statm = ReadFilePrefix("/proc/" + name + "/statm", 128);
    const char* sp = std::strchr(statm.c_str(), ' ');
    if (sp == nullptr) continue;
    const uint64_t rss = std::strtoull(sp + 1, nullptr, 10) * page;
    seen.insert(pid);
    auto& points = rss_[pid];
    // A point when the RSS moved (or the first): a quiet process costs one.
    if (!points.empty() && points.back().rss_bytes == rss) continue;
    points.push_back({now_ns, rss});
    if (points.size() > kMaxRssPoints) points.pop_front();
  }
  std::erase_if(rss_, [&seen](const auto& e) { return !seen.contains(e.first); });
  ++rss_scans_;
  rss_scan_ns_ += static_cast<uint64_t>(MonotonicNs() - t0);
}

std::vector<RssPoint> MemGrowth::Rss(uint32_t pid, uint64_t start_ns, uint64_t end_ns) const {
  std::vector<RssPoint> out;
  auto it = rss_.find(pid);
  if (it == rss_.end()) return out;
  for (const RssPoint& p : it->second) {
    // The last point before the window is the RSS at its start.
    if (p.time_ns < start_ns) {
      out.assign(1, p);
      continue;
    }
    if (p.time_ns <= end_ns) out.push_back(p);
  }
  return out;
}

nlohmann::json MemGrowth::Status() const {
  return {{"event", "page-faults"},
          {"faults_per_sample", kFaultsPerSample},
          {"ring_bytes_per_cpu", cpus_.empty() ? 0 : cpus_[0].ring->data_size()},
          {"malformed_records", malformed_},
          {"rss_processes", rss_.size()},
          {"rss_scans", rss_scans_},
          {"rss_scan_ms_total", rss_scan_ns_ / 1'000'000}};
}

}  // namespace flightrec::recorder
