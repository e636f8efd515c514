// QuotaBook: namespace ResourceQuotas on HAMi's device resources, and how much room they leave.
//
// Only `spec.hard` entries named `limits.<memory resource>` and `limits.<core resource>` of an
// enabled vendor count (e.g. `limits.nvidia.com/gpumem: "20000"`, `limits.nvidia.com/gpucores:
// "200"`), as in upstream. Memory limits are in the resource's unit and multiplied by the
// vendor's memoryFactor, like requests. Several quotas in a namespace all apply (the smallest
// wins). Usage is what the ledger says the namespace's pods hold (reserved and bound), so it is
// always consistent with placement decisions.
//
// Thread safety: not synchronised; the scheduler service guards it with the ledger's lock.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"
#include "device/vendor.h"
#include "k8s/object_fwd.h"
#include "scheduler/ledger.h"
#include "scheduler/placement.h"

namespace hami::extender {

struct QuotaLimit {
  std::string vendor;
  std::string resource;  // "limits.nvidia.com/gpumem"
  bool memory = false;   // else cores
  int64_t limit = 0;     // MiB (after memoryFactor) or percent
};

// One (quota, resource) pair with current usage, for metrics.
struct QuotaUsageLine {
  std::string ns;
  std::string quota_name;
  std::string resource;
  int64_t used = 0;
  int64_t limit = 0;
};

class QuotaBook {
 public:
  explicit QuotaBook(const device::VendorRegistry& vendors) : vendors_(vendors) {}
  QuotaBook(const QuotaBook&) = delete;
  QuotaBook& operator=(const QuotaBook&) = delete;

  // Records a ResourceQuota object (replaces an earlier version). A limit that is not an integer
  // quantity is skipped and reported in the returned status (the rest still applies).
  Status Upsert(const k8s::Object& quota);
  void Remove(std::string_view ns, std::string_view name);
  bool HasQuota(std::string_view ns) const;

  // Per vendor: memory (MiB) and cores the namespace's pods hold, optionally not counting `uid`.
  std::map<std::string, std::pair<int64_t, int64_t>> Usage(const scheduler::Ledger& ledger,
                                                           std::string_view ns,
                                                           std::string_view exclude_uid = "") const;
  // Room left in `ns` for a pod (its own earlier reservation not counted); empty when the
  // namespace has no quota.
  std::vector<scheduler::QuotaRoom> Room(const scheduler::Ledger& ledger, std::string_view ns,
                                         std::string_view exclude_uid) const;
  // OK when `mem_mib` and `cores` more of `vendor` fit; ResourceExhausted naming the limit.
  Status Check(const scheduler::Ledger& ledger, std::string_view ns, std::string_view vendor,
               int64_t mem_mib, int64_t cores) const;
  std::vector<QuotaUsageLine> Lines(const scheduler::Ledger& ledger) const;

 private:
  const device::VendorRegistry& vendors_;
  // namespace -> quota name -> limits
  std::map<std::string, std::map<std::string, std::vector<QuotaLimit>>, std::less<>> quotas_;
};

}  // namespace hami::extender
