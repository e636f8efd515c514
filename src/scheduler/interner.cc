#include "scheduler/interner.h"

#include <cstring>

namespace hami::scheduler {

uint32_t StringInterner::Intern(std::string_view s) {
  if (auto it = ids_.find(s); it != ids_.end()) return it->second;
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
  ids_.emplace(stored, id);
  return id;
}

uint32_t StringInterner::Find(std::string_view s) const {
  auto it = ids_.find(s);
  return it == ids_.end() ? kNotFound : it->second;
}

size_t StringInterner::MemoryBytes() const {
  size_t bytes = big_bytes_ + (chunks_.size() - big_count_) * kChunkBytes +
                 strings_.capacity() * sizeof(std::string_view);
  // unordered_map: one node (key, value, next pointer, cached hash) per entry plus buckets.
  bytes += ids_.size() * (sizeof(std::string_view) + sizeof(uint32_t) + 2 * sizeof(void*)) +
           ids_.bucket_count() * sizeof(void*);
  return bytes;
}

}  // namespace hami::scheduler
