// StringInterner: maps strings (GPU UUIDs, model names, node names) to dense 32-bit ids so that the
// ledger and the placement hot path compare and store integers instead of strings.
//
// Interned text lives in append-only chunks, so the string_view returned by Get() stays valid for
// the interner's lifetime (moving the interner keeps it valid too). Ids are never reused: the
// table grows with the number of distinct strings ever seen (node names and device UUIDs, not
// pod UIDs, so it is bounded by the cluster's hardware history).
//
// Thread safety: not synchronised. Concurrent const calls (Find, Get) are safe when no thread
// calls Intern.
#pragma once

#include <cstdint>
#include <memory>
#include <string_view>
#include <vector>

namespace hami::scheduler {

class StringInterner {
 public:
  static constexpr uint32_t kNotFound = UINT32_MAX;

  StringInterner() = default;
  StringInterner(StringInterner&&) = default;
  StringInterner& operator=(StringInterner&&) = default;
  StringInterner(const StringInterner&) = delete;
  StringInterner& operator=(const StringInterner&) = delete;

  // The id of `s`, adding it when new.
  uint32_t Intern(std::string_view s);
  // The id of `s`, or kNotFound.
  uint32_t Find(std::string_view s) const;
  // Precondition: id < size().
  std::string_view Get(uint32_t id) const { return strings_[id]; }
  size_t size() const { return strings_.size(); }
  // Bytes held (text chunks, index and hash table), for memory accounting.
  size_t MemoryBytes() const;

 private:
  static constexpr size_t kChunkBytes = 64 * 1024;

  static uint64_t Hash(std::string_view s);
  // The slot of `s` in `slots_`: where its id is, or the empty slot where it would go.
  size_t Probe(std::string_view s, uint64_t hash) const;
  // Doubles the slot array (64 at first) and re-inserts every id.
  void Grow();

  std::vector<std::unique_ptr<char[]>> chunks_;
  size_t chunk_used_ = kChunkBytes;
  size_t big_bytes_ = 0;
  size_t big_count_ = 0;
  std::vector<std::string_view> strings_;
  std::vector<uint64_t> hashes_;  // by id
  // Open addressing, linear probing, at most half full: id + 1, 0 = empty. A lookup touches one
  // slot array and the candidate's hash, not a chain of nodes (Find runs once per offered node
  // per filter).
  std::vector<uint32_t> slots_;
};

}  // namespace hami::scheduler
