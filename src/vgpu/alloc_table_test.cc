#include "vgpu/alloc_table.h"

#include <gtest/gtest.h>

#include <random>
#include <thread>
#include <unordered_map>
#include <vector>

namespace hami::vgpu {
namespace {

TEST(AllocTable, InsertFindRemove) {
  static AllocTable t;
  ASSERT_TRUE(t.Insert(KeySpace::kPointer, 0x1000, 1, MemKind::kData, 64));
  ASSERT_TRUE(t.Insert(KeySpace::kVmmHandle, 0x1000, 2, MemKind::kVmm, 128));
  AllocRecord r;
  ASSERT_TRUE(t.Find(KeySpace::kPointer, 0x1000, &r));
  EXPECT_EQ(r.bytes, 64u);
  EXPECT_EQ(r.dev, 1);
  ASSERT_TRUE(t.Remove(KeySpace::kVmmHandle, 0x1000, &r));
  EXPECT_EQ(r.bytes, 128u);
  EXPECT_EQ(r.kind, MemKind::kVmm);
  EXPECT_FALSE(t.Remove(KeySpace::kVmmHandle, 0x1000, &r)) << "removed twice";
  EXPECT_TRUE(t.Find(KeySpace::kPointer, 0x1000, &r)) << "key spaces are separate";
  EXPECT_EQ(t.size(), 1u);
}

// Random operations against a reference map, through several growths and many deletions
// (backward-shift deletion must keep every remaining key reachable).
TEST(AllocTable, MatchesReferenceMapUnderChurn) {
  static AllocTable t;
  std::unordered_map<uint64_t, uint64_t> ref;
  std::mt19937_64 rng(42);
  for (int i = 0; i < 200000; ++i) {
    uint64_t key = (rng() % 5000) * 0x200000;  // 2 MiB aligned like device pointers
    if (rng() % 3 != 0) {
      uint64_t bytes = rng() % 1000 + 1;
      ASSERT_TRUE(t.Insert(KeySpace::kPointer, key, 0, MemKind::kData, bytes));
      ref[key] = bytes;
    } else {
      AllocRecord r;
      bool found = t.Remove(KeySpace::kPointer, key, &r);
      auto it = ref.find(key);
      ASSERT_EQ(found, it != ref.end()) << "key " << key;
      if (found) {
        ASSERT_EQ(r.bytes, it->second);
        ref.erase(it);
      }
    }
  }
  ASSERT_EQ(t.size(), ref.size());
  for (auto& [key, bytes] : ref) {
    AllocRecord r;
    ASSERT_TRUE(t.Find(KeySpace::kPointer, key, &r));
    ASSERT_EQ(r.bytes, bytes);
  }
}

TEST(AllocTable, ConcurrentThreadsKeepTheirOwnRecords) {
  static AllocTable t;
  std::vector<std::thread> threads;
  for (int th = 0; th < 4; ++th) {
    threads.emplace_back([th] {
      for (int round = 0; round < 2000; ++round) {
        uint64_t key = (static_cast<uint64_t>(th) << 40) | static_cast<uint64_t>(round);
        ASSERT_TRUE(t.Insert(KeySpace::kPointer, key, th, MemKind::kData, round));
        AllocRecord r;
        ASSERT_TRUE(t.Remove(KeySpace::kPointer, key, &r));
        ASSERT_EQ(r.dev, th);
      }
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_EQ(t.size(), 0u);
}

}  // namespace
}  // namespace hami::vgpu
