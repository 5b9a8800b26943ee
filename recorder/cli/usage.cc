#include "recorder/cli/usage.h"

#include <algorithm>
#include <cctype>
#include <cstdio>

#include "common/terminal_escape.h"

namespace flightrec::recorder::cli {

size_t EditDistance(std::string_view a, std::string_view b) {
  // d[i][j]: edits from a's first i characters to b's first j (three rows
  // kept: a swap looks two back).
  std::vector<size_t> back2(b.size() + 1), back1(b.size() + 1), row(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j) back1[j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    row[0] = i;
    for (size_t j = 1; j <= b.size(); ++j) {
      const size_t replace = back1[j - 1] + (a[i - 1] == b[j - 1] ? 0 : 1);
      row[j] = std::min({back1[j] + 1, row[j - 1] + 1, replace});
      if (i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1])
        row[j] = std::min(row[j], back2[j - 2] + 1);
    }
    std::swap(back2, back1);
    std::swap(back1, row);
  }
  return back1[b.size()];
}

std::string ClosestVerb(std::string_view typed, const std::vector<std::string>& verbs) {
  if (typed.empty()) return "";
  std::string lower(typed);
  for (char& c : lower) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  const size_t limit = std::clamp<size_t>(lower.size() / 3, 1, 2);
  std::string best;
  size_t best_distance = limit + 1;
  for (const auto& verb : verbs) {
    const size_t d = EditDistance(lower, verb);
    if (d < best_distance) {
      best = verb;
      best_distance = d;
    }
  }
  return best;
}

namespace {

std::string VerbList(const std::vector<std::string>& verbs) {
  std::string list = "commands:";
  for (size_t i = 0; i < verbs.size(); ++i) list += (i ? ", " : " ") + verbs[i];
  return list;
}

}  // namespace

std::string UnknownCommandMessage(std::string_view typed, const std::vector<std::string>& verbs) {
  std::string message = "unknown command '" + std::string(typed) + "'; ";
  if (auto verb = ClosestVerb(typed, verbs); !verb.empty())
    return message + "did you mean '" + verb + "'?";
  return message + VerbList(verbs);
}

namespace {

// The command the parse got to ("recorder crash"), and the message for `e`
// there: CLI11's own, or, where a command must follow, which one was meant.
std::pair<std::string, std::string> Diagnose(CLI::App& app, const CLI::ParseError& e) {
  CLI::App* at = &app;
  std::string path = "recorder";
  while (!at->get_subcommands().empty()) {
    at = at->get_subcommands().front();
    path += " " + at->get_name();
  }
  std::string message = e.what();
  // "Could not convert: ..." reads as "could not convert: ..." after
  // "recorder: ", as other tools' messages do; "ID is required" stays.
  if (message.size() > 1 && std::isupper(static_cast<unsigned char>(message[0])) &&
      !std::isupper(static_cast<unsigned char>(message[1])))
    message[0] = static_cast<char>(std::tolower(static_cast<unsigned char>(message[0])));
  if (at->get_require_subcommand_min() == 0) return {path, message};
  // What CLI11 reports here is "A subcommand is required" whatever was typed.
  std::vector<std::string> verbs;
  for (const CLI::App* sub : at->get_subcommands([](CLI::App*) { return true; }))
    verbs.push_back(sub->get_name());
  std::sort(verbs.begin(), verbs.end());
  // A word no command knows passes up to the parents (fallthrough).
  std::vector<std::string> rest;
  for (const CLI::App* a = at; a != nullptr; a = a->get_parent()) {
    for (const auto& w : a->remaining()) rest.push_back(w);
  }
  const auto word = std::find_if(rest.begin(), rest.end(),
                                 [](const std::string& w) { return w.rfind('-', 0) != 0; });
  if (word != rest.end()) return {path, UnknownCommandMessage(*word, verbs)};
  if (!rest.empty()) return {path, "unknown option '" + rest.front() + "'"};
  return {path, "no command given; " + VerbList(verbs)};
}

}  // namespace

int ExitOnParseError(CLI::App& app, const CLI::ParseError& e) {
  if (e.get_exit_code() == 0) return app.exit(e);  // --help, --help-all
  auto [path, message] = Diagnose(app, e);
  // The message quotes what was typed: escaped like everything printed.
  std::fprintf(stderr, "recorder: %s\nTry '%s --help' for more information.\n",
               EscapeForTerminal(message).c_str(), path.c_str());
  return kExitUsage;
}

}  // namespace flightrec::recorder::cli
