// Codec for the node lock annotation `hami.io/mutex.lock`, shared by all vendors.
//
// Value: "<RFC3339 time>,<pod namespace>,<pod name>", e.g.
// "2024-05-01T08:30:00Z,default,gpu-pod". Legacy writers stored the bare time; such a value
// decodes with empty namespace and name (owner unknown). The lock protocol itself (acquire,
// expiry, release) lives with the scheduler; this is only the value format.
//
// Thread safety: pure functions.
#pragma once

#include <string>
#include <string_view>

#include "common/status.h"
#include "device/wire_time.h"

namespace hami::device {

inline constexpr std::string_view kNodeLockAnnotation = "hami.io/mutex.lock";

struct NodeLockValue {
  Timestamp time;
  std::string pod_namespace;  // empty for a legacy value
  std::string pod_name;       // empty for a legacy value

  bool IsLegacy() const { return pod_namespace.empty() && pod_name.empty(); }
  bool HeldBy(std::string_view ns, std::string_view name) const {
    return !IsLegacy() && pod_namespace == ns && pod_name == name;
  }
  friend bool operator==(const NodeLockValue&, const NodeLockValue&) = default;
};

// "<time>,<ns>,<name>", or only "<time>" when both ns and name are empty.
std::string EncodeNodeLock(const NodeLockValue& lock);

// No comma: legacy bare time. Otherwise exactly three comma-separated parts, namespace and name
// non-empty.
Result<NodeLockValue> DecodeNodeLock(std::string_view text);

}  // namespace hami::device
