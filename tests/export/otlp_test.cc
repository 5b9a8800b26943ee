// The OTLP profiles export of a real record, decoded by protoc with the
// published schema the exporter follows (third_party/opentelemetry-proto),
// as the signal's ProfilesData and as the collector's
// ExportProfilesServiceRequest, and checked against report and script:
//   - protoc knows every field written and reads every string as UTF-8;
//   - each dictionary table starts with its zero value, strings are unique;
//   - one resource, scope and profile, whose sample and period types name
//     the record's event;
//   - each recorded sample is one observation (timestamp, value) of one
//     Sample: the count is report's, each function's self count is report's,
//     the shares by value agree within a point, and (wall time, cpu, pid,
//     tid, comm, period, stack) equal script's sample by sample;
//   - stacks resolve to function names (spin_a called from main), samples
//     carry their pid, tid, thread name, CPU and executable as attributes,
//     and fr_spin's mapping carries its file's GNU build-id.
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <map>
#include <set>
#include <sstream>
#include <tuple>

#include <nlohmann/json.hpp>

#include "tests/support/protoc.h"
#include "tests/support/recording.h"

namespace flightrec::testing {
namespace {

constexpr const char* kProfilesProto = "opentelemetry/proto/profiles/v1development/profiles.proto";
constexpr const char* kServiceProto =
    "opentelemetry/proto/collector/profiles/v1development/profiles_service.proto";

// A string-table (or any) index field: absent means 0 in proto3.
uint64_t Index(const Node& n, const std::string& field) {
  const Node* f = n.Name(field);
  return f ? f->U() : 0;
}

// The decoded file with its dictionary's tables.
struct Decoded {
  Node root;
  std::vector<std::string> strings;
  std::vector<const Node*> mappings, locations, functions, attributes, stacks, links;

  const std::string& Str(uint64_t i) const { return strings.at(i); }
  // The attributes a Sample, Mapping or Location refers to, as text.
  std::map<std::string, std::string> Attributes(const Node& holder) const {
    std::map<std::string, std::string> out;
    for (const Node* i : holder.Named("attribute_indices")) {
      const Node& kv = *attributes.at(i->U());
      const std::string& key = Str(Index(kv, "key_strindex"));
      const Node* v = kv.Name("value");
      EXPECT_TRUE(v) << key;
      if (!v) continue;
      const Node* s = v->Name("string_value");
      const Node* n = v->Name("int_value");
      EXPECT_TRUE(s || n) << key;
      EXPECT_FALSE(out.count(key)) << "attribute " << key << " twice";
      out[key] = s ? s->text : n ? n->text : "";
    }
    return out;
  }
  // A stack's function names, leaf first (inlined functions before the
  // function they are in, as script lists them).
  std::vector<std::string> Names(uint64_t stack_index) const {
    std::vector<std::string> out;
    for (const Node* l : stacks.at(stack_index)->Named("location_indices")) {
      for (const Node* line : locations.at(l->U())->Named("lines")) {
        out.push_back(Str(Index(*functions.at(Index(*line, "function_index")), "name_strindex")));
      }
    }
    return out;
  }
};

bool EndsWith(const std::string& s, const std::string& tail) {
  return s.size() >= tail.size() && s.compare(s.size() - tail.size(), tail.size(), tail) == 0;
}

// Whether protoc printed a field by number: one the schema does not have.
bool HasUnknownField(const Node& n) {
  if (n.number) return true;
  return std::any_of(n.fields.begin(), n.fields.end(), HasUnknownField);
}

class OtlpExportTest : public RecordedSuite<OtlpExportTest> {
 protected:
  static void SetUpTestSuite() { Record({BuildPath("tests/programs/fr_spin"), "2"}); }

