// LockWaitTable's logic with a fake memory: which waits are read, when, how
// often, and what a read must look like to name an owner.
#include "recorder/capture/lock_waits.h"

#include <gtest/gtest.h>

#include <cstring>
#include <map>

namespace flightrec::recorder {
namespace {

constexpr uint64_t kSec = 1'000'000'000;

struct FakeMemory {
  std::map<uint64_t, MutexWords> at;
  int reads = 0;
  LockWaitTable::MemReader reader() {
    return [this](uint32_t, uint64_t addr, void* buf, size_t n) -> Status {
      ++reads;
      auto it = at.find(addr);
      if (it == at.end() || n != sizeof(MutexWords)) return NotFound("unmapped");
      std::memcpy(buf, &it->second, n);
      return OkStatus();
    };
  }
};
const LockWaitTable::ThreadOf kAll = [](uint32_t, uint32_t) { return true; };

TEST(MutexOwnerTest, NamesGlibcOwnersAndRefusesWhatIsNoLockedMutex) {
  EXPECT_EQ(MutexOwner({2, 0, 42, 1, 0}), 42);        // normal, waiters
  EXPECT_EQ(MutexOwner({1, 0, 42, 1, 3}), 42);        // adaptive
  EXPECT_EQ(MutexOwner({2, 0, 0, 1, 0}), 0);          // locked, owner unset
  EXPECT_EQ(MutexOwner({0, 0, 42, 0, 0}), -1);        // free
  EXPECT_EQ(MutexOwner({7, 0, 42, 0, 0}), -1);        // not a lock word
  EXPECT_EQ(MutexOwner({2, 0, 42, 0, 1 << 12}), -1);  // unknown kind bit
  EXPECT_EQ(MutexOwner({static_cast<int32_t>(0x80000000u | 42), 0, 42, 1, 32}), 42);  // PI
  EXPECT_EQ(MutexOwner({42, 0, 0, 1, 16}), 42);   // robust, __owner not yet set
  EXPECT_EQ(MutexOwner({42, 0, 43, 1, 16}), -1);  // robust, inconsistent
  EXPECT_EQ(MutexOwner({0, 0, 0, 0, 16}), -1);    // robust, free
}

TEST(LockWaitTableTest, ReadsLongWaitsOnceAndKeepsOnlyMutexes) {
  FakeMemory mem;
  mem.at[0x1000] = {2, 0, 11, 1, 0};
  mem.at[0x2000] = {0, 0, 0, 0, 0};  // a condition variable's word, say
  LockWaitTable t;
  t.Blocked(1, 10, 1 * kSec, 0x1000);
  t.Blocked(1, 12, 1 * kSec, 0x2000);
  t.Blocked(1, 13, 1 * kSec, 0x3000);  // unmapped
  t.Blocked(1, 14, 1 * kSec, 0x1000);
  t.Ran(14, 1 * kSec + 1000);  // ran before it was read: forgotten
  EXPECT_EQ(t.Resolve(1 * kSec + kLockReadAfterNs - 1, mem.reader(), kAll), 0u);
  EXPECT_EQ(t.Resolve(2 * kSec, mem.reader(), kAll), 3u);
  EXPECT_EQ(t.Resolve(3 * kSec, mem.reader(), kAll), 0u);  // read once
  EXPECT_EQ(mem.reads, 3);
  auto j = t.ToJson({}, 0);
  ASSERT_EQ(j.size(), 1u) << j.dump();
  EXPECT_EQ(j[0]["tid"], 10);
  EXPECT_EQ(j[0]["owner"], 11);
  EXPECT_EQ(t.ToJson({2}, 0).size(), 0u);
  EXPECT_EQ(t.Stats()["not_mutex"], 1);
  EXPECT_EQ(t.Stats()["read_failed"], 1);
}

TEST(LockWaitTableTest, AWaitEndsAtItsSwitchInButNotWhenItBlocksOnTheSameWordAgain) {
  FakeMemory mem;
  mem.at[0x1000] = {2, 0, 11, 1, 0};
  LockWaitTable t;
  t.Blocked(1, 10, 1 * kSec, 0x1000);
  t.Resolve(2 * kSec, mem.reader(), kAll);
  t.Ran(10, 5 * kSec);
  EXPECT_EQ(t.ToJson({}, 0)[0]["end_ns"], 5 * kSec);
  EXPECT_EQ(t.ToJson({}, 6 * kSec).size(), 0u);  // ended before the window
  // Woken to die, it blocks again in the kernel with the same registers.
  t.Blocked(1, 10, 5 * kSec + 10, 0x1000);
  EXPECT_EQ(t.ToJson({}, 0)[0]["end_ns"], 0);
  EXPECT_EQ(t.ToJson({}, 0)[0]["out_ns"], 1 * kSec);
  // An older switch-out drained late changes nothing; another word starts over.
  t.Blocked(1, 10, 1, 0x9000);
  EXPECT_EQ(t.ToJson({}, 0).size(), 1u);
  t.Blocked(1, 10, 6 * kSec, 0x9000);
  EXPECT_EQ(t.ToJson({}, 0).size(), 0u);
}

TEST(LockWaitTableTest, ReadsPerDrainAndThreadsAreBounded) {
  FakeMemory mem;
  mem.at[0x1000] = {2, 0, 11, 1, 0};
  LockWaitTable t;
  for (uint32_t tid = 1; tid <= kMaxLockWaits + 10; ++tid) t.Blocked(1, tid, 1 * kSec, 0x1000);
  EXPECT_LE(t.size(), kMaxLockWaits);
  EXPECT_EQ(t.size() + t.Stats()["evicted"].get<size_t>(), kMaxLockWaits + 10);
  EXPECT_EQ(t.Resolve(2 * kSec, mem.reader(), kAll), kMaxLockReadsPerDrain);
  EXPECT_EQ(mem.reads, static_cast<int>(kMaxLockReadsPerDrain));
}

}  // namespace
}  // namespace flightrec::recorder
