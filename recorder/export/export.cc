#include "recorder/export/export.h"

#include <algorithm>
#include <initializer_list>
#include <string_view>

#include <fmt/format.h>

#include "common/terminal_escape.h"
#include "recorder/export/exporters.h"

namespace flightrec::recorder::exporter {

const std::vector<std::string>& ExportFormats() {
  static const std::vector<std::string> kFormats = {"pprof", "perfetto", "chrome", "folded",
                                                    "svg",   "perf",     "otlp"};
  return kFormats;
}

StatusOr<std::unique_ptr<Exporter>> MakeExporter(std::string_view format,
                                                 const ExportOptions& opts) {
  if (format == "folded") return MakeFolded();
  if (format == "svg") return MakeFlameGraph(opts.title);
  if (format == "chrome") return MakeChromeTrace();
  if (format == "perfetto") return MakePerfettoTrace();
  if (format == "pprof") return MakePprof();
  if (format == "perf") return MakePerfData();
  if (format == "otlp") return MakeOtlpProfiles();
  std::string valid;
  for (const auto& f : ExportFormats()) valid += (valid.empty() ? "" : ", ") + f;
  return InvalidArgument(fmt::format("unknown export format '{}' (valid: {})", format, valid));
}

namespace {

// A character and the text that stands for it in an escaped string.
struct CharEscape {
  char c;
  std::string_view to;
};

// `s` as the terminal shows it (EscapeForTerminal: invalid UTF-8 as \xNN,
// control characters escaped, so none is left), then each character of
// `table` replaced by its text. Names from a record are bytes, while XML,
// JSON and the viewers of folded stacks need UTF-8; a name then also reads
// the same in every output as in `recorder report`.
std::string EscapeWith(std::string_view s, std::initializer_list<CharEscape> table) {
  std::string out;
  out.reserve(s.size() + 2);
  for (char c : EscapeForTerminal(s)) {
    auto e =
        std::find_if(table.begin(), table.end(), [c](const CharEscape& x) { return x.c == c; });
    if (e != table.end()) {
      out += e->to;
    } else {
      out += c;
    }
  }
  return out;
}

}  // namespace

std::string XmlEscape(std::string_view s) {
  return EscapeWith(
      s, {{'&', "&amp;"}, {'<', "&lt;"}, {'>', "&gt;"}, {'"', "&quot;"}, {'\'', "&apos;"}});
}

std::string JsonEscape(std::string_view s) {
  return EscapeWith(s, {{'"', "\\\""}, {'\\', "\\\\"}});
}

std::string IncompleteStackMarker(const attribution::AttributedSample& s) {
  const std::string& st = s.unwind.status;
  if (st.empty() || st == "ok") return "";
  // No spaces: the folded format would rewrite them.
  if (st == "truncated") return "[truncated]";
  if (st == "missing_file") return "[truncated:missing_file]";
  if (st == "no_unwind_info") return "[truncated:no_unwind_info]";
  return "[truncated:error]";
}

std::string FoldedName(std::string_view s) {
  std::string out = EscapeForTerminal(s);  // as EscapeWith
  for (char& c : out) {
    if (c == ';' || c == ' ') c = '_';  // the folded format's separators
  }
  return out;
}

std::vector<LabelValue> ProcessLabelValues(const analysis::RecordInfo& info, uint32_t pid) {
  std::vector<LabelValue> out;
  auto found = info.labels.find(pid);
  if (found == info.labels.end()) return out;
  const cgroup::CgroupInfo& c = found->second.cgroup;
  for (const auto& [label, value] :
       {std::pair<ProcessLabel, const std::string&>{ProcessLabel::kCgroup, c.path},
        {ProcessLabel::kUnit, c.unit},
        {ProcessLabel::kContainerRuntime, c.container_runtime},
        {ProcessLabel::kContainerId, c.container_id},
        {ProcessLabel::kPodUid, c.pod_uid},
        {ProcessLabel::kPodQos, c.qos}}) {
    if (!value.empty()) out.push_back({label, EscapeForTerminal(value)});
  }
  return out;
}

const char* ProcessLabelKey(ProcessLabel l) {
  switch (l) {
    case ProcessLabel::kCgroup:
      return "cgroup";
    case ProcessLabel::kUnit:
      return "unit";
    case ProcessLabel::kContainerRuntime:
      return "container_runtime";
    case ProcessLabel::kContainerId:
      return "container_id";
    case ProcessLabel::kPodUid:
      return "pod_uid";
    case ProcessLabel::kPodQos:
      return "pod_qos";
  }
  return "";
}

std::vector<FrameSymbols> FramesOf(const analysis::ResolvedSample& rs) {
  const auto& s = *rs.sample;
  std::vector<FrameSymbols> out;
  size_t begin = 0;
  for (size_t i = 0; i < rs.stack.size(); ++i) {
    if (rs.stack[i]->inlined && i + 1 < rs.stack.size()) continue;
    FrameSymbols f;
    f.symbols = rs.stack.subspan(begin, i - begin + 1);
    const size_t frame = out.size();  // each group is one of the sample's frames
    if (frame < s.frames.size()) {
      const auto& sf = s.frames[frame];
      f.kernel = sf.kernel;
      if (!sf.kernel && sf.cookie && rs.cookies) {
        if (const auto* c = rs.cookies->Get(sf.cookie)) f.build_id = &c->build_id;
      }
    }
    out.push_back(f);
    begin = i + 1;
  }
  return out;
}

const std::string* ProcessName(const analysis::ResolvedSample& rs) {
  if (rs.process_comm != nullptr) return rs.process_comm;
  const auto& s = *rs.sample;
  return s.pid == s.tid ? &s.comm : nullptr;
}

}  // namespace flightrec::recorder::exporter
