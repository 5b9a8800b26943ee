// Reading a dump record back (LoadDump): the other half of dump_writer.cc.
// Record files are hostile input: every section is read with a bound and JSON
// through common/checked_json.h.
#include <fmt/format.h>

#include "common/checked_json.h"
#include "recorder/attribution/vdso.h"
#include "recorder/model/event_codec.h"
#include "recorder/record/dump_record.h"
#include "recorder/record/sections.h"

namespace flightrec::recorder {

StatusOr<attribution::KernelSymbols> LoadedDump::Kernel() const {
  if (kernel_names.empty()) return attribution::KernelSymbols::FromText(kallsyms);
  return attribution::KernelSymbols::FromNames(kernel_names);
}

StatusOr<LoadedDump> LoadDump(const store::RecordReader& reader, bool decode_events,
                              bool read_events) {
  LoadedDump d;
  if (reader.FindSection(kSectionEvents) == nullptr) {
    return InvalidArgument(fmt::format("record {} ({}) has no event history to report on",
                                       reader.header().id, reader.header().kind));
  }
  std::string events;
  if (read_events) {
    ASSIGN_OR_RETURN(events, reader.ReadSection(kSectionEvents));
  }
  EventDecoder dec(events);
  for (; read_events && decode_events;) {
    Event e;
    auto more = dec.Next(&e);
    if (!more.ok()) {
      return more.status().Annotate(fmt::format("record {}", reader.display_name()));
    }
    if (!*more) break;
    d.events.push_back(std::move(e));
  }
  if (!decode_events) d.events_raw = std::move(events);
  if (reader.FindSection(kSectionKallsyms)) {
    ASSIGN_OR_RETURN(d.kallsyms, reader.ReadSection(kSectionKallsyms));
  }
  if (reader.FindSection(kSectionVdso)) {
    ASSIGN_OR_RETURN(d.vdso, reader.ReadSection(kSectionVdso, attribution::kMaxVdsoBytes));
  }
  if (reader.FindSection(kSectionKernelNames)) {
    // 2^24 names of at most 512 bytes would be 8 GiB: a real table is far
    // smaller, so a bigger section is refused before it is read.
    ASSIGN_OR_RETURN(d.kernel_names, reader.ReadSection(kSectionKernelNames, 64u << 20));
  }
  for (auto [name, target] :
       {std::pair{kSectionConfig, &d.config}, std::pair{kSectionLoss, &d.loss}}) {
    if (!reader.FindSection(name)) continue;
    ASSIGN_OR_RETURN(std::string text, reader.ReadSection(name));
    *target = json::ParseBounded(text);  // untrusted: depth-bounded
    if (target->is_discarded()) {
      return Corrupt(
          fmt::format("{}: section '{}' is not valid JSON", reader.display_name(), name));
    }
  }
  return d;
}

}  // namespace flightrec::recorder
