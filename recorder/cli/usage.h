// How `recorder` answers a command line it cannot parse. Like most Unix
// tools: one line saying what is wrong, one pointing to --help, exit status 2
// (CLI11's own codes, 100 and up, read to scripts as "the command failed").
// A word that is no command is matched against the commands there are, so
// that a typo gets the command meant.
#pragma once

#include <CLI/CLI.hpp>

#include <string>
#include <string_view>
#include <vector>

namespace flightrec::recorder::cli {

// The exit status of a command line that does not parse (and of a request
// that is malformed, kInvalidArgument).
inline constexpr int kExitUsage = 2;

// Edits (insert, delete, replace a character, swap two adjacent ones: the
// slips of a hurried hand) from a to b: the optimal string alignment
// distance.
size_t EditDistance(std::string_view a, std::string_view b);

// The verb `typed` most likely meant (compared in lower case): the closest
// one, the first listed on a tie, when it is at most a third of typed's
// length away (at least 1 edit, at most 2); farther, a suggestion would be a
// guess. "" when none is that close.
std::string ClosestVerb(std::string_view typed, const std::vector<std::string>& verbs);

// "unknown command 'reprot'; did you mean 'report'?", or the list of verbs
// when none is close.
std::string UnknownCommandMessage(std::string_view typed, const std::vector<std::string>& verbs);

// Answers `e`, thrown by app.parse(): help (--help, --help-all) is printed as
// CLI11 does and returns 0; anything else prints the two lines on stderr and
// returns kExitUsage.
int ExitOnParseError(CLI::App& app, const CLI::ParseError& e);

}  // namespace flightrec::recorder::cli
