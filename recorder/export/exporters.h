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

// Where a process ran, as every export labels it: the labels of a record's
// meta.processes entry that are known, in this order, each named by the
// format's own convention (pprof label keys, OpenTelemetry attributes,
// Perfetto's "key=value" process labels).
enum class ProcessLabel { kCgroup, kUnit, kContainerRuntime, kContainerId, kPodUid, kPodQos };
struct LabelValue {
  ProcessLabel label;
  std::string value;  // escaped as every exported name (the record's meta is anyone's text)
};
std::vector<LabelValue> ProcessLabelValues(const analysis::RecordInfo& info, uint32_t pid);
// The label's key as pprof labels and Perfetto's process labels spell it
// ("unit", "container_id", ...).
const char* ProcessLabelKey(ProcessLabel l);

}  // namespace flightrec::recorder::exporter
