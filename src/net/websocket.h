// WebSocket (RFC 6455) pieces for the servers that take over a connection after a 101 answer
// (HttpResponse::upgrade): the opening handshake's checks and accept key, frame encoding, and an
// incremental frame reader for untrusted input (fuzzed: tests/fuzz/fuzz_websocket.cc).
//
//   if (!ws::IsUpgradeRequest(req)) ... 400
//   std::string accept = ws::AcceptKey(req.Header("Sec-WebSocket-Key"));
//   ws::Reader reader(ws::Reader::Side::kServer);
//   reader.Feed(&bytes, &messages);            // whole messages out, control frames included
//   conn.Write(ws::Frame(ws::kBinary, data));  // a server's frames are not masked
//
// No extensions (permessage-deflate is never agreed to), so RSV bits must be zero.
//
// Thread safety: the free functions are pure; a Reader belongs to one thread.
#pragma once

#include <stdint.h>

#include <string>
#include <string_view>
#include <vector>

namespace hami::net {
struct HttpRequest;
}

namespace hami::net::ws {

enum Opcode : uint8_t {
  kContinuation = 0x0,
  kText = 0x1,
  kBinary = 0x2,
  kClose = 0x8,
  kPing = 0x9,
  kPong = 0xA,
};

// Close codes used here (RFC 6455 section 7.4.1).
constexpr uint16_t kCloseNormal = 1000;
constexpr uint16_t kCloseGoingAway = 1001;
constexpr uint16_t kCloseProtocolError = 1002;
constexpr uint16_t kCloseTooBig = 1009;
constexpr uint16_t kCloseInternalError = 1011;

// A GET with `Upgrade: websocket`, a `Connection` header naming `upgrade`, version 13 and a key.
// On false, *why (if given) says what is missing.
bool IsUpgradeRequest(const HttpRequest& req, std::string* why = nullptr);

// Sec-WebSocket-Accept for a client's Sec-WebSocket-Key: base64(SHA-1(key + the RFC's GUID)).
std::string AcceptKey(std::string_view client_key);

// The subprotocols a client offers (every Sec-WebSocket-Protocol header, comma separated), in
// its order of preference.
std::vector<std::string> OfferedProtocols(const HttpRequest& req);

// One frame, FIN set. `mask` (4 bytes) masks the payload, as a client must; servers pass none.
std::string Frame(Opcode op, std::string_view payload, const uint8_t* mask = nullptr);
// A close frame's payload: the code, then a reason (cut to fit a control frame).
std::string ClosePayload(uint16_t code, std::string_view reason);

struct Message {
  Opcode opcode = kBinary;  // kText or kBinary for data, else the control frame's opcode
  std::string payload;      // unmasked; a fragmented message joined
};

class Reader {
 public:
  // A server's reader requires masked frames (as RFC 6455 says clients must send); a client's
  // refuses them.
  enum class Side { kServer, kClient };
  explicit Reader(Side side, size_t max_message = 16u << 20)
      : side_(side), max_message_(max_message) {}

  // Consumes whole frames from the front of *in and appends every completed message to *out
  // (control frames, which may come between a message's fragments, as they complete). A partial
  // frame stays in *in. False on a protocol violation: error() and close_code() say which, and
  // the connection should be closed with that code.
  bool Feed(std::string* in, std::vector<Message>* out);

  const std::string& error() const { return error_; }
  uint16_t close_code() const { return close_code_; }

 private:
  bool Fail(uint16_t code, std::string why);

  Side side_;
  size_t max_message_;
  bool in_message_ = false;  // a fragmented data message is being collected
  Message partial_;
  std::string error_;
  uint16_t close_code_ = 0;
};

}  // namespace hami::net::ws
