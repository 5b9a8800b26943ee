#include "recorder/attribution/process_table.h"

#include <sys/mman.h>

#include <algorithm>
#include <atomic>

namespace flightrec::recorder::attribution {

Process& ProcessTable::Get(uint32_t pid) {
  auto& p = procs_[pid];
  p.pid = pid;
  return p;
}

const Process* ProcessTable::Find(uint32_t pid) const {
  auto it = procs_.find(pid);
  return it == procs_.end() ? nullptr : &it->second;
}

uint64_t ProcessTable::NextGeneration() {
  static std::atomic<uint64_t> next{1};
  return next.fetch_add(1, std::memory_order_relaxed);
}

void ProcessTable::Apply(const Event& e) {
  generation_ = NextGeneration();
  if (auto* m = std::get_if<MmapEvent>(&e)) {
    if (m->kernel || m->len == 0) return;
    Process& p = Get(m->pid);
    uint64_t start = m->start, end = m->start + m->len;
    // A new mapping shadows whatever it overlaps (as mmap(MAP_FIXED) does):
    // trim or drop the old ones.
    std::vector<Mapping> keep;
    for (auto it = p.maps.begin(); it != p.maps.end();) {
      Mapping& old = it->second;
      if (old.end <= start || old.start >= end) {
        ++it;
        continue;
      }
      if (old.start < start) {
        Mapping left = old;
        left.end = start;
        keep.push_back(left);
      }
      if (old.end > end) {
        Mapping right = old;
        right.pgoff += end - old.start;
        right.start = end;
        keep.push_back(right);
      }
      it = p.maps.erase(it);
    }
    for (auto& k : keep) p.maps[k.start] = k;
    Mapping nm;
    nm.start = start;
    nm.end = end;
    nm.pgoff = m->pgoff;
    nm.cookie = cookies_->Intern(*m);
    // Old-style MMAP records carry no prot: those are executable mappings
    // (perf reports data mmaps only with attr.mmap_data).
    nm.exec = m->prot == 0 || (m->prot & PROT_EXEC) != 0;
    nm.name = m->filename;
    p.maps[start] = nm;
    if (p.exe.empty() && nm.exec && nm.cookie != 0) p.exe = m->filename;
    mmaps_[m->pid].push_back(*m);
    if (mmaps_[m->pid].size() > 65536) {
      // A JIT mapping code forever: keep what is still mapped.
      auto& v = mmaps_[m->pid];
      std::vector<MmapEvent> live;
      for (const auto& ev : v) {
        auto it = p.maps.find(ev.start);
        if (it != p.maps.end() && it->second.end == ev.start + ev.len) live.push_back(ev);
      }
      v.swap(live);
    }
  } else if (auto* c = std::get_if<CommEvent>(&e)) {
    Process& p = Get(c->pid);
    if (c->exec) {
      p.maps.clear();
      p.exe.clear();
      mmaps_[c->pid].clear();
      p.exited = false;
    }
    if (c->exec) p.threads.clear();  // exec leaves one thread, the new main one
    if (c->pid == c->tid || p.comm.empty()) p.comm = c->comm;
    if (c->pid != c->tid) {
      Thread& t = p.threads[c->tid];
      t.comm = c->comm;
      t.exited = false;
    }
    tid_to_pid_[c->tid] = c->pid;
  } else if (auto* t = std::get_if<TaskEvent>(&e)) {
    if (!t->exit) {
      tid_to_pid_[t->tid] = t->pid;
      // A new task is named as the thread that created it was (copy_process
      // copies comm).
      if (t->pid != t->ppid && t->pid == t->tid) {
        // fork: the child starts with a copy of the parent's address space.
        // (A pointer, not an iterator: Get may rehash.)
        auto pit = procs_.find(t->ppid);
        const Process* parent = pit == procs_.end() ? nullptr : &pit->second;
        std::string comm = ThreadComm(t->ppid, t->ptid);
        Process& child = Get(t->pid);
        child.exited = false;
        child.threads.clear();
        if (parent != nullptr) {
          child.maps = parent->maps;
          child.comm = std::move(comm);
          child.exe = parent->exe;
          mmaps_[t->pid] = mmaps_[t->ppid];
        }
      } else if (t->pid != t->tid && procs_.count(t->pid)) {
        // A new thread (clone with CLONE_THREAD).
        std::string comm = ThreadComm(t->pid, t->ptid);
        Thread& th = Get(t->pid).threads[t->tid];
        th.comm = std::move(comm);
        th.exited = false;
      }
    } else if (t->pid == t->tid) {
      Process& p = Get(t->pid);
      p.exited = true;
      p.exit_time_ns = t->time_ns;
    } else if (auto pit = procs_.find(t->pid); pit != procs_.end()) {
      // Kept until Prune: samples of its last instants may still come.
      auto th = pit->second.threads.find(t->tid);
      if (th != pit->second.threads.end()) {
        th->second.exited = true;
        th->second.exit_time_ns = t->time_ns;
      }
    }
  }
}

const Mapping* ProcessTable::Lookup(uint32_t pid, uint64_t ip) const {
  auto pit = procs_.find(pid);
  if (pit == procs_.end()) {
    auto tp = tid_to_pid_.find(pid);
    if (tp == tid_to_pid_.end()) return nullptr;
    pit = procs_.find(tp->second);
    if (pit == procs_.end()) return nullptr;
  }
  const auto& maps = pit->second.maps;
  auto it = maps.upper_bound(ip);
  if (it == maps.begin()) return nullptr;
  --it;
  if (ip >= it->second.end) return nullptr;
  return &it->second;
}

const std::string& ProcessTable::ThreadComm(uint32_t pid, uint32_t tid) const {
  static const std::string kNone, kIdle = kIdleComm;
  auto pit = procs_.find(pid);
  if (pit == procs_.end()) return pid == 0 ? kIdle : kNone;
  const Process& p = pit->second;
  if (tid != pid && !p.threads.empty()) {
    auto t = p.threads.find(tid);
    if (t != p.threads.end()) return t->second.comm;
  }
  return pid == 0 && p.comm.empty() ? kIdle : p.comm;
}

ProcessTable::SampledThread ProcessTable::ThreadAt(uint32_t pid, uint32_t tid,
                                                   uint64_t time_ns) const {
  static const std::string kExiting = kExitingComm;
  if (tid != UINT32_MAX) return {tid, &ThreadComm(pid, tid)};
  auto pit = procs_.find(pid);
  if (pit == procs_.end()) return {tid, &kExiting};
  const Process& p = pit->second;
  uint32_t best = UINT32_MAX;
  uint64_t best_ns = 0;
  auto consider = [&](uint32_t t, bool exited, uint64_t exit_ns) {
    if (exited && exit_ns <= time_ns && time_ns - exit_ns <= kExitTailNs && exit_ns >= best_ns) {
      best = t;
      best_ns = exit_ns;
    }
  };
  consider(pid, p.exited, p.exit_time_ns);
  for (const auto& [t, th] : p.threads) consider(t, th.exited, th.exit_time_ns);
  if (best == UINT32_MAX) return {tid, &kExiting};
  return {best, &ThreadComm(pid, best)};
}

void ProcessTable::Prune(uint64_t cutoff_ns) {
  generation_ = NextGeneration();
  for (auto it = procs_.begin(); it != procs_.end();) {
    if (it->second.exited && it->second.exit_time_ns < cutoff_ns) {
      mmaps_.erase(it->first);
      it = procs_.erase(it);
      continue;
    }
    auto& threads = it->second.threads;
    for (auto t = threads.begin(); t != threads.end();) {
      if (t->second.exited && t->second.exit_time_ns < cutoff_ns) {
        t = threads.erase(t);
      } else {
        ++t;
      }
    }
    ++it;
  }
}

std::vector<Event> ProcessTable::StateEvents(uint32_t pid, uint64_t time_ns) const {
  std::vector<Event> out;
  auto it = procs_.find(pid);
  if (it == procs_.end()) return out;
  CommEvent c;
  c.time_ns = time_ns;
  c.pid = c.tid = pid;
  c.comm = it->second.comm;
  c.exec = true;  // starts a clean address space on replay
  out.push_back(c);
  auto mit = mmaps_.find(pid);
  if (mit != mmaps_.end()) {
    for (MmapEvent m : mit->second) {
      auto cur = it->second.maps.find(m.start);
      if (cur == it->second.maps.end()) continue;  // since replaced
      m.time_ns = time_ns;
      out.push_back(m);
    }
  }
  for (const auto& [tid, t] : it->second.threads) {
    if (t.exited) continue;
    CommEvent tc;
    tc.time_ns = time_ns;
    tc.pid = pid;
    tc.tid = tid;
    tc.comm = t.comm;
    out.push_back(std::move(tc));
  }
  return out;
}

}  // namespace flightrec::recorder::attribution
