// Fuzzes the node lock value codec (`hami.io/mutex.lock`) and the RFC 3339 / DateTime parsers.
#include <stddef.h>
#include <stdint.h>

#include <string_view>

#include "device/node_lock.h"
#include "device/wire_time.h"

using namespace hami::device;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view text(reinterpret_cast<const char*>(data), size);
  hami::Result<NodeLockValue> lock = DecodeNodeLock(text);
  if (lock.ok()) {
    hami::Result<NodeLockValue> again = DecodeNodeLock(EncodeNodeLock(*lock));
    if (!again.ok()) __builtin_trap();
    if (again->time.unix_seconds != lock->time.unix_seconds ||
        again->time.utc_offset_seconds != lock->time.utc_offset_seconds ||
        again->pod_namespace != lock->pod_namespace || again->pod_name != lock->pod_name) {
      __builtin_trap();
    }
  }
  hami::Result<CivilTime> t = ParseDateTime(text);
  if (t.ok()) {
    if (FormatDateTime(*t) != text) __builtin_trap();
    if (UnixToCivil(CivilToUnix(*t, 3600), 3600) != *t) __builtin_trap();
  }
  return 0;
}
