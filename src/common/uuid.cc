#include "common/uuid.h"

#include <cinttypes>
#include <cstdio>
#include <random>

namespace hami {

std::string NewRandomUuid() {
  static thread_local std::mt19937_64 rng{std::random_device{}()};
  uint64_t hi = rng(), lo = rng();
  hi = (hi & ~uint64_t{0xF000}) | uint64_t{0x4000};        // version 4
  lo = (lo & ~(uint64_t{3} << 62)) | (uint64_t{2} << 62);  // variant 10xx
  char buf[37];
  const uint64_t node = lo & uint64_t{0xFFFFFFFFFFFF};
  std::snprintf(buf, sizeof(buf),
                "%08" PRIx64 "-%04" PRIx64 "-%04" PRIx64 "-%04" PRIx64 "-%012" PRIx64, hi >> 32,
                (hi >> 16) & 0xFFFF, hi & 0xFFFF, lo >> 48, node);
  return buf;
}

}  // namespace hami
