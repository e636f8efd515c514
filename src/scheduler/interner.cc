#include "scheduler/interner.h"

#include <cstring>

namespace hami::scheduler {

uint64_t StringInterner::Hash(std::string_view s) {
  // FNV-1a, then a final mix so that the low bits (the slot index) depend on every byte.
  uint64_t h = 1469598103934665603ull;
  for (unsigned char c : s) {
    h ^= c;
    h *= 1099511628211ull;
  }
  h ^= h >> 29;
  h *= 0xbf58476d1ce4e5b9ull;
  h ^= h >> 32;
  return h;
}

size_t StringInterner::Probe(std::string_view s, uint64_t hash) const {
  const size_t mask = slots_.size() - 1;
  for (size_t i = hash & mask;; i = (i + 1) & mask) {
    uint32_t v = slots_[i];
    if (v == 0) return i;
    if (hashes_[v - 1] == hash && strings_[v - 1] == s) return i;
  }
}

void StringInterner::Grow() {
  slots_.assign(slots_.empty() ? 64 : slots_.size() * 2, 0);
  const size_t mask = slots_.size() - 1;
  for (uint32_t id = 0; id < strings_.size(); ++id) {
    size_t i = hashes_[id] & mask;
    while (slots_[i] != 0) i = (i + 1) & mask;
    slots_[i] = id + 1;
  }
}

uint32_t StringInterner::Intern(std::string_view s) {
  const uint64_t hash = Hash(s);
  if (!slots_.empty()) {
    uint32_t v = slots_[Probe(s, hash)];
    if (v != 0) return v - 1;
  }
  char* dst;
  if (s.size() > kChunkBytes / 4) {
    // Rare oversized string: its own allocation, kept at the front so the current chunk stays last.
    chunks_.insert(chunks_.begin(), std::make_unique<char[]>(s.size()));
    dst = chunks_.front().get();
    big_bytes_ += s.size();
    ++big_count_;
  } else {
    if (chunks_.empty() || chunk_used_ + s.size() > kChunkBytes) {
      chunks_.push_back(std::make_unique<char[]>(kChunkBytes));
      chunk_used_ = 0;
    }
    dst = chunks_.back().get() + chunk_used_;
    chunk_used_ += s.size();
  }
  if (!s.empty()) std::memcpy(dst, s.data(), s.size());
  std::string_view stored(dst, s.size());
  uint32_t id = static_cast<uint32_t>(strings_.size());
  strings_.push_back(stored);
  hashes_.push_back(hash);
  if ((strings_.size()) * 2 > slots_.size()) {
    Grow();  // re-inserts every id, this one included
  } else {
    slots_[Probe(stored, hash)] = id + 1;
  }
  return id;
}

uint32_t StringInterner::Find(std::string_view s) const {
  if (slots_.empty()) return kNotFound;
  uint32_t v = slots_[Probe(s, Hash(s))];
  return v == 0 ? kNotFound : v - 1;
}

size_t StringInterner::MemoryBytes() const {
  size_t bytes = big_bytes_ + (chunks_.size() - big_count_) * kChunkBytes +
                 strings_.capacity() * sizeof(std::string_view);
  bytes += hashes_.capacity() * sizeof(uint64_t) + slots_.capacity() * sizeof(uint32_t);
  return bytes;
}

}  // namespace hami::scheduler
