#include "recorder/export/export.h"

#include <fmt/format.h>

#include "recorder/export/exporters.h"

namespace flightrec::recorder::exporter {

const std::vector<std::string>& ExportFormats() {
  static const std::vector<std::string> kFormats = {"pprof",  "perfetto", "chrome",
                                                    "folded", "svg",      "perf"};
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
  std::string valid;
  for (const auto& f : ExportFormats()) valid += (valid.empty() ? "" : ", ") + f;
  return InvalidArgument(fmt::format("unknown export format '{}' (valid: {})", format, valid));
}

std::string XmlEscape(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  for (char c : s) {
    switch (c) {
      case '&':
        out += "&amp;";
        break;
      case '<':
        out += "&lt;";
        break;
      case '>':
        out += "&gt;";
        break;
      case '"':
        out += "&quot;";
        break;
      case '\'':
        out += "&apos;";
        break;
      default:
        // XML 1.0 forbids most control characters even as references.
        if (static_cast<unsigned char>(c) < 0x20 && c != '\t' && c != '\n' && c != '\r') {
          out += '?';
        } else {
          out += c;
        }
    }
  }
  return out;
}

std::string JsonEscape(std::string_view s) {
  std::string out;
  out.reserve(s.size() + 2);
  for (char c : s) {
    switch (c) {
      case '"':
        out += "\\\"";
        break;
      case '\\':
        out += "\\\\";
        break;
      case '\n':
        out += "\\n";
        break;
      case '\t':
        out += "\\t";
        break;
      case '\r':
        out += "\\r";
        break;
      default:
        if (static_cast<unsigned char>(c) < 0x20) {
          out += fmt::format("\\u{:04x}", static_cast<unsigned>(c));
        } else {
          out += c;
        }
    }
  }
  return out;
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
  std::string out(s);
  for (char& c : out) {
    if (c == ';' || c == ' ' || c == '\n') c = '_';  // the folded format's separators
  }
  return out;
}

}  // namespace flightrec::recorder::exporter
