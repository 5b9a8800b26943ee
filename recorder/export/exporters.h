// The exporter implementations behind MakeExporter (internal to recorder/export).
#pragma once

#include <memory>
#include <string>

#include "recorder/export/export.h"

namespace flightrec::recorder::exporter {

std::unique_ptr<Exporter> MakeFolded();
std::unique_ptr<Exporter> MakeFlameGraph(const std::string& title);
std::unique_ptr<Exporter> MakeChromeTrace();
std::unique_ptr<Exporter> MakePerfettoTrace();
std::unique_ptr<Exporter> MakePprof();
std::unique_ptr<Exporter> MakePerfData();

// Stack names outermost first, as flame graphs and folded lines show them:
// the process name, then each frame (inlined frames marked).
std::vector<std::string> OuterFirstNames(const analysis::ResolvedSample& s);

}  // namespace flightrec::recorder::exporter
