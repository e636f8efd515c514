#include "net/websocket.h"

#include <gtest/gtest.h>

#include "net/http_server.h"
#include "net/websocket_test_util.h"

namespace hami::net::ws {
namespace {

HttpRequest Handshake() {
  HttpRequest r;
  r.method = "GET";
  r.headers = {{"Upgrade", "websocket"},
               {"Connection", "keep-alive, Upgrade"},
               {"Sec-WebSocket-Version", "13"},
               {"Sec-WebSocket-Key", "dGhlIHNhbXBsZSBub25jZQ=="},
               {"Sec-WebSocket-Protocol", "v5.channel.k8s.io, v4.channel.k8s.io"},
               {"sec-websocket-protocol", "base64.channel.k8s.io"}};
  return r;
}

TEST(WebSocket, AcceptKeyIsTheRfcExample) {
  // RFC 6455 section 1.3's worked example.
  EXPECT_EQ(AcceptKey("dGhlIHNhbXBsZSBub25jZQ=="), "s3pPLMBiTxaQ9kYGzzhZRbK+xOo=");
}

TEST(WebSocket, UpgradeRequestChecks) {
  std::string why;
  EXPECT_TRUE(IsUpgradeRequest(Handshake(), &why)) << why;
  EXPECT_EQ(OfferedProtocols(Handshake()),
            (std::vector<std::string>{"v5.channel.k8s.io", "v4.channel.k8s.io",
                                      "base64.channel.k8s.io"}));
  HttpRequest post = Handshake();
  post.method = "POST";
  EXPECT_FALSE(IsUpgradeRequest(post, &why));
  EXPECT_NE(why.find("GET"), std::string::npos);
  HttpRequest spdy = Handshake();
  spdy.headers.erase("Upgrade");
  spdy.headers.emplace("Upgrade", "SPDY/3.1");
  EXPECT_FALSE(IsUpgradeRequest(spdy, &why));
  HttpRequest old = Handshake();
  old.headers.erase("Sec-WebSocket-Version");
  old.headers.emplace("Sec-WebSocket-Version", "8");
  EXPECT_FALSE(IsUpgradeRequest(old, &why));
  EXPECT_NE(why.find("13"), std::string::npos);
  HttpRequest short_key = Handshake();
  short_key.headers.erase("Sec-WebSocket-Key");
  short_key.headers.emplace("Sec-WebSocket-Key", "c2hvcnQ=");
  EXPECT_FALSE(IsUpgradeRequest(short_key, &why));
}

TEST(WebSocket, FramesRoundTripAtEveryLengthForm) {
  const uint8_t mask[4] = {1, 2, 3, 4};
  for (size_t n : {0u, 1u, 125u, 126u, 65535u, 65536u, 200000u}) {
    std::string payload(n, 'x');
    for (size_t i = 0; i < n; ++i) payload[i] = static_cast<char>(i * 7);
    std::string wire = Frame(kBinary, payload, mask);
    Reader server(Reader::Side::kServer);
    std::vector<Message> out;
    // Byte by byte for the small ones: a partial frame waits.
    if (n <= 126) {
      std::string in;
      for (char c : wire) {
        in.push_back(c);
        ASSERT_TRUE(server.Feed(&in, &out)) << server.error();
      }
      EXPECT_TRUE(in.empty());
    } else {
      ASSERT_TRUE(server.Feed(&wire, &out)) << server.error();
    }
    ASSERT_EQ(out.size(), 1u) << n;
    EXPECT_EQ(out[0].opcode, kBinary);
    EXPECT_EQ(out[0].payload, payload) << n;

    std::string plain = Frame(kText, payload);
    Reader client(Reader::Side::kClient);
    out.clear();
    ASSERT_TRUE(client.Feed(&plain, &out)) << client.error();
    ASSERT_EQ(out.size(), 1u);
    EXPECT_EQ(out[0].payload, payload);
  }
}

TEST(WebSocket, FragmentsJoinAndControlFramesComeBetween) {
  const uint8_t m[4] = {9, 9, 9, 9};
  // "hel" (binary, no FIN), ping, "lo" (continuation, FIN).
  std::string first = Frame(kBinary, "hel", m);
  first[0] = static_cast<char>(kBinary);  // FIN cleared
  std::string wire = first + Frame(kPing, "p", m) + Frame(kContinuation, "lo", m);
  Reader r(Reader::Side::kServer);
  std::vector<Message> out;
  ASSERT_TRUE(r.Feed(&wire, &out)) << r.error();
  ASSERT_EQ(out.size(), 2u);
  EXPECT_EQ(out[0].opcode, kPing);
  EXPECT_EQ(out[0].payload, "p");
  EXPECT_EQ(out[1].opcode, kBinary);
  EXPECT_EQ(out[1].payload, "hello");
}

TEST(WebSocket, ProtocolViolationsAreRefusedWithTheirCloseCode) {
  const uint8_t m[4] = {5, 6, 7, 8};
  struct Case {
    std::string wire;
    Reader::Side side;
    uint16_t code;
    const char* why;
  };
  std::string rsv = Frame(kBinary, "x", m);
  rsv[0] = static_cast<char>(rsv[0] | 0x40);
  std::string long_ping = Frame(kPing, std::string(126, 'p'), m);
  std::string split_ping = Frame(kPing, "p", m);
  split_ping[0] = static_cast<char>(kPing);
  std::string bad_op = Frame(kBinary, "x", m);
  bad_op[0] = static_cast<char>(0x80 | 0x3);
  std::string nested = Frame(kBinary, "a", m);
  nested[0] = static_cast<char>(kBinary);
  nested += Frame(kText, "b", m);
  std::vector<Case> cases = {
      {Frame(kBinary, "x"), Reader::Side::kServer, kCloseProtocolError, "not masked"},
      {Frame(kBinary, "x", m), Reader::Side::kClient, kCloseProtocolError, "masked"},
      {rsv, Reader::Side::kServer, kCloseProtocolError, "reserved"},
      {long_ping, Reader::Side::kServer, kCloseProtocolError, "125"},
      {split_ping, Reader::Side::kServer, kCloseProtocolError, "fragmented"},
      {bad_op, Reader::Side::kServer, kCloseProtocolError, "opcode"},
      {Frame(kContinuation, "x", m), Reader::Side::kServer, kCloseProtocolError, "continuation"},
      {nested, Reader::Side::kServer, kCloseProtocolError, "inside"},
  };
  for (Case& c : cases) {
    Reader r(c.side);
    std::vector<Message> out;
    EXPECT_FALSE(r.Feed(&c.wire, &out)) << c.why;
    EXPECT_EQ(r.close_code(), c.code) << c.why;
    EXPECT_NE(r.error().find(c.why), std::string::npos) << r.error();
    std::string more = Frame(kBinary, "y", m);
    EXPECT_FALSE(r.Feed(&more, &out)) << "a failed reader stays failed";
  }
  Reader small(Reader::Side::kServer, 10);
  std::string big = Frame(kBinary, std::string(11, 'b'), m);
  std::vector<Message> out;
  EXPECT_FALSE(small.Feed(&big, &out));
  EXPECT_EQ(small.close_code(), kCloseTooBig);
  // The limit holds for a message in fragments too, before its bytes arrive.
  Reader frag(Reader::Side::kServer, 10);
  std::string part = Frame(kBinary, std::string(6, 'a'), m);
  part[0] = static_cast<char>(kBinary);
  std::string head_only = Frame(kContinuation, std::string(6, 'a'), m).substr(0, 6);
  std::string wire = part + head_only;
  EXPECT_FALSE(frag.Feed(&wire, &out));
  EXPECT_EQ(frag.close_code(), kCloseTooBig);
}

TEST(WebSocket, ClosePayloadCarriesTheCodeAndAShortReason) {
  std::string p = ClosePayload(kCloseNormal, std::string(300, 'r'));
  ASSERT_EQ(p.size(), 125u);
  EXPECT_EQ(static_cast<uint8_t>(p[0]), 0x03);
  EXPECT_EQ(static_cast<uint8_t>(p[1]), 0xE8);
}

// The server's side of an upgrade: the 101 head, then the handler owns the connection (an echo
// of every message here) and it closes when the handler returns.
TEST(HttpServerUpgrade, TheHandlerOwnsTheConnectionAfter101) {
  HttpServerOptions o;
  auto server = HttpServer::Create(o).value();
  server->Handle("GET", "/echo", [](const HttpRequest& req, HttpResponse& res) {
    if (!IsUpgradeRequest(req)) return res.SetText(400, "upgrade needed\n");
    res.status = 101;
    res.headers = {{"Upgrade", "websocket"},
                   {"Sec-WebSocket-Accept", AcceptKey(req.Header("Sec-WebSocket-Key"))}};
    res.upgrade = [](UpgradedConnection& conn) {
      Reader reader(Reader::Side::kServer);
      std::string in;
      std::vector<Message> msgs;
      for (;;) {
        if (!conn.HasBuffered()) {
          pollfd p{conn.fd(), POLLIN, 0};
          if (::poll(&p, 1, 5000) <= 0) return;
        }
        if (conn.Read(&in) == UpgradedConnection::ReadResult::kEnd) return;
        msgs.clear();
        if (!reader.Feed(&in, &msgs)) return;
        for (const Message& m : msgs) {
          if (m.opcode == kClose) {
            conn.Write(Frame(kClose, m.payload));
            return;
          }
          conn.Write(Frame(kBinary, "echo:" + m.payload));
        }
      }
    };
  });
  int port = server->Start().value();
  testing::WsTestClient c;
  std::string head;
  ASSERT_EQ(c.Connect(port, "/echo", "", &head), 101) << head;
  EXPECT_NE(head.find("Sec-WebSocket-Accept: s3pPLMBiTxaQ9kYGzzhZRbK+xOo="), std::string::npos);
  EXPECT_NE(head.find("Connection: Upgrade"), std::string::npos);
  EXPECT_EQ(head.find("Content-Length"), std::string::npos) << head;
  ASSERT_TRUE(c.SendChannel(7, "ping"));
  ASSERT_TRUE(c.Send(kClose, ClosePayload(kCloseNormal, "")));
  bool closed = false;
  auto got = c.ReadChannelsUntilClose(std::chrono::seconds(5), &closed);
  EXPECT_TRUE(closed);
  EXPECT_EQ(got[static_cast<int>('e')], "cho:\x07ping");
  server->Stop();
}

}  // namespace
}  // namespace hami::net::ws
