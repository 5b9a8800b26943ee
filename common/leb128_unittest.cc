#include "common/leb128.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace flightrec {
namespace {

std::vector<uint8_t> U(uint64_t v) {
  std::vector<uint8_t> out;
  AppendUleb128(&out, v);
  return out;
}

std::vector<uint8_t> S(int64_t v) {
  std::vector<uint8_t> out;
  AppendSleb128(&out, v);
  return out;
}

// The examples of DWARF 5, tables 7.7 and 7.8.
TEST(Leb128Test, EncodesTheDwarfSpecExamples) {
  EXPECT_EQ(U(2), (std::vector<uint8_t>{2}));
  EXPECT_EQ(U(127), (std::vector<uint8_t>{127}));
  EXPECT_EQ(U(128), (std::vector<uint8_t>{0x80, 1}));
  EXPECT_EQ(U(129), (std::vector<uint8_t>{0x81, 1}));
  EXPECT_EQ(U(130), (std::vector<uint8_t>{0x82, 1}));
  EXPECT_EQ(U(12857), (std::vector<uint8_t>{0xb9, 100}));
  EXPECT_EQ(S(2), (std::vector<uint8_t>{2}));
  EXPECT_EQ(S(-2), (std::vector<uint8_t>{0x7e}));
  EXPECT_EQ(S(127), (std::vector<uint8_t>{0xff, 0}));
  EXPECT_EQ(S(-127), (std::vector<uint8_t>{0x81, 0x7f}));
  EXPECT_EQ(S(128), (std::vector<uint8_t>{0x80, 1}));
  EXPECT_EQ(S(-128), (std::vector<uint8_t>{0x80, 0x7f}));
  EXPECT_EQ(S(129), (std::vector<uint8_t>{0x81, 1}));
  EXPECT_EQ(S(-129), (std::vector<uint8_t>{0xff, 0x7e}));
  // A std::string (the record codec's and protobuf's buffers) gets the same bytes.
  std::string s;
  AppendUleb128(&s, 12857);
  EXPECT_EQ(s, std::string("\xb9\x64"));
}

// Encodes v, decodes it back with `read`, and checks every byte was used.
template <typename T, typename Encode, typename Decode>
void ExpectRoundTrip(T v, Encode encode, Decode read) {
  std::vector<uint8_t> b = encode(v);
  const uint8_t* p = b.data();
  T got{};
  ASSERT_TRUE(read(&p, b.data() + b.size(), &got)) << v;
  EXPECT_EQ(got, v);
  EXPECT_EQ(p, b.data() + b.size());
}

TEST(Leb128Test, RoundTripsTheExtremes) {
  for (uint64_t v : {uint64_t{0}, uint64_t{1} << 63, ~uint64_t{0}, uint64_t{0x123456789}}) {
    ExpectRoundTrip(v, U, ReadUleb128);
  }
  for (int64_t v : {int64_t{0}, int64_t{-1}, INT64_MIN, INT64_MAX, int64_t{-0x123456789}}) {
    ExpectRoundTrip(v, S, ReadSleb128);
  }
}

TEST(Leb128Test, RefusesTruncatedAndOverlongInput) {
  const uint8_t cut[] = {0x80, 0x80};  // continuation bits to the end
  const uint8_t* p = cut;
  uint64_t u = 0;
  EXPECT_FALSE(ReadUleb128(&p, cut + sizeof(cut), &u));
  p = cut;
  int64_t s = 0;
  EXPECT_FALSE(ReadSleb128(&p, cut + sizeof(cut), &s));
  // Eleven bytes: more than 64 bits.
  std::vector<uint8_t> longer(10, 0xff);
  longer.push_back(0x01);
  p = longer.data();
  EXPECT_FALSE(ReadUleb128(&p, longer.data() + longer.size(), &u));
  p = longer.data();
  EXPECT_FALSE(ReadSleb128(&p, longer.data() + longer.size(), &s));
}

}  // namespace
}  // namespace flightrec
