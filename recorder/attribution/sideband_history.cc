#include "recorder/attribution/sideband_history.h"

#include <algorithm>
#include <set>

namespace flightrec::recorder::attribution {

void SidebandHistory::Add(const Event& e) {
  if (std::holds_alternative<Sample>(e)) return;
  log_.push_back(e);
}

void SidebandHistory::Trim(uint64_t cutoff_ns, size_t max_events) {
  // Stops at the first event not old enough even if later ones are older:
  // arrival order is the order of record, and a moved exec (see the class
  // comment) must not be applied after the mappings that follow it.
  while (!log_.empty() && (EventTime(log_.front()) < cutoff_ns || log_.size() > max_events)) {
    if (EventTime(log_.front()) >= cutoff_ns) ++trimmed_early_;
    base_.Apply(log_.front());
    log_.pop_front();
  }
  base_.Prune(cutoff_ns);
}

std::optional<uint32_t> AffectedPid(const Event& e) {
  if (auto* m = std::get_if<MmapEvent>(&e)) {
    if (m->kernel) return std::nullopt;
    return m->pid;
  }
  if (auto* c = std::get_if<CommEvent>(&e)) return c->pid;
  if (auto* t = std::get_if<TaskEvent>(&e)) {
    // A new process starts with a copy of its parent's mappings; a new
    // thread or an exit changes no mapping.
    if (!t->exit && t->pid == t->tid && t->pid != t->ppid) return t->pid;
  }
  return std::nullopt;
}

std::vector<Event> SidebandHistory::EventsFor(const std::vector<uint32_t>& pids, uint64_t start_ns,
                                              uint64_t end_ns) const {
  // Non-decreasing times in arrival order: the suffix minimum.
  std::vector<uint64_t> t(log_.size());
  uint64_t low = UINT64_MAX;
  for (size_t i = log_.size(); i-- > 0;) {
    low = std::min(low, EventTime(log_[i]));
    t[i] = low;
  }
  const size_t cut =
      static_cast<size_t>(std::lower_bound(t.begin(), t.end(), start_ns) - t.begin());
  const size_t stop = static_cast<size_t>(std::upper_bound(t.begin(), t.end(), end_ns) - t.begin());
  // A process forked inside the window starts from its parent's mappings at
  // the fork: the parent's state and events are needed too, transitively.
  std::set<uint32_t> want(pids.begin(), pids.end());
  for (bool grew = true; grew;) {
    grew = false;
    for (size_t i = cut; i < stop; ++i) {
      auto* f = std::get_if<TaskEvent>(&log_[i]);
      if (f && AffectedPid(log_[i]) && want.count(f->pid) && want.insert(f->ppid).second) {
        grew = true;
      }
    }
  }
  ProcessTable state = base_;
  for (size_t i = 0; i < cut; ++i) state.Apply(log_[i]);
  std::vector<Event> out;
  const uint64_t before = start_ns ? start_ns - 1 : 0;
  for (uint32_t pid : want) {
    for (Event& e : state.StateEvents(pid, before)) out.push_back(std::move(e));
  }
  for (size_t i = cut; i < stop; ++i) {
    const Event& e = log_[i];
    uint32_t pid = 0;
    if (auto* m = std::get_if<MmapEvent>(&e)) {
      pid = m->pid;
    } else if (auto* c = std::get_if<CommEvent>(&e)) {
      pid = c->pid;
    } else if (auto* k = std::get_if<TaskEvent>(&e)) {
      pid = k->pid;
    } else {
      continue;
    }
    if (!want.count(pid)) continue;
    Event copy = e;
    std::visit([&](auto& v) { v.time_ns = t[i]; }, copy);
    out.push_back(std::move(copy));
  }
  return out;
}

}  // namespace flightrec::recorder::attribution
