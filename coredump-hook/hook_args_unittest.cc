// SplitHookArgv and ParseHookArgs: the kernel's values (%e is the crashing
// program's name, chosen by it) are never options of the hook.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "coredump-hook/coredump.h"

namespace flightrec::coredump {
namespace {

HookArgv Split(std::vector<std::string> args) {
  std::vector<const char*> argv = {"recorder-coredump"};
  for (const auto& a : args) argv.push_back(a.c_str());
  return SplitHookArgv(static_cast<int>(argv.size()), argv.data());
}

using V = std::vector<std::string>;

TEST(SplitHookArgv, ValuesAfterTheFirstDoubleDashAreNeverOptions) {
  auto s = Split({"--config", "/etc/x.json", "--", "12", "12", "12", "11", "0", "0", "0", "0", "1",
                  "--store=tmp", "3"});
  EXPECT_EQ(s.options, (V{"--config", "/etc/x.json"}));
  EXPECT_EQ(s.values, (V{"12", "12", "12", "11", "0", "0", "0", "0", "1", "--store=tmp", "3"}));
  // A comm of "--" is a value like any other.
  s = Split({"--", "12", "12", "12", "11", "0", "0", "0", "0", "1", "--", "3"});
  EXPECT_TRUE(s.options.empty());
  ASSERT_EQ(s.values.size(), 11u);
  EXPECT_EQ(s.values[9], "--");
  auto a = ParseHookArgs(s.values);
  ASSERT_TRUE(a.ok()) << a.status().ToString();
  EXPECT_EQ(a->comm, "--");
  EXPECT_EQ(a->pidfd, 3);
}

TEST(SplitHookArgv, APatternWithoutOptionsIsValuesOnly) {
  for (const std::string comm : {"-h", "--help", "--config", "--store=tmp", "--config=/x"}) {
    auto s = Split({"12", "12", "12", "11", "0", "0", "0", "0", "1", comm});
    EXPECT_TRUE(s.options.empty()) << comm;
    ASSERT_EQ(s.values.size(), 10u);
    auto a = ParseHookArgs(s.values);
    ASSERT_TRUE(a.ok()) << a.status().ToString();
    EXPECT_EQ(a->comm, comm);
    EXPECT_EQ(a->pidfd, -1);
  }
}

TEST(SplitHookArgv, ALegacyPatternIsReadByPosition) {
  // A pattern written before "--" was added starts with %P (a number) and is
  // values only, whatever the crashing program is called: a comm of "--"
  // is the 10th value, not the end of options.
  for (const std::string comm : {"--", "-", "--store=tmp"}) {
    SCOPED_TRACE(comm);
    auto s = Split({"12", "12", "12", "11", "0", "0", "0", "0", "1", comm, "3"});
    EXPECT_TRUE(s.options.empty());
    ASSERT_EQ(s.values.size(), 11u);
    auto a = ParseHookArgs(s.values);
    ASSERT_TRUE(a.ok()) << a.status().ToString();
    EXPECT_EQ(a->comm, comm);
    EXPECT_EQ(a->pidfd, 3);
    // Without %F (a kernel before 6.16 drops it).
    s = Split({"12", "12", "12", "11", "0", "0", "0", "0", "1", comm});
    EXPECT_TRUE(s.options.empty());
    a = ParseHookArgs(s.values);
    ASSERT_TRUE(a.ok()) << a.status().ToString();
    EXPECT_EQ(a->comm, comm);
  }
}

TEST(SplitHookArgv, OptionsWithoutDoubleDashHaveNoValues) {
  // A manual run: everything is an option; the values must follow "--".
  auto s = Split({"--store", "/x", "12", "12"});
  EXPECT_EQ(s.options, (V{"--store", "/x", "12", "12"}));
  EXPECT_TRUE(s.values.empty());
  EXPECT_FALSE(ParseHookArgs(s.values).ok());
  EXPECT_TRUE(Split({}).options.empty());
}

TEST(CorePattern, EndsTheOptionsBeforeTheKernelsValues) {
  auto p = CorePattern("/usr/local/bin/recorder-coredump");
  ASSERT_TRUE(p.ok());
  EXPECT_EQ(*p, "|/usr/local/bin/recorder-coredump -- %P %i %I %s %t %c %u %g %d %e %F");
  // The kernel keeps 127 bytes of a pattern: longer ones are refused.
  EXPECT_FALSE(CorePattern("/" + std::string(100, 'x')).ok());
  EXPECT_TRUE(CorePattern("/" + std::string(80, 'x')).ok());
}

}  // namespace
}  // namespace flightrec::coredump
