// The exporter implementations behind MakeExporter (internal to recorder/export).
#pragma once

#include <memory>
#include <span>
#include <string>
#include <vector>

#include "recorder/export/export.h"

namespace flightrec::recorder::exporter {

std::unique_ptr<Exporter> MakeFolded();
std::unique_ptr<Exporter> MakeFlameGraph(const std::string& title);
std::unique_ptr<Exporter> MakeChromeTrace();
std::unique_ptr<Exporter> MakePerfettoTrace();
std::unique_ptr<Exporter> MakePprof();
std::unique_ptr<Exporter> MakePerfData();
std::unique_ptr<Exporter> MakeOtlpProfiles();

// Stack names outermost first, as flame graphs and folded lines show them:
// the process name, then each frame (inlined frames marked).
std::vector<std::string> OuterFirstNames(const analysis::ResolvedSample& s);

// One recorded frame as the profile formats (pprof, OTLP) write it: the
// symbols of its inline chain, innermost first and the function they were
// inlined into last, and its file's build-id (hex; null when unknown).
struct FrameSymbols {
  std::span<const attribution::Symbol* const> symbols;
  const std::string* build_id = nullptr;
  bool kernel = false;
};
// The sample's frames, innermost first.
std::vector<FrameSymbols> FramesOf(const analysis::ResolvedSample& rs);

}  // namespace flightrec::recorder::exporter
