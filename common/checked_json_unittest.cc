#include "common/checked_json.h"

#include <gtest/gtest.h>

namespace flightrec::json {
namespace {

TEST(CheckedJson, WrongTypesGiveTheDefault) {
  Json j = Json::parse(R"({"s": 5, "n": "x", "neg": -1, "big": 5000000000, "b": 1, "o": [1]})");
  EXPECT_EQ(Str(j, "s", "d"), "d");
  EXPECT_EQ(Get<int64_t>(j, "n", 7), 7);
  EXPECT_EQ(Get<uint32_t>(j, "neg", 7u), 7u);
  EXPECT_EQ(Get<int32_t>(j, "big", 7), 7);
  EXPECT_EQ(Get<int64_t>(j, "big", 7), 5000000000);
  EXPECT_EQ(Get<bool>(j, "b", false), false);
  EXPECT_TRUE(Object(j, "o").is_object());
  EXPECT_TRUE(Array(j, "missing").is_array());
  // Not an object at all.
  for (const Json& k : {Json::array({1}), Json(3), Json(), Json(Json::value_t::discarded)}) {
    EXPECT_EQ(Str(k, "a", "d"), "d");
    EXPECT_TRUE(Field(k, "a").is_null());
  }
}

TEST(CheckedJson, RightTypesAreRead) {
  Json j = Json::parse(R"({"s": "v", "n": -3, "u": 3, "d": 1.5, "b": true})");
  EXPECT_EQ(Str(j, "s"), "v");
  EXPECT_EQ(Get<int>(j, "n", 0), -3);
  EXPECT_EQ(Get<uint64_t>(j, "u", 0), 3u);
  EXPECT_EQ(Get<double>(j, "d", 0), 1.5);
  EXPECT_EQ(Get<bool>(j, "b", false), true);
}

TEST(CheckedJson, ParseBoundedRefusesDeepNesting) {
  EXPECT_TRUE(ParseBounded(std::string(100000, '[')).is_discarded());
  EXPECT_TRUE(ParseBounded(std::string(65, '[') + std::string(65, ']')).is_discarded());
  EXPECT_FALSE(ParseBounded(std::string(64, '[') + std::string(64, ']')).is_discarded());
  // Brackets inside strings do not count.
  EXPECT_FALSE(ParseBounded("[\"" + std::string(100, '[') + "\\\"\"]").is_discarded());
  EXPECT_TRUE(ParseBounded("{nope").is_discarded());
}

TEST(CheckedJson, DumpReplacesInvalidUtf8) {
  Json j = {{"comm", std::string("a\xff"
                                 "b")}};
  EXPECT_THROW((void)j.dump(), Json::type_error);
  EXPECT_EQ(Dump(j),
            "{\"comm\":\"a\xef\xbf\xbd"
            "b\"}");
}

TEST(SetText, TextThatIsNotUtf8IsKeptExactlyAndDumpsWithoutThrowing) {
  Json j = Json::object();
  SetText(j, "comm", "ok");
  SetText(j, "exe", std::string("/d\xff\x80/\xff\xfe\x80x"));
  EXPECT_EQ(j["comm"], "ok");
  EXPECT_FALSE(j.contains("comm_hex"));  // valid UTF-8 is stored as is, alone
  EXPECT_EQ(j["exe"], "/d\xef\xbf\xbd\xef\xbf\xbd/\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbdx");
  EXPECT_EQ(j["exe_hex"], "2f64ff802ffffe8078");
  EXPECT_EQ(RawText(j, "exe"), std::string("/d\xff\x80/\xff\xfe\x80x"));
  EXPECT_EQ(RawText(j, "comm"), "ok");
  EXPECT_NO_THROW((void)j.dump());
  // A damaged _hex falls back to the readable field.
  j["exe_hex"] = "zz";
  EXPECT_EQ(RawText(j, "exe"), Str(j, "exe"));
}

TEST(SetText, Utf8Checks) {
  EXPECT_TRUE(IsValidUtf8("caf\xc3\xa9 \xf0\x9f\x98\x80"));
  EXPECT_FALSE(IsValidUtf8("\xc0\xaf"));      // overlong
  EXPECT_FALSE(IsValidUtf8("\xed\xa0\x80"));  // surrogate
  EXPECT_FALSE(IsValidUtf8("\xe6\x97"));      // truncated
  EXPECT_EQ(ToValidUtf8("a\xc0z"), "a\xef\xbf\xbdz");
  EXPECT_EQ(ToHex(std::string("\x00\xff", 2)), "00ff");
  std::string out;
  EXPECT_TRUE(FromHex("00fF", &out));
  EXPECT_EQ(out, std::string("\x00\xff", 2));
  EXPECT_FALSE(FromHex("0", &out));
  EXPECT_FALSE(FromHex("0g", &out));
}

}  // namespace
}  // namespace flightrec::json
