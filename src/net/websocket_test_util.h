// For tests: a minimal blocking WebSocket client over a plain TCP connection to 127.0.0.1.
#pragma once

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <map>
#include <string>
#include <vector>

#include "net/websocket.h"

namespace hami::net::testing {

class WsTestClient {
 public:
  ~WsTestClient() {
    if (fd_ >= 0) ::close(fd_);
  }
  // Sends the handshake for `target` (path and query) offering `protocols`; returns the status
  // line's code (101 when switched), the head in *head.
  int Connect(int port, const std::string& target, const std::string& protocols,
              std::string* head = nullptr) {
    fd_ = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_port = htons(static_cast<uint16_t>(port));
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (::connect(fd_, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0) return -1;
    std::string req = "GET " + target +
                      " HTTP/1.1\r\nHost: 127.0.0.1\r\nUpgrade: websocket\r\n"
                      "Connection: Upgrade\r\nSec-WebSocket-Version: 13\r\n"
                      "Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n";
    if (!protocols.empty()) req += "Sec-WebSocket-Protocol: " + protocols + "\r\n";
    req += "\r\n";
    if (!SendAll(req)) return -1;
    size_t end;
    while ((end = buf_.find("\r\n\r\n")) == std::string::npos) {
      if (!ReadSome(5000)) return -1;
    }
    std::string h = buf_.substr(0, end + 4);
    buf_.erase(0, end + 4);
    if (head != nullptr) *head = h;
    return h.size() > 12 ? std::stoi(h.substr(9, 3)) : -1;
  }
  bool Send(ws::Opcode op, const std::string& payload) {
    const uint8_t mask[4] = {0x12, 0x34, 0x56, 0x78};
    return SendAll(ws::Frame(op, payload, mask));
  }
  bool SendChannel(uint8_t channel, const std::string& data) {
    return Send(ws::kBinary, std::string(1, static_cast<char>(channel)) + data);
  }
  // Reads messages until a close frame (answered) or the end of the connection, at most
  // `timeout`; binary messages are collected per channel byte.
  std::map<int, std::string> ReadChannelsUntilClose(std::chrono::milliseconds timeout,
                                                    bool* closed = nullptr) {
    std::map<int, std::string> by_channel;
    auto until = std::chrono::steady_clock::now() + timeout;
    std::vector<ws::Message> msgs;
    if (closed != nullptr) *closed = false;
    while (std::chrono::steady_clock::now() < until) {
      msgs.clear();
      if (!reader_.Feed(&buf_, &msgs)) return by_channel;
      for (ws::Message& m : msgs) {
        if (m.opcode == ws::kClose) {
          if (closed != nullptr) *closed = true;
          Send(ws::kClose, m.payload.substr(0, 2));
          return by_channel;
        }
        if (m.opcode == ws::kBinary && !m.payload.empty()) {
          by_channel[static_cast<uint8_t>(m.payload[0])] += m.payload.substr(1);
        }
      }
      if (eof_) return by_channel;
      ReadSome(100);
    }
    return by_channel;
  }
  std::string& buffered() { return buf_; }

 private:
  bool SendAll(const std::string& s) {
    size_t off = 0;
    while (off < s.size()) {
      ssize_t n = ::send(fd_, s.data() + off, s.size() - off, MSG_NOSIGNAL);
      if (n <= 0) return false;
      off += static_cast<size_t>(n);
    }
    return true;
  }
  bool ReadSome(int timeout_ms) {
    pollfd p{fd_, POLLIN, 0};
    if (::poll(&p, 1, timeout_ms) <= 0) return false;
    char chunk[16384];
    ssize_t n = ::recv(fd_, chunk, sizeof chunk, 0);
    if (n <= 0) {
      eof_ = true;
      return false;
    }
    buf_.append(chunk, static_cast<size_t>(n));
    return true;
  }

  int fd_ = -1;
  bool eof_ = false;
  std::string buf_;
  ws::Reader reader_{ws::Reader::Side::kClient};
};

}  // namespace hami::net::testing
