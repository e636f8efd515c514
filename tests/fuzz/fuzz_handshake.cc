// Fuzzes handshake decoding: total (never fails, never crashes); a Requesting stamp re-encodes
// to the same state and time.
#include <stddef.h>
#include <stdint.h>

#include <string_view>

#include "device/handshake.h"

using namespace hami::device;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view text(reinterpret_cast<const char*>(data), size);
  Handshake h = DecodeHandshake(text);
  if (h.state == HandshakeState::kAbsent && !text.empty()) __builtin_trap();
  if (h.state == HandshakeState::kRequesting && h.time) {
    Handshake again = DecodeHandshake(EncodeHandshakeRequesting(*h.time));
    if (again != h) __builtin_trap();
  }
  return 0;
}
