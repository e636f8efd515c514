// Process-local record of every accounted allocation: what to give back, and to which device,
// when it is freed. Keys live in separate spaces (device pointers, VMM handles, arrays) because
// their values come from different namespaces of the driver.
//
// Open addressing with linear probing and backward-shift deletion: O(1) expected insert, lookup
// and removal, no tombstones, storage from malloc only (the preload library has no libstdc++).
//
// Thread safety: all methods take an internal spinlock (critical sections are a few dozen
// instructions; a pthread mutex costs more than the work it protects). ForkPrepare/ForkParent/
// ForkChild must be installed with pthread_atfork so that a fork never copies it locked.
#pragma once

#include <stddef.h>
#include <stdint.h>

#include <atomic>

#include "vgpu/region.h"

namespace hami::vgpu {

// kGraphExec records are not memory: `bytes` holds the graph's work units for the SM limiter.
enum class KeySpace : uint8_t {
  kPointer = 1,
  kVmmHandle = 2,
  kArray = 3,
  kMipmap = 4,
  kGraphExec = 5,
};

struct AllocRecord {
  uint64_t key;
  uint64_t bytes;
  int16_t dev;
  MemKind kind;
  KeySpace space;  // 0 in an empty bucket
};

class AllocTable {
 public:
  constexpr AllocTable() = default;
  AllocTable(const AllocTable&) = delete;
  AllocTable& operator=(const AllocTable&) = delete;

  // Records an allocation. Returns false only if memory for the table could not be obtained;
  // an existing record with the same key is replaced (the driver reused the address).
  bool Insert(KeySpace space, uint64_t key, int dev, MemKind kind, uint64_t bytes);
  // Removes and returns the record for `key`. Returns false if it is not known.
  bool Remove(KeySpace space, uint64_t key, AllocRecord* out);
  // Looks `key` up without removing it.
  bool Find(KeySpace space, uint64_t key, AllocRecord* out);
  size_t size();
  // Drops every record (a forked child owns none of its parent's allocations).
  void ClearUnlocked();

  void ForkPrepare() { Lock(); }
  void ForkParent() { Unlock(); }
  void ForkChild();

 private:
  void Lock();
  void Unlock() { locked_.store(false, std::memory_order_release); }
  bool GrowLocked();
  size_t SlotFor(KeySpace space, uint64_t key) const;

  std::atomic<bool> locked_{false};
  AllocRecord* buckets_ = nullptr;  // GUARDED_BY(locked_)
  size_t capacity_ = 0;             // power of two; GUARDED_BY(locked_)
  size_t count_ = 0;                // GUARDED_BY(locked_)
};

}  // namespace hami::vgpu
