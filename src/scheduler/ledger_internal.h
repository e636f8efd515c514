// Internal to the ledger: small helpers that ledger.cc (the update and placement paths),
// ledger_registration.cc and ledger_inspect.cc share. They are inline so the hot path in
// ledger.cc compiles as it would with file-local helpers. Include only from those three files.
//
// Thread safety: pure functions.
#pragma once

#include <cstdint>
#include <limits>
#include <string_view>

#include "device/device.h"
#include "scheduler/ledger.h"

namespace hami::scheduler::ledger_internal {

inline constexpr uint64_t kFnvOffset = 1469598103934665603ull;
inline constexpr uint64_t kFnvPrime = 1099511628211ull;

// FNV-1a over `s`, continuing from `h` so several strings chain into one hash.
inline uint64_t Fnv(std::string_view s, uint64_t h = kFnvOffset) {
  for (unsigned char c : s) {
    h ^= c;
    h *= kFnvPrime;
  }
  return h;
}

// `v` capped at the largest int32_t.
inline int32_t Saturate(int64_t v) {
  if (v > std::numeric_limits<int32_t>::max()) return std::numeric_limits<int32_t>::max();
  return static_cast<int32_t>(v);
}

// The annotation `key` of `a`; "" when absent or when `key` is "".
inline std::string_view Lookup(const device::Annotations& a, std::string_view key) {
  if (key.empty()) return {};
  auto it = a.find(key);
  return it == a.end() ? std::string_view() : std::string_view(it->second);
}

// Whether `a` carries annotation `key` (never for an empty `key`).
inline bool Has(const device::Annotations& a, std::string_view key) {
  return !key.empty() && a.find(key) != a.end();
}

// More slots, memory or cores in use than the device has. Cores do not count on a MIG device:
// its instances' core figures are rounded up (seven 1g on an A100 sum to 105 of 100), and its
// capacity is its placements (the placement engine's FindMigSlot) and slots.
inline bool Over(const LedgerDevice& d) {
  return d.used_slots > d.count || d.used_mem > d.devmem ||
         (d.used_cores > d.devcore && d.mode != DeviceMode::kMig);
}

}  // namespace hami::scheduler::ledger_internal
