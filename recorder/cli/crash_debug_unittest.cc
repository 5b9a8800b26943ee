#include <algorithm>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "recorder/cli/crash_internal.h"

namespace flightrec::recorder::cli {
namespace {

// A record's exe is its crashed user's text. Anything that is not an absolute
// path is left out of gdb's argv, whatever it looks like.
TEST(GdbArgvTest, ARecordedExecutableThatIsNotAnAbsolutePathIsNeverGiven) {
  for (const std::string exe :
       {"-ex=!id>pwned", "--batch", "-", "--", "-x/tmp/cmds", "relative/prog", "prog", ""}) {
    SCOPED_TRACE(exe);
    auto argv = GdbArgv({"-batch", "-ex", "bt"}, "/var/tmp/flightrec-debug-x/core", exe);
    EXPECT_EQ(argv, (std::vector<std::string>{"gdb", "-batch", "-ex", "bt",
                                              "--core=/var/tmp/flightrec-debug-x/core", "--"}));
  }
}

// An absolute path comes after `--`, where gdb reads no option; the core is
// given by option, never by its position.
TEST(GdbArgvTest, AnAbsoluteExecutableComesAfterTheEndOfOptions) {
  const std::string exe = "/home/u/-ex=!id>pwned";
  auto argv = GdbArgv({"-nx"}, "/tmp/d/core", exe);
  EXPECT_EQ(argv, (std::vector<std::string>{"gdb", "-nx", "--core=/tmp/d/core", "--", exe}));
  auto dashes = std::find(argv.begin(), argv.end(), "--");
  ASSERT_NE(dashes, argv.end());
  EXPECT_EQ(std::find(argv.begin(), dashes, exe), dashes);
}

}  // namespace
}  // namespace flightrec::recorder::cli
