// Fuzzes ws::Reader, which reads the frames a WebSocket peer sends (kubectl exec's stream on the
// simulated kubelet and API server). The input's first byte picks the side (server or client
// reader) and the size of the pieces the rest arrives in. Properties:
//   - reading in pieces gives the same messages and the same verdict as reading at once;
//   - a refusal always has a reason and a close code of 1002 or 1009;
//   - every message is within the size limit, and a control message is at most 125 bytes;
//   - re-framing the messages and reading them again gives them back unchanged.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <vector>

#include "net/websocket.h"

using hami::net::ws::Frame;
using hami::net::ws::Message;
using hami::net::ws::Reader;

namespace {

constexpr size_t kLimit = 4096;

bool ReadAll(Reader::Side side, const std::string& input, size_t step,
             std::vector<Message>* out, Reader* reader) {
  std::string buf;
  for (size_t off = 0; off < input.size();) {
    size_t n = std::min(step, input.size() - off);
    buf.append(input, off, n);
    off += n;
    if (!reader->Feed(&buf, out)) return false;
  }
  (void)side;
  return true;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 1 || size > 64 * 1024) return 0;
  const Reader::Side side = (data[0] & 1) ? Reader::Side::kServer : Reader::Side::kClient;
  const size_t step = 1 + (data[0] >> 1);
  std::string input(reinterpret_cast<const char*>(data) + 1, size - 1);

  Reader whole(side, kLimit), pieces(side, kLimit);
  std::vector<Message> a, b;
  std::string copy = input;
  bool ok_whole = whole.Feed(&copy, &a);
  bool ok_pieces = ReadAll(side, input, step, &b, &pieces);
  if (ok_whole != ok_pieces) std::abort();
  if (!ok_whole) {
    if (whole.error().empty() || pieces.error().empty()) std::abort();
    if (whole.close_code() != 1002 && whole.close_code() != 1009) std::abort();
    // Messages completed before the violation may differ in number (a piece may stop earlier),
    // but never in content.
    for (size_t i = 0; i < std::min(a.size(), b.size()); ++i) {
      if (a[i].opcode != b[i].opcode || a[i].payload != b[i].payload) std::abort();
    }
    return 0;
  }
  if (a.size() != b.size()) std::abort();
  for (size_t i = 0; i < a.size(); ++i) {
    if (a[i].opcode != b[i].opcode || a[i].payload != b[i].payload) std::abort();
    if (a[i].payload.size() > kLimit) std::abort();
    if ((a[i].opcode & 0x8) != 0 && a[i].payload.size() > 125) std::abort();
  }
  // Round trip: frame every message as the other side would and read it back.
  const uint8_t mask[4] = {data[0], 0x5a, 0xa5, 0x3c};
  std::string wire;
  for (const Message& m : a) {
    wire += Frame(m.opcode, m.payload, side == Reader::Side::kServer ? mask : nullptr);
  }
  Reader again(side, kLimit);
  std::vector<Message> c;
  if (!again.Feed(&wire, &c) || !wire.empty() || c.size() != a.size()) std::abort();
  for (size_t i = 0; i < a.size(); ++i) {
    if (c[i].opcode != a[i].opcode || c[i].payload != a[i].payload) std::abort();
  }
  return 0;
}