  // Exports the record, decodes it both ways; the tables into *d.
  static void ExportAndDecode(Decoded* d) {
    const std::string file = Out("profile.otlp");
    auto r = daemon_->Cli({"export", id_, "-f", "otlp", "-o", file});
    ASSERT_EQ(r.exit_code, 0) << r.err;
    const std::string protos = SourcePath("third_party/opentelemetry-proto");
    auto data = ProtocDecodeWith(protos, kProfilesProto,
                                 "opentelemetry.proto.profiles.v1development.ProfilesData", file);
    ASSERT_EQ(data.exit_code, 0) << data.err;
    EXPECT_EQ(data.err, "");  // where protoc complains of bad UTF-8 or wire types
    auto request = ProtocDecodeWith(
        protos, kServiceProto,
        "opentelemetry.proto.collector.profiles.v1development.ExportProfilesServiceRequest", file);
    ASSERT_EQ(request.exit_code, 0) << request.err;
    EXPECT_EQ(request.out, data.out) << "not the same message to an OTLP receiver";
    if (const char* keep = std::getenv("FLIGHTREC_KEEP_DECODED")) std::ofstream(keep) << data.out;
    d->root = ParseText(data.out);
    ASSERT_FALSE(HasUnknownField(d->root)) << data.out.substr(0, 2000);
    const Node* dict = d->root.Name("dictionary");
    ASSERT_TRUE(dict);
    for (const Node* s : dict->Named("string_table")) d->strings.push_back(s->text);
    d->mappings = dict->Named("mapping_table");
    d->locations = dict->Named("location_table");
    d->functions = dict->Named("function_table");
    d->attributes = dict->Named("attribute_table");
    d->stacks = dict->Named("stack_table");
    d->links = dict->Named("link_table");
  }
};

// An observation as both sides describe it: wall time, cpu, pid, tid, comm,
// period, stack (leaf first).
using Observation = std::tuple<uint64_t, uint32_t, uint32_t, uint32_t, std::string, uint64_t,
                               std::vector<std::string>>;

// script --json's samples as observations.
std::multiset<Observation> Scripted(const std::string& script) {
  std::multiset<Observation> out;
  std::istringstream in(script);
  std::string line;
  while (std::getline(in, line)) {
    auto j = nlohmann::json::parse(line);
    std::vector<std::string> stack;
    for (const auto& f : j["frames"]) {
      std::string fn = f["function"];
      if (fn.empty()) {  // as Symbol::Display names it
        char off[32];
        std::snprintf(off, sizeof(off), "+0x%llx",
                      static_cast<unsigned long long>(f["offset"].get<uint64_t>()));
        fn = f["dso"].get<std::string>() + off;
      }
      stack.push_back(fn);
    }
    if (j.contains("unwind") && j["unwind"]["status"] != "ok") {
      std::string st = j["unwind"]["status"];
      stack.push_back(st == "truncated" ? "[truncated]" : "[truncated:" + st + "]");
    }
    out.emplace(j["wall_ns"].get<uint64_t>(), j["cpu"].get<uint32_t>(), j["pid"].get<uint32_t>(),
                j["tid"].get<uint32_t>(), j["comm"].get<std::string>(), j["period"].get<uint64_t>(),
                stack);
  }
  return out;
}

TEST_F(OtlpExportTest, ProtocReadsTheSamplesStacksAndAttributesReportShows) {
  Decoded d;
  ASSERT_NO_FATAL_FAILURE(ExportAndDecode(&d));

  // Entry 0 of every table is its zero value; no string twice.
  ASSERT_FALSE(d.strings.empty());
  EXPECT_EQ(d.strings[0], "");
  EXPECT_EQ(std::set<std::string>(d.strings.begin(), d.strings.end()).size(), d.strings.size());
  for (const auto* table : {&d.mappings, &d.locations, &d.functions, &d.attributes, &d.stacks}) {
    ASSERT_FALSE(table->empty());
    EXPECT_TRUE((*table)[0]->fields.empty());
  }
  ASSERT_EQ(d.links.size(), 1u);
  EXPECT_EQ(d.links[0]->Name("trace_id")->text, std::string(16, '\0'));
  EXPECT_EQ(d.links[0]->Name("span_id")->text, std::string(8, '\0'));

  auto rps = d.root.Named("resource_profiles");
  ASSERT_EQ(rps.size(), 1u);
  auto sps = rps[0]->Named("scope_profiles");
  ASSERT_EQ(sps.size(), 1u);
  ASSERT_TRUE(sps[0]->Name("scope"));
  EXPECT_EQ(sps[0]->Name("scope")->Name("name")->text, "flightrec");
  auto profiles = sps[0]->Named("profiles");
  ASSERT_EQ(profiles.size(), 1u);
  const Node& profile = *profiles[0];
  const Node* st = profile.Name("sample_type");
  const Node* pt = profile.Name("period_type");
  ASSERT_TRUE(st && pt);
  const std::string type = d.Str(Index(*st, "type_strindex"));
  EXPECT_EQ(type, d.Str(Index(*pt, "type_strindex")));
  EXPECT_EQ(d.Str(Index(*st, "unit_strindex")), d.Str(Index(*pt, "unit_strindex")));
  EXPECT_EQ(type, "cpu");  // recorderd's default event is a CPU clock
  EXPECT_EQ(d.Str(Index(*st, "unit_strindex")), "nanoseconds");
  EXPECT_GT(Index(profile, "period"), 0u);
  const uint64_t start = Index(profile, "time_unix_nano");
  const uint64_t end = start + Index(profile, "duration_nano");
  ASSERT_GT(start, 0u);

  std::multiset<Observation> exported;
  std::map<std::string, uint64_t> self_count, self_value;
  uint64_t total_value = 0, spin_a = 0;
  std::set<std::pair<uint64_t, std::vector<uint64_t>>> identities;
  for (const Node* s : profile.Named("samples")) {
    const uint64_t stack = Index(*s, "stack_index");
    ASSERT_LT(stack, d.stacks.size());
    std::vector<uint64_t> attr_ids;
    for (const Node* a : s->Named("attribute_indices")) attr_ids.push_back(a->U());
    std::sort(attr_ids.begin(), attr_ids.end());
    EXPECT_TRUE(identities.emplace(stack, attr_ids).second) << "two Samples of one identity";
    auto values = s->Named("values");
    auto times = s->Named("timestamps_unix_nano");
    ASSERT_EQ(values.size(), times.size());
    ASSERT_FALSE(times.empty());
    const auto names = d.Names(stack);
    const std::string leaf = names.empty() ? "[no frames]" : names[0];
    const auto attrs = d.Attributes(*s);
    for (const char* key : {"process.pid", "thread.id", "thread.name", "cpu.logical_number"}) {
      ASSERT_TRUE(attrs.count(key)) << key << " missing from a sample";
    }
    for (size_t i = 0; i < times.size(); ++i) {
      const uint64_t t = times[i]->U(), v = values[i]->U();
      EXPECT_GE(t, start);
      EXPECT_LE(t, end);
      ++self_count[leaf];
      self_value[leaf] += v;
      total_value += v;
      exported.emplace(t, std::stoul(attrs.at("cpu.logical_number")),
                       std::stoul(attrs.at("process.pid")), std::stoul(attrs.at("thread.id")),
                       attrs.at("thread.name"), v, names);
    }
    if (leaf != "spin_a") continue;
    spin_a += times.size();
    // main <- ... <- spin_a, in fr_spin's process, thread and executable.
    EXPECT_NE(std::find(names.begin() + 1, names.end(), "main"), names.end());
    EXPECT_EQ(attrs.at("process.pid"), std::to_string(pid_));
    EXPECT_EQ(attrs.at("thread.id"), std::to_string(pid_));
    EXPECT_EQ(attrs.at("thread.name"), "fr_spin");
    EXPECT_EQ(attrs.count("process.executable.name") ? attrs.at("process.executable.name") : "",
              "fr_spin");
    EXPECT_TRUE(
        EndsWith(attrs.count("process.executable.path") ? attrs.at("process.executable.path") : "",
                 "/tests/programs/fr_spin"));
  }

  // The same samples as report: the count, each function's self count, and
  // the shares by value (CPU time) within a point.
  auto rep = daemon_->Cli({"report", id_, "--json", "--limit", "0"});
  ASSERT_EQ(rep.exit_code, 0) << rep.err;
  const auto report = nlohmann::json::parse(rep.out);
  const uint64_t report_samples = report["samples"].get<uint64_t>();
  EXPECT_EQ(exported.size(), report_samples);
  ASSERT_GT(report_samples, 50u);
  EXPECT_EQ(self_count, SelfByKey(rep.out));
  const auto& rows = report["rows"];
  ASSERT_GE(rows.size(), 2u);
  EXPECT_EQ(rows[0]["key"], "spin_a");
  for (size_t i = 0; i < 2; ++i) {
    const std::string key = rows[i]["key"];
    EXPECT_NEAR(100.0 * self_value[key] / total_value, rows[i]["self_pct"].get<double>(), 1.0)
        << key;
  }
  EXPECT_GT(spin_a, 10u);

  // Sample by sample, as script has them.
  auto script = daemon_->Cli({"script", id_, "--json"});
  ASSERT_EQ(script.exit_code, 0) << script.err;
  const auto scripted = Scripted(script.out);
  EXPECT_EQ(scripted.size(), report_samples);
  EXPECT_TRUE(scripted == exported) << "the export's observations differ from script's";
}

TEST_F(OtlpExportTest, LocationsNameTheirFileWithItsBuildId) {
  Decoded d;
  ASSERT_NO_FATAL_FAILURE(ExportAndDecode(&d));
  auto note = RunCommand({"/usr/bin/readelf", "-n", BuildPath("tests/programs/fr_spin")});
  size_t at = note.out.find("Build ID: ");
  ASSERT_NE(at, std::string::npos) << note.out;
  const std::string build_id = note.out.substr(at + 10, note.out.find('\n', at) - at - 10);
  size_t spin_locations = 0;
  for (size_t i = 1; i < d.locations.size(); ++i) {
    const Node& loc = *d.locations[i];
    auto lines = loc.Named("lines");
    ASSERT_FALSE(lines.empty()) << "location " << i << " names no function";
    const std::string fn =
        d.Str(Index(*d.functions.at(Index(*lines.back(), "function_index")), "name_strindex"));
    const uint64_t m = Index(loc, "mapping_index");
    ASSERT_LT(m, d.mappings.size());
    if (fn.rfind("[truncated", 0) == 0) {
      EXPECT_EQ(m, 0u) << "a marker frame in a file";
      continue;
    }
    ASSERT_GT(m, 0u) << fn << " in no mapping";
    const auto type = d.Attributes(loc);
    ASSERT_TRUE(type.count("profile.frame.type")) << fn;
    EXPECT_TRUE(type.at("profile.frame.type") == "native" ||
                type.at("profile.frame.type") == "kernel");
    if (fn != "spin_a") continue;
    ++spin_locations;
    EXPECT_EQ(type.at("profile.frame.type"), "native");
    const Node& map = *d.mappings[m];
    EXPECT_TRUE(EndsWith(d.Str(Index(map, "filename_strindex")), "/tests/programs/fr_spin"))
        << d.Str(Index(map, "filename_strindex"));
    const auto attrs = d.Attributes(map);
    EXPECT_EQ(attrs.count("process.executable.build_id.gnu")
                  ? attrs.at("process.executable.build_id.gnu")
                  : "",
              build_id);
    // The address is the file offset, within the mapping's range.
    const uint64_t address = Index(loc, "address");
    EXPECT_GE(address, Index(map, "memory_start"));
    EXPECT_LT(address, Index(map, "memory_limit"));
  }
  EXPECT_GT(spin_locations, 0u);
  // The host the record was made on names the resource.
  const Node* resource = d.root.Named("resource_profiles")[0]->Name("resource");
  ASSERT_TRUE(resource);
  std::map<std::string, std::string> rattrs;
  for (const Node* kv : resource->Named("attributes")) {
    rattrs[kv->Name("key")->text] = kv->Name("value")->Name("string_value")->text;
  }
  char host[256] = {};
  gethostname(host, sizeof(host) - 1);
  EXPECT_EQ(rattrs["host.name"], host);
  EXPECT_EQ(rattrs["os.type"], "linux");
}

}  // namespace
}  // namespace flightrec::testing
