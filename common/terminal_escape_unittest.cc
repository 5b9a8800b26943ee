#include "common/terminal_escape.h"

#include <gtest/gtest.h>

namespace flightrec {
namespace {

TEST(EscapeForTerminal, PlainTextUnchanged) {
  EXPECT_EQ(EscapeForTerminal("/usr/bin/sleep 10 --x=y"), "/usr/bin/sleep 10 --x=y");
  EXPECT_EQ(EscapeForTerminal(""), "");
  // Valid UTF-8 (Latin, CJK, emoji) is printed as is.
  EXPECT_EQ(EscapeForTerminal("caf\xc3\xa9 \xe6\x97\xa5 \xf0\x9f\x98\x80"),
            "caf\xc3\xa9 \xe6\x97\xa5 \xf0\x9f\x98\x80");
}

TEST(EscapeForTerminal, ControlCharacters) {
  EXPECT_EQ(EscapeForTerminal("a\x1b[2Jb"), "a\\x1b[2Jb");
  EXPECT_EQ(EscapeForTerminal("\x1b]0;owned\x07"), "\\x1b]0;owned\\x07");
  EXPECT_EQ(EscapeForTerminal("l1\nl2\rl3\tx"), "l1\\nl2\\rl3\\tx");
  EXPECT_EQ(EscapeForTerminal(std::string_view("a\0b", 3)), "a\\x00b");
  EXPECT_EQ(EscapeForTerminal("\x7f"), "\\x7f");
  EXPECT_EQ(EscapeForTerminal("\x01\x1f"), "\\x01\\x1f");
  // A backslash is doubled, so "\x1b" typed literally stays distinguishable.
  EXPECT_EQ(EscapeForTerminal("a\\x1b"), "a\\\\x1b");
}

TEST(EscapeForTerminal, C1AndBidiControls) {
  EXPECT_EQ(EscapeForTerminal("\xc2\x9b"
                              "2J"),
            "\\u009b2J");  // CSI as C1
  EXPECT_EQ(EscapeForTerminal("\xc2\x80"), "\\u0080");
  EXPECT_EQ(EscapeForTerminal("a\xe2\x80\xae"
                              "b"),
            "a\\u202eb");  // right-to-left override
  EXPECT_EQ(EscapeForTerminal("\xe2\x81\xa6"), "\\u2066");
  EXPECT_EQ(EscapeForTerminal("\xe2\x80\xa8"), "\\u2028");  // line separator
}

TEST(EscapeForTerminal, InvalidUtf8BytewiseEscaped) {
  EXPECT_EQ(EscapeForTerminal("\x9b"
                              "2J"),
            "\\x9b2J");  // raw C1 byte
  EXPECT_EQ(EscapeForTerminal("\xff\xfe"), "\\xff\\xfe");
  EXPECT_EQ(EscapeForTerminal("\xc0\xaf"), "\\xc0\\xaf");                    // overlong '/'
  EXPECT_EQ(EscapeForTerminal("\xed\xa0\x80"), "\\xed\\xa0\\x80");           // surrogate
  EXPECT_EQ(EscapeForTerminal("\xe6\x97"), "\\xe6\\x97");                    // truncated
  EXPECT_EQ(EscapeForTerminal("\xf4\x90\x80\x80"), "\\xf4\\x90\\x80\\x80");  // > U+10FFFF
  EXPECT_EQ(EscapeForTerminal("\xc3"
                              "\x1b"),
            "\\xc3\\x1b");
}

TEST(EscapeForTerminal, OutputHasNoControlBytes) {
  std::string all;
  for (int c = 0; c < 256; ++c) all += static_cast<char>(c);
  for (int c = 0; c < 256; ++c) all += "\xc2" + std::string(1, static_cast<char>(c));
  for (unsigned char c : EscapeForTerminal(all)) {
    EXPECT_TRUE(c >= 0x20 && c != 0x7f) << static_cast<int>(c);
  }
}

}  // namespace
}  // namespace flightrec
