// Why a node does not fit a pod, kept as counters on the hot path and rendered in upstream's
// format only when a message is needed:
//
//   "1/4 CardInsufficientMemory, 3/4 CardNotHealth"
//
// Each entry is "<devices>/<candidate devices> <Reason>", entries sorted as strings and joined by
// ", ". AllocatedCardsInsufficientRequest counts the devices that did pass (upstream's meaning).
// Node-level failures render as the bare reason ("NodeInsufficientDevice", "node unregistered").
//
// Thread safety: plain values.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <string_view>

namespace hami::scheduler {

// Per-device reasons, upstream's strings.
enum class CardReason : uint8_t {
  kCardNotHealth,
  kCardCordoned,
  kCardTypeMismatch,
  kCardUuidMismatch,
  kCardTimeSlicingExhausted,
  kExclusiveDeviceAllocateConflict,
  kCardInsufficientMemory,
  kCardInsufficientCore,
  kCardComputeUnitsExhausted,
  kCardMigTopologyInfeasible,
  kCardPartitionSizeMismatch,     // a card shared only by equal partitions holds another size
  kCardNotFoundCustomFilterRule,  // the vendor keeps a pod's containers on one device
  kCardAppClassMismatch,          // the device's tasks are of an app class this one may not join
  kCardQosPolicyMismatch,         // the device's tasks run under another QoS policy
  kNumaNotFit,
  kAllocatedCardsInsufficientRequest,
  kCount,
};
inline constexpr size_t kCardReasonCount = static_cast<size_t>(CardReason::kCount);
std::string_view CardReasonName(CardReason r);

inline constexpr std::string_view kNodeInsufficientDeviceText = "NodeInsufficientDevice";
inline constexpr std::string_view kNodeUnregisteredText = "node unregistered";
inline constexpr std::string_view kResourceQuotaNotFitText = "ResourceQuotaNotFit";

struct NodeFailure {
  enum class Kind : uint8_t {
    kNone,                    // the node fits
    kCards,                   // per-device reasons in `counts`, out of `total` candidates
    kNodeInsufficientDevice,  // fewer devices of the vendor than requested
    kNodeUnregistered,        // no registration known for the node
    kResourceQuota,           // the placement here would exceed the namespace's quota
  };
  Kind kind = Kind::kNone;
  uint16_t total = 0;
  int16_t container = -1;  // container index (init first) that failed, -1 for node-level kinds
  std::array<uint16_t, kCardReasonCount> counts{};

  void Add(CardReason r, uint16_t n = 1) { counts[static_cast<size_t>(r)] += n; }
  uint16_t Count(CardReason r) const { return counts[static_cast<size_t>(r)]; }
  std::string ToString() const;
};

}  // namespace hami::scheduler
