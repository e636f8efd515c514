#include "vgpu/alloc_table.h"

#include <sched.h>
#include <stdlib.h>
#include <string.h>

namespace hami::vgpu {
namespace {

bool Empty(const AllocRecord& r) { return r.space == static_cast<KeySpace>(0); }

uint64_t Mix(KeySpace space, uint64_t key) {
  uint64_t x = key ^ (static_cast<uint64_t>(space) << 56);
  x ^= x >> 33;
  x *= 0xff51afd7ed558ccdULL;
  x ^= x >> 33;
  return x;
}

}  // namespace

size_t AllocTable::SlotFor(KeySpace space, uint64_t key) const {
  return static_cast<size_t>(Mix(space, key)) & (capacity_ - 1);
}

bool AllocTable::GrowLocked() {
  size_t new_cap = capacity_ == 0 ? 256 : capacity_ * 2;
  auto* fresh = static_cast<AllocRecord*>(calloc(new_cap, sizeof(AllocRecord)));
  if (fresh == nullptr) return false;
  AllocRecord* old = buckets_;
  size_t old_cap = capacity_;
  buckets_ = fresh;
  capacity_ = new_cap;
  for (size_t i = 0; i < old_cap; ++i) {
    if (Empty(old[i])) continue;
    size_t j = SlotFor(old[i].space, old[i].key);
    while (!Empty(buckets_[j])) j = (j + 1) & (capacity_ - 1);
    buckets_[j] = old[i];
  }
  free(old);
  return true;
}

bool AllocTable::Insert(KeySpace space, uint64_t key, int dev, MemKind kind, uint64_t bytes) {
  Lock();
  if ((count_ + 1) * 2 > capacity_ && !GrowLocked()) {
    Unlock();
    return false;
  }
  size_t i = SlotFor(space, key);
  while (!Empty(buckets_[i]) && !(buckets_[i].space == space && buckets_[i].key == key)) {
    i = (i + 1) & (capacity_ - 1);
  }
  if (Empty(buckets_[i])) ++count_;
  buckets_[i] = AllocRecord{key, bytes, static_cast<int16_t>(dev), kind, space};
  Unlock();
  return true;
}

bool AllocTable::Find(KeySpace space, uint64_t key, AllocRecord* out) {
  Lock();
  bool found = false;
  if (capacity_ != 0) {
    for (size_t i = SlotFor(space, key); !Empty(buckets_[i]); i = (i + 1) & (capacity_ - 1)) {
      if (buckets_[i].space == space && buckets_[i].key == key) {
        *out = buckets_[i];
        found = true;
        break;
      }
    }
  }
  Unlock();
  return found;
}

bool AllocTable::Remove(KeySpace space, uint64_t key, AllocRecord* out) {
  Lock();
  if (capacity_ == 0) {
    Unlock();
    return false;
  }
  const size_t mask = capacity_ - 1;
  size_t i = SlotFor(space, key);
  while (!Empty(buckets_[i]) && !(buckets_[i].space == space && buckets_[i].key == key)) {
    i = (i + 1) & mask;
  }
  if (Empty(buckets_[i])) {
    Unlock();
    return false;
  }
  *out = buckets_[i];
  // Backward-shift deletion: pull later members of the probe run into the hole so that lookups
  // never need tombstones.
  size_t hole = i;
  for (size_t j = (i + 1) & mask; !Empty(buckets_[j]); j = (j + 1) & mask) {
    size_t home = SlotFor(buckets_[j].space, buckets_[j].key);
    bool movable = ((j - home) & mask) >= ((j - hole) & mask);
    if (movable) {
      buckets_[hole] = buckets_[j];
      hole = j;
    }
  }
  memset(&buckets_[hole], 0, sizeof(AllocRecord));
  --count_;
  Unlock();
  return true;
}

size_t AllocTable::size() {
  Lock();
  size_t n = count_;
  Unlock();
  return n;
}

void AllocTable::ClearUnlocked() {
  if (buckets_ != nullptr) memset(buckets_, 0, capacity_ * sizeof(AllocRecord));
  count_ = 0;
}

void AllocTable::Lock() {
  while (locked_.exchange(true, std::memory_order_acquire)) {
    while (locked_.load(std::memory_order_relaxed)) sched_yield();
  }
}

void AllocTable::ForkChild() {
  // Only the forking thread exists in the child, and it holds the lock (ForkPrepare).
  ClearUnlocked();
  Unlock();
}

}  // namespace hami::vgpu
