#include "scheduler/fit_reason.h"

#include <algorithm>
#include <vector>

namespace hami::scheduler {

std::string_view CardReasonName(CardReason r) {
  switch (r) {
    case CardReason::kCardNotHealth:
      return "CardNotHealth";
    case CardReason::kCardCordoned:
      return "CardCordoned";
    case CardReason::kCardPartitionSizeMismatch:
      return "CardPartitionSizeMismatch";
    case CardReason::kCardNotFoundCustomFilterRule:
      return "CardNotFoundCustomFilterRule";
    case CardReason::kCardAppClassMismatch:
      return "CardAppClassMismatch";
    case CardReason::kCardQosPolicyMismatch:
      return "CardQosPolicyMismatch";
    case CardReason::kCardTypeMismatch:
      return "CardTypeMismatch";
    case CardReason::kCardUuidMismatch:
      return "CardUuidMismatch";
    case CardReason::kCardTimeSlicingExhausted:
      return "CardTimeSlicingExhausted";
    case CardReason::kExclusiveDeviceAllocateConflict:
      return "ExclusiveDeviceAllocateConflict";
    case CardReason::kCardInsufficientMemory:
      return "CardInsufficientMemory";
    case CardReason::kCardInsufficientCore:
      return "CardInsufficientCore";
    case CardReason::kCardComputeUnitsExhausted:
      return "CardComputeUnitsExhausted";
    case CardReason::kCardMigTopologyInfeasible:
      return "CardMigTopologyInfeasible";
    case CardReason::kNumaNotFit:
      return "NumaNotFit";
    case CardReason::kAllocatedCardsInsufficientRequest:
      return "AllocatedCardsInsufficientRequest";
    case CardReason::kCount:
      break;
  }
  return "Unknown";
}

std::string NodeFailure::ToString() const {
  switch (kind) {
    case Kind::kNone:
      return "";
    case Kind::kNodeInsufficientDevice:
      return std::string(kNodeInsufficientDeviceText);
    case Kind::kNodeUnregistered:
      return std::string(kNodeUnregisteredText);
    case Kind::kResourceQuota:
      return std::string(kResourceQuotaNotFitText);
    case Kind::kCards:
      break;
  }
  std::vector<std::string> entries;
  for (size_t i = 0; i < kCardReasonCount; ++i) {
    if (counts[i] == 0) continue;
    entries.push_back(std::to_string(counts[i]) + "/" + std::to_string(total) + " " +
                      std::string(CardReasonName(static_cast<CardReason>(i))));
  }
  std::sort(entries.begin(), entries.end());
  std::string out;
  for (const std::string& e : entries) {
    if (!out.empty()) out += ", ";
    out += e;
  }
  return out;
}

}  // namespace hami::scheduler
