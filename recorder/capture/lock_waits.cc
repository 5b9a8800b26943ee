#include "recorder/capture/lock_waits.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <string>

#include <fmt/format.h>

#include "common/scoped_fd.h"

namespace flightrec::recorder {
namespace {

// glibc's PTHREAD_MUTEX_* kind bits (nptl/pthreadP.h): the kind mask, robust,
// priority inheritance, priority protection, process-shared, elision.
constexpr int32_t kKindKnownBits = 3 | 16 | 32 | 64 | 128 | 256 | 512;
constexpr int32_t kKindRobust = 16, kKindPi = 32;
constexpr uint32_t kFutexTidMask = 0x3fffffff;  // linux/futex.h FUTEX_TID_MASK

}  // namespace

int64_t MutexOwner(const MutexWords& w) {
  if ((w.kind & ~kKindKnownBits) != 0 || w.kind < 0) return -1;
  if (w.kind & (kKindRobust | kKindPi)) {
    // The futex word holds the owner's tid (and the waiters/died bits).
    const uint32_t tid = static_cast<uint32_t>(w.lock) & kFutexTidMask;
    if (tid == 0) return -1;
    if (w.owner > 0 && static_cast<uint32_t>(w.owner) != tid) return -1;
    return tid;
  }
  // Normal, recursive, error-checking, adaptive: 1 locked, 2 locked with
  // waiters; __owner is set by every lock (nptl/pthread_mutex_lock.c).
  if (w.lock != 1 && w.lock != 2) return -1;
  return w.owner > 0 ? w.owner : 0;
}

void LockWaitTable::Blocked(uint32_t pid, uint32_t tid, uint64_t out_ns, uint64_t uaddr) {
  auto it = waits_.find(tid);
  if (it != waits_.end()) {
    // Each CPU's log is drained in turn: an older switch-out may come last.
    if (it->second.out_ns >= out_ns) return;
    // The same futex word again: glibc's lock loop waiting once more, or the
    // thread blocking on its way out (a core dump's other threads wait in
    // coredump_task_exit with the syscall's registers): still that wait.
    if (it->second.read && it->second.uaddr == uaddr) {
      it->second.end_ns = 0;
      return;
    }
  } else if (waits_.size() >= kMaxLockWaits) {
    EvictSome();
  }
  LockWait& w = waits_[tid];
  w = LockWait{};
  w.pid = pid;
  w.tid = tid;
  w.out_ns = out_ns;
  w.uaddr = uaddr;
}

void LockWaitTable::Ran(uint32_t tid, uint64_t in_ns) {
  auto it = waits_.find(tid);
  if (it == waits_.end() || in_ns <= it->second.out_ns) return;
  if (it->second.end_ns != 0 && it->second.end_ns <= in_ns) return;
  // A wait never read ends unknown: nothing to keep.
  if (!it->second.read) {
    waits_.erase(it);
    return;
  }
  it->second.end_ns = in_ns;
}

void LockWaitTable::EvictSome() {
  // Down to three quarters, ended waits first, then the oldest: one sort per
  // kMaxLockWaits / 4 new threads.
  std::vector<std::pair<std::pair<bool, uint64_t>, uint32_t>> order;
  order.reserve(waits_.size());
  for (const auto& [tid, w] : waits_) order.push_back({{w.end_ns == 0, w.out_ns}, tid});
  const size_t drop = waits_.size() - kMaxLockWaits * 3 / 4;
  std::nth_element(order.begin(), order.begin() + static_cast<std::ptrdiff_t>(drop), order.end());
  for (size_t i = 0; i < drop; ++i) waits_.erase(order[i].second);
  evicted_ += drop;
}

size_t LockWaitTable::Resolve(uint64_t now_ns, const MemReader& read, const ThreadOf& thread_of) {
  size_t done = 0;
  for (auto it = waits_.begin(); it != waits_.end();) {
    LockWait& w = it->second;
    if (w.read || w.end_ns != 0 || w.uaddr == 0 || now_ns < w.out_ns + kLockReadAfterNs) {
      ++it;
      continue;
    }
    if (done == kMaxLockReadsPerDrain) {
      ++capped_;
      break;
    }
    ++done;
    ++reads_;
    MutexWords m;
    static_assert(sizeof(m) == 20);
    if (!read(w.pid, w.uaddr, &m, sizeof(m)).ok()) {
      ++read_failed_;
      it = waits_.erase(it);
      continue;
    }
    const int64_t owner = MutexOwner(m);
    if (owner < 0) {
      // Not a mutex's futex word (a condition variable, a join, any other
      // blocking call whose first argument is not a mutex): forgotten.
      ++not_mutex_;
      it = waits_.erase(it);
      continue;
    }
    w.read = true;
    w.read_ns = now_ns;
    w.words = m;
    w.owner = static_cast<uint32_t>(owner);
    w.owner_in_process = owner > 0 && thread_of(w.pid, w.owner);
    ++it;
  }
  return done;
}

nlohmann::json LockWaitTable::ToJson(const std::set<uint32_t>& pids, uint64_t since_ns) const {
  nlohmann::json out = nlohmann::json::array();
  for (const auto& [tid, w] : waits_) {
    if (!w.read || (!pids.empty() && pids.count(w.pid) == 0)) continue;
    if (w.end_ns != 0 && w.end_ns < since_ns) continue;
    out.push_back({{"pid", w.pid},
                   {"tid", w.tid},
                   {"out_ns", w.out_ns},
                   {"end_ns", w.end_ns},
                   {"mutex", w.uaddr},
                   {"lock_word", w.words.lock},
                   {"kind", w.words.kind},
                   {"owner", w.owner},
                   {"owner_in_process", w.owner_in_process},
                   {"read_ns", w.read_ns}});
  }
  return out;
}

nlohmann::json LockWaitTable::Stats() const {
  return {{"waits", waits_.size()},      {"reads", reads_},     {"not_mutex", not_mutex_},
          {"read_failed", read_failed_}, {"evicted", evicted_}, {"reads_deferred", capped_}};
}

Status ReadProcMem(uint32_t pid, uint64_t addr, void* buf, size_t n) {
  ScopedFd fd(open(fmt::format("/proc/{}/mem", pid).c_str(), O_RDONLY | O_CLOEXEC));
  if (!fd) return ErrnoStatus(fmt::format("opening /proc/{}/mem", pid));
  if (addr > static_cast<uint64_t>(INT64_MAX) - n) return InvalidArgument("address out of range");
  const ssize_t got = pread(fd.get(), buf, n, static_cast<off_t>(addr));
  if (got < 0) return ErrnoStatus(fmt::format("reading pid {} at 0x{:x}", pid, addr));
  if (got != static_cast<ssize_t>(n))
    return NotFound(fmt::format("pid {}: 0x{:x} not mapped", pid, addr));
  return OkStatus();
}

bool IsThreadOf(uint32_t pid, uint32_t tid) {
  struct stat st;
  return stat(fmt::format("/proc/{}/task/{}", pid, tid).c_str(), &st) == 0;
}

}  // namespace flightrec::recorder
