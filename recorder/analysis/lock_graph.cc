#include "recorder/analysis/lock_graph.h"

#include <unordered_map>

#include <fmt/format.h>

namespace flightrec::recorder::analysis {
namespace {

std::string Hex(uint64_t v) { return fmt::format("0x{:x}", v); }

// The cycle a walk from `start` closes, if it closes one not seen before:
// every node is walked once (state: 0 new, 1 on this walk, 2 done).
std::vector<uint32_t> CycleFrom(uint32_t start, const std::unordered_map<uint32_t, LockEdge>& by,
                                std::unordered_map<uint32_t, int>* state) {
  std::vector<uint32_t> path;
  uint32_t t = start;
  while (true) {
    int& s = (*state)[t];
    if (s == 2) break;
    if (s == 1) {
      // Back on this walk: the cycle is the path from t on.
      size_t i = 0;
      while (path[i] != t) ++i;
      std::vector<uint32_t> cycle(path.begin() + static_cast<std::ptrdiff_t>(i), path.end());
      for (uint32_t p : path) (*state)[p] = 2;
      return cycle;
    }
    s = 1;
    path.push_back(t);
    auto e = by.find(t);
    if (e == by.end() || e->second.owner == 0) break;
    t = e->second.owner;
  }
  for (uint32_t p : path) (*state)[p] = 2;
  return {};
}

}  // namespace

nlohmann::json LockGraph(const std::vector<LockEdge>& edges,
                         const std::map<uint32_t, std::string>& comm) {
  std::unordered_map<uint32_t, LockEdge> by;
  nlohmann::json waits = nlohmann::json::array();
  auto name = [&](uint32_t tid) {
    auto it = comm.find(tid);
    return it == comm.end() ? std::string() : it->second;
  };
  for (const LockEdge& e : edges) {
    if (e.tid == 0 || !by.emplace(e.tid, e).second) continue;
    waits.push_back({{"tid", e.tid},
                     {"comm", name(e.tid)},
                     {"mutex", Hex(e.mutex)},
                     {"owner", e.owner},
                     {"owner_comm", name(e.owner)},
                     {"owner_in_process", e.owner_in_process}});
  }
  nlohmann::json deadlocks = nlohmann::json::array();
  size_t omitted = 0;
  std::unordered_map<uint32_t, int> state;
  for (const LockEdge& e : edges) {
    std::vector<uint32_t> cycle = CycleFrom(e.tid, by, &state);
    if (cycle.empty()) continue;
    if (deadlocks.size() == kMaxDeadlocks) {
      ++omitted;
      continue;
    }
    std::string text = "deadlock:";
    for (size_t i = 0; i < cycle.size() && i < kMaxCycleText; ++i) {
      const LockEdge& w = by.at(cycle[i]);
      text +=
          fmt::format("{} {} waits for {} (mutex {})", i ? "," : "", w.tid, w.owner, Hex(w.mutex));
    }
    if (cycle.size() > kMaxCycleText) {
      text += fmt::format(", ... ({} threads in all)", cycle.size());
    }
    deadlocks.push_back({{"threads", cycle}, {"text", text}});
  }
  nlohmann::json out = {{"waits", waits}, {"deadlocks", deadlocks}};
  if (omitted) out["deadlocks_omitted"] = omitted;
  return out;
}

}  // namespace flightrec::recorder::analysis
