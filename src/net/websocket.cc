#include "net/websocket.h"

#include <openssl/evp.h>
#include <strings.h>

#include <algorithm>
#include <cctype>

#include "common/base64.h"
#include "net/http_server.h"

namespace hami::net::ws {
namespace {

// RFC 6455 section 1.3: the GUID appended to the client's key.
constexpr std::string_view kGuid = "258EAFA5-E914-47DA-95CA-C5AB0DC85B11";

std::string Trim(std::string_view s) {
  size_t b = 0, e = s.size();
  while (b < e && std::isspace(static_cast<unsigned char>(s[b]))) ++b;
  while (e > b && std::isspace(static_cast<unsigned char>(s[e - 1]))) --e;
  return std::string(s.substr(b, e - b));
}

// The comma-separated tokens of every header named `name`.
std::vector<std::string> Tokens(const HttpRequest& req, const char* name) {
  std::vector<std::string> out;
  for (const auto& [k, v] : req.headers) {
    if (::strcasecmp(k.c_str(), name) != 0) continue;
    size_t start = 0;
    while (start <= v.size()) {
      size_t comma = v.find(',', start);
      if (comma == std::string::npos) comma = v.size();
      std::string t = Trim(std::string_view(v).substr(start, comma - start));
      if (!t.empty()) out.push_back(std::move(t));
      start = comma + 1;
    }
  }
  return out;
}

bool HasToken(const HttpRequest& req, const char* name, const char* token) {
  for (const std::string& t : Tokens(req, name)) {
    if (::strcasecmp(t.c_str(), token) == 0) return true;
  }
  return false;
}

}  // namespace

bool IsUpgradeRequest(const HttpRequest& req, std::string* why) {
  auto fail = [&](const char* text) {
    if (why != nullptr) *why = text;
    return false;
  };
  if (!HasToken(req, "Upgrade", "websocket")) return fail("no 'Upgrade: websocket' header");
  if (req.method != "GET") return fail("a WebSocket handshake must be a GET");
  if (!HasToken(req, "Connection", "upgrade")) return fail("no 'Connection: Upgrade' header");
  if (Trim(req.Header("Sec-WebSocket-Version")) != "13") {
    return fail("Sec-WebSocket-Version must be 13");
  }
  Result<std::string> key = Base64Decode(Trim(req.Header("Sec-WebSocket-Key")));
  if (!key.ok() || key->size() != 16) {
    return fail("Sec-WebSocket-Key must be 16 bytes in base64");
  }
  return true;
}

std::string AcceptKey(std::string_view client_key) {
  std::string text = Trim(client_key);
  text.append(kGuid);
  unsigned char digest[EVP_MAX_MD_SIZE];
  unsigned int len = 0;
  EVP_Digest(text.data(), text.size(), digest, &len, EVP_sha1(), nullptr);
  return Base64Encode(std::string_view(reinterpret_cast<const char*>(digest), len));
}

std::vector<std::string> OfferedProtocols(const HttpRequest& req) {
  return Tokens(req, "Sec-WebSocket-Protocol");
}

std::string Frame(Opcode op, std::string_view payload, const uint8_t* mask) {
  std::string f;
  f.reserve(payload.size() + 14);
  f.push_back(static_cast<char>(0x80 | op));
  const uint8_t masked = mask != nullptr ? 0x80 : 0;
  const uint64_t n = payload.size();
  if (n < 126) {
    f.push_back(static_cast<char>(masked | n));
  } else if (n <= 0xFFFF) {
    f.push_back(static_cast<char>(masked | 126));
    f.push_back(static_cast<char>(n >> 8));
    f.push_back(static_cast<char>(n & 0xFF));
  } else {
    f.push_back(static_cast<char>(masked | 127));
    for (int shift = 56; shift >= 0; shift -= 8) {
      f.push_back(static_cast<char>((n >> shift) & 0xFF));
    }
  }
  if (mask == nullptr) return f.append(payload);
  f.append(reinterpret_cast<const char*>(mask), 4);
  size_t start = f.size();
  f.append(payload);
  for (size_t i = 0; i < payload.size(); ++i) f[start + i] ^= static_cast<char>(mask[i % 4]);
  return f;
}

std::string ClosePayload(uint16_t code, std::string_view reason) {
  std::string p;
  p.push_back(static_cast<char>(code >> 8));
  p.push_back(static_cast<char>(code & 0xFF));
  p.append(reason.substr(0, 123));  // a control frame carries at most 125 bytes
  return p;
}

bool Reader::Fail(uint16_t code, std::string why) {
  close_code_ = code;
  error_ = std::move(why);
  return false;
}

bool Reader::Feed(std::string* in, std::vector<Message>* out) {
  if (close_code_ != 0) return false;
  size_t pos = 0;
  const std::string& b = *in;
  for (;;) {
    if (b.size() - pos < 2) break;
    const uint8_t b0 = static_cast<uint8_t>(b[pos]), b1 = static_cast<uint8_t>(b[pos + 1]);
    const bool fin = (b0 & 0x80) != 0;
    const auto op = static_cast<Opcode>(b0 & 0x0F);
    const bool masked = (b1 & 0x80) != 0;
    if ((b0 & 0x70) != 0) return Fail(kCloseProtocolError, "reserved bits set (no extension)");
    if (masked != (side_ == Side::kServer)) {
      return Fail(kCloseProtocolError, side_ == Side::kServer ? "a client frame is not masked"
                                                              : "a server frame is masked");
    }
    const bool control = (op & 0x8) != 0;
    if (op != kContinuation && op != kText && op != kBinary && op != kClose && op != kPing &&
        op != kPong) {
      return Fail(kCloseProtocolError, "unknown opcode " + std::to_string(op));
    }
    size_t head = 2;
    uint64_t len = b1 & 0x7F;
    if (len == 126) {
      if (b.size() - pos < 4) break;
      len = (static_cast<uint64_t>(static_cast<uint8_t>(b[pos + 2])) << 8) |
            static_cast<uint8_t>(b[pos + 3]);
      head = 4;
    } else if (len == 127) {
      if (b.size() - pos < 10) break;
      len = 0;
      for (int i = 0; i < 8; ++i) len = (len << 8) | static_cast<uint8_t>(b[pos + 2 + i]);
      head = 10;
      if (len >> 63) return Fail(kCloseProtocolError, "frame length has its top bit set");
    }
    if (control && (!fin || len > 125)) {
      return Fail(kCloseProtocolError, "a control frame is fragmented or longer than 125 bytes");
    }
    const size_t collected = in_message_ ? partial_.payload.size() : 0;
    if (len > max_message_ || collected + len > max_message_) {
      return Fail(kCloseTooBig, "message larger than " + std::to_string(max_message_) + " bytes");
    }
    if (masked) head += 4;
    if (b.size() - pos < head + len) break;  // wait for the rest of the frame
    std::string payload = b.substr(pos + head, static_cast<size_t>(len));
    if (masked) {
      const char* key = b.data() + pos + head - 4;
      for (size_t i = 0; i < payload.size(); ++i) payload[i] ^= key[i % 4];
    }
    pos += head + static_cast<size_t>(len);
    if (control) {
      out->push_back({op, std::move(payload)});
      continue;
    }
    if (op == kContinuation) {
      if (!in_message_) return Fail(kCloseProtocolError, "continuation without a message");
      partial_.payload += payload;
    } else {
      if (in_message_) return Fail(kCloseProtocolError, "new message inside a fragmented one");
      partial_ = {op, std::move(payload)};
      in_message_ = true;
    }
    if (fin) {
      out->push_back(std::move(partial_));
      partial_ = {};
      in_message_ = false;
    }
  }
  in->erase(0, pos);
  return true;
}

}  // namespace hami::net::ws
