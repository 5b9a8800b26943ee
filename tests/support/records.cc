#include "tests/support/records.h"

#include <xxhash.h>

#include <cstring>

#include "store/record_file.h"

namespace flightrec::store::testing {

StoreOptions TestOptions() {
  StoreOptions o;
  // Tests control retention explicitly; the filesystem-derived defaults would
  // depend on the machine.
  o.apply_retention_on_commit = false;
  o.writer.workers = 0;
  return o;
}

StatusOr<RecordRow> WriteSmallRecord(Store& s, const std::string& payload, nlohmann::json meta) {
  ASSIGN_OR_RETURN(auto rec, s.BeginRecord("dump"));
  RETURN_IF_ERROR(rec->writer().AddSection("events", payload));
  RETURN_IF_ERROR(rec->writer().AddSection("config", "{\"x\":1}"));
  return s.Commit(std::move(rec), meta);
}

std::string CraftRecord(const std::string& header_json, const std::string& toc_json,
                        const std::string& body, uint32_t header_len) {
  char prefix[kPrefixSize] = {};
  std::memcpy(prefix, kFileMagic, 8);
  uint16_t major = kFormatMajor, minor = kFormatMinor;
  uint32_t hlen = header_len ? header_len : static_cast<uint32_t>(header_json.size());
  std::memcpy(prefix + 8, &major, 2);
  std::memcpy(prefix + 10, &minor, 2);
  std::memcpy(prefix + 12, &hlen, 4);
  uint64_t hh = HeaderChecksum(prefix, header_json);
  std::memcpy(prefix + 16, &hh, 8);
  std::string out(prefix, sizeof(prefix));
  out += header_json;
  out += body;
  uint64_t toc_off = out.size(), toc_len = toc_json.size();
  uint64_t th = XXH3_64bits(toc_json.data(), toc_json.size());
  out += toc_json;
  char trailer[kTrailerSize] = {};
  std::memcpy(trailer, kTrailerMagic, 8);
  std::memcpy(trailer + 8, &toc_off, 8);
  std::memcpy(trailer + 16, &toc_len, 8);
  std::memcpy(trailer + 24, &th, 8);
  out.append(trailer, sizeof(trailer));
  return out;
}

std::string Nested(size_t depth, const std::string& inner) {
  return std::string(depth, '[') + inner + std::string(depth, ']');
}

std::string GoodHeader(const std::string& id) {
  return nlohmann::json{{"id", id}, {"kind", "crash"}, {"created_ns", 1}}.dump();
}

std::vector<std::pair<std::string, std::string>> HostileRecords() {
  std::vector<std::pair<std::string, std::string>> v;
  const std::string toc_ok = R"({"sections":[],"meta":{}})";
  v.push_back(
      {"20200101T000000Z-000001.frec",
       CraftRecord(R"({"id":)" + Nested(200000) + R"(,"kind":"crash","created_ns":1})", toc_ok)});
  v.push_back({"20200101T000000Z-000002.frec",
               CraftRecord(GoodHeader("20200101T000000Z-000002"),
                           R"({"sections":[],"meta":{"crash":)" + Nested(500000) + "}}")});
  v.push_back({"20200101T000000Z-000003.frec",
               CraftRecord(R"({"id":5,"kind":{},"created_ns":"x","host":[1]})", toc_ok)});
  v.push_back({"20200101T000000Z-000004.frec", CraftRecord("[1,2,3]", toc_ok)});
  v.push_back({"20200101T000000Z-000005.frec",
               CraftRecord(GoodHeader("20200101T000000Z-000005"), R"({"sections":{"a":1}})")});
  v.push_back({"20200101T000000Z-000006.frec",
               CraftRecord(GoodHeader("20200101T000000Z-000006"),
                           R"({"sections":[{"name":5,"offset":"x","stored_size":-1,)"
                           R"("raw_size":1.5,"xxh3":12,"frames":"x"}]})")});
  v.push_back({"20200101T000000Z-000007.frec",
               CraftRecord(GoodHeader("20200101T000000Z-000007"),
                           R"({"sections":[{"name":"a","offset":32,"stored_size":0,)"
                           R"("raw_size":0,"xxh3":"zz","frames":[["a"]]}]})")});
  v.push_back({"20200101T000000Z-000008.frec", CraftRecord(GoodHeader("20200101T000000Z-000008"),
                                                           R"({"sections":[],"meta":[1]})")});
  v.push_back({"20200101T000000Z-000009.frec", CraftRecord("not json at all", toc_ok)});
  // Huge declared sizes: a header length past the file, a section extent and
  // raw size of 2^63.
  v.push_back({"20200101T000000Z-00000a.frec",
               CraftRecord(GoodHeader("20200101T000000Z-00000a"), toc_ok, "", 0xffffffffu)});
  v.push_back(
      {"20200101T000000Z-00000b.frec",
       CraftRecord(GoodHeader("20200101T000000Z-00000b"),
                   R"({"sections":[{"name":"a","offset":40,"stored_size":9223372036854775808,)"
                   R"("raw_size":9223372036854775808,"xxh3":"0","frames":[]}],"meta":{}})")});
  // Two million values in 4 MiB (well under the TOC's 64 MiB): ~100 MB parsed.
  std::string many = "[0";
  for (int i = 0; i < 2000000; ++i) many += ",0";
  many += "]";
  v.push_back({"20200101T000000Z-00000e.frec",
               CraftRecord(GoodHeader("20200101T000000Z-00000e"),
                           R"({"sections":[],"meta":{"x":)" + many + "}}")});
  // Valid, but claiming another record's id (the index is keyed by it).
  v.push_back(
      {"20200101T000000Z-00000d.frec", CraftRecord(GoodHeader("20200101T000000Z-000001"), toc_ok)});
  // Truncated: a complete-looking record cut in half.
  std::string whole = CraftRecord(GoodHeader("20200101T000000Z-00000c"), toc_ok);
  v.push_back({"20200101T000000Z-00000c.frec", whole.substr(0, whole.size() / 2)});
  return v;
}

}  // namespace flightrec::store::testing
