#include "device/node_lock.h"

#include "device/text_util.h"

namespace hami::device {

std::string EncodeNodeLock(const NodeLockValue& lock) {
  std::string out = FormatRfc3339(lock.time);
  if (!lock.IsLegacy()) {
    out += ',';
    out += lock.pod_namespace;
    out += ',';
    out += lock.pod_name;
  }
  return out;
}

Result<NodeLockValue> DecodeNodeLock(std::string_view text) {
  NodeLockValue lock;
  std::vector<std::string_view> parts = text::Split(text, ',');
  if (parts.size() != 1 && parts.size() != 3) {
    return InvalidArgumentError("node lock: expected \"<time>,<namespace>,<name>\", got " +
                                text::Quote(text));
  }
  Result<Timestamp> t = ParseRfc3339(parts[0]);
  if (!t.ok()) return t.status().WithContext("node lock time");
  lock.time = *t;
  if (parts.size() == 3) {
    if (parts[1].empty() || parts[2].empty()) {
      return InvalidArgumentError("node lock: empty pod namespace or name in " + text::Quote(text));
    }
    lock.pod_namespace = std::string(parts[1]);
    lock.pod_name = std::string(parts[2]);
  }
  return lock;
}

}  // namespace hami::device
