#include "tests/support/recording.h"

#include <map>

#include <nlohmann/json.hpp>

namespace flightrec::testing {

void DumpLast5s(const Daemon& d, pid_t pid, const std::vector<std::string>& extra,
                std::string* id) {
  std::vector<std::string> args = {"dump", "--last", "5s"};
  if (pid != 0) args.insert(args.end(), {"--pid", std::to_string(pid)});
  args.insert(args.end(), extra.begin(), extra.end());
  args.push_back("--json");
  auto r = d.Cli(args);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  *id = nlohmann::json::parse(r.out)["id"];
}

std::map<std::string, uint64_t> SelfByKey(const std::string& report_json) {
  std::map<std::string, uint64_t> rows;
  // Held in a variable: a range-for over parse(...)["rows"] would iterate a
  // reference into a temporary already destroyed.
  const auto report = nlohmann::json::parse(report_json);
  for (const auto& row : report["rows"]) {
    rows[row["key"].get<std::string>()] += row["self"].get<uint64_t>();
  }
  return rows;
}

}  // namespace flightrec::testing
