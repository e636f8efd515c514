#include "net/http_wire.h"

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "gtest/gtest.h"

namespace hami::net::wire {
namespace {

TEST(HttpWireTest, ParsesRequestLineQueryAndHeaders) {
  RequestHead h;
  ASSERT_TRUE(
      ParseRequestHead("GET /api/v1/pods%2Fx?labelSelector=a%3Db&watch=1&x&y=a+b HTTP/1.1\r\n"
                       "Host: h\r\nAccept-Encoding: br, gzip;q=0.5\r\nX-A:  v  \r\n",
                       &h)
          .ok());
  EXPECT_EQ(h.method, "GET");
  EXPECT_EQ(h.path, "/api/v1/pods/x");
  EXPECT_EQ(h.params.find("labelSelector")->second, "a=b");
  EXPECT_EQ(h.params.find("watch")->second, "1");
  EXPECT_EQ(h.params.find("x")->second, "");
  EXPECT_EQ(h.params.find("y")->second, "a b");
  EXPECT_EQ(h.headers.find("X-A")->second, "v");
  EXPECT_TRUE(h.keep_alive);
  EXPECT_TRUE(h.accepts_gzip);
  EXPECT_FALSE(h.has_length);
  EXPECT_FALSE(h.chunked);
}

TEST(HttpWireTest, ResponseHeadsAreStrictAboutTheStatusLine) {
  ResponseHead h;
  ASSERT_TRUE(ParseResponseHead("HTTP/1.1 201 Created\r\nContent-Type:  application/json \r\n"
                                "X-Odd\r\nConnection: close",
                                &h)
                  .ok());
  EXPECT_EQ(h.status, 201);
  EXPECT_TRUE(h.http11);
  ASSERT_EQ(h.headers.size(), 2u);  // the line without a colon is skipped
  EXPECT_EQ(h.headers[0],
            (std::pair<std::string, std::string>{"content-type", "application/json"}));
  EXPECT_EQ(h.headers[1], (std::pair<std::string, std::string>{"connection", "close"}));
  ASSERT_TRUE(ParseResponseHead("HTTP/1.0 404", &h).ok());
  EXPECT_EQ(h.status, 404);
  EXPECT_FALSE(h.http11);
  EXPECT_TRUE(h.headers.empty());
  for (const char* bad : {"HTTP/1.200 OK", "HTTP/1.1 099 Low", "HTTP/1.1 2000", "HTTP/2 200 OK",
                          "SSH-2.0-OpenSSH", "HTTP/1.1 20x OK", "", "HTTP/1.1 200OK"}) {
    Status s = ParseResponseHead(bad, &h);
    EXPECT_EQ(s.code(), StatusCode::kInvalidArgument) << bad;
  }
}

TEST(HttpWireTest, KeepAliveFollowsVersionAndConnection) {
  RequestHead h;
  ASSERT_TRUE(ParseRequestHead("GET / HTTP/1.0\r\n", &h).ok());
  EXPECT_FALSE(h.keep_alive);
  ASSERT_TRUE(ParseRequestHead("GET / HTTP/1.0\r\nConnection: Keep-Alive\r\n", &h).ok());
  EXPECT_TRUE(h.keep_alive);
  ASSERT_TRUE(ParseRequestHead("GET / HTTP/1.1\r\nConnection: foo, close\r\n", &h).ok());
  EXPECT_FALSE(h.keep_alive);
  ASSERT_TRUE(ParseRequestHead("GET / HTTP/1.1\nHost: x\n", &h).ok());  // bare LF lines
  EXPECT_TRUE(h.keep_alive);
}

TEST(HttpWireTest, BodyFraming) {
  RequestHead h;
  ASSERT_TRUE(ParseRequestHead("POST / HTTP/1.1\r\nContent-Length: 12\r\n", &h).ok());
  EXPECT_TRUE(h.has_length);
  EXPECT_EQ(h.content_length, 12u);
  ASSERT_TRUE(
      ParseRequestHead("POST / HTTP/1.1\r\ncontent-length: 3\r\nContent-Length: 3\r\n", &h).ok());
  ASSERT_TRUE(ParseRequestHead(
                  "POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\nExpect: 100-continue\r\n", &h)
                  .ok());
  EXPECT_TRUE(h.chunked);
  EXPECT_TRUE(h.expect_continue);
  // Smuggling-prone or unsupported framings are refused.
  EXPECT_FALSE(
      ParseRequestHead("POST / HTTP/1.1\r\nContent-Length: 3\r\nContent-Length: 4\r\n", &h).ok());
  EXPECT_FALSE(
      ParseRequestHead("POST / HTTP/1.1\r\nContent-Length: 3\r\nTransfer-Encoding: chunked\r\n", &h)
          .ok());
  EXPECT_FALSE(
      ParseRequestHead("POST / HTTP/1.1\r\nTransfer-Encoding: gzip, chunked\r\n", &h).ok());
  EXPECT_FALSE(ParseRequestHead("POST / HTTP/1.1\r\nContent-Length: -1\r\n", &h).ok());
  EXPECT_FALSE(ParseRequestHead("POST / HTTP/1.1\r\nContent-Length: 1x\r\n", &h).ok());
  EXPECT_FALSE(
      ParseRequestHead("POST / HTTP/1.1\r\nContent-Length: 99999999999999999999999\r\n", &h).ok());
}

TEST(HttpWireTest, MalformedHeadsAreRejected) {
  RequestHead h;
  for (const char* bad : {"", "GET", "GET /", "GET / HTTP/2.0", "GET  / HTTP/1.1",
                          "GET / HTTP/1.1 x", "G(T / HTTP/1.1", "GET http://x/ HTTP/1.1",
                          "GET /\x01 HTTP/1.1", "GET / HTTP/1.1\r\nNo colon here",
                          "GET / HTTP/1.1\r\n: empty name", "GET / HTTP/1.1\r\nA: b\r\n folded",
                          "GET / HTTP/1.1\r\nBad Name: x", "GET / HTTP/1.1\r\nA: b\x01c"}) {
    EXPECT_FALSE(ParseRequestHead(bad, &h).ok()) << bad;
  }
  EXPECT_TRUE(ParseRequestHead("OPTIONS * HTTP/1.1", &h).ok());
  EXPECT_EQ(h.path, "*");
}

TEST(HttpWireTest, GzipAcceptance) {
  RequestHead h;
  ASSERT_TRUE(ParseRequestHead("GET / HTTP/1.1\r\nAccept-Encoding: gzip;q=0\r\n", &h).ok());
  EXPECT_FALSE(h.accepts_gzip);
  ASSERT_TRUE(ParseRequestHead("GET / HTTP/1.1\r\nAccept-Encoding: deflate\r\n", &h).ok());
  EXPECT_FALSE(h.accepts_gzip);
  ASSERT_TRUE(ParseRequestHead("GET / HTTP/1.1\r\nAccept-Encoding: GZIP\r\n", &h).ok());
  EXPECT_TRUE(h.accepts_gzip);
}

TEST(HttpWireTest, PercentDecoding) {
  EXPECT_EQ(PercentDecode("a%20b%zz%4", false), "a b%zz%4");
  EXPECT_EQ(PercentDecode("a+b", false), "a+b");
  EXPECT_EQ(PercentDecode("a+b%2B", true), "a b+");
  EXPECT_EQ(PercentDecode("%", true), "%");
}

TEST(HttpWireTest, PercentEncodingKeepsOnlyUnreservedBytes) {
  EXPECT_EQ(PercentEncode("nvidia-smi_-L.~"), "nvidia-smi_-L.~");
  EXPECT_EQ(PercentEncode("a b/c=d&\xff"), "a%20b%2Fc%3Dd%26%FF");
  const std::string all = [] {
    std::string s;
    for (int c = 0; c < 256; ++c) s.push_back(static_cast<char>(c));
    return s;
  }();
  EXPECT_EQ(PercentDecode(PercentEncode(all), true), all);
}

TEST(HttpWireTest, ChunkedBodiesDecodeAcrossArbitrarySplits) {
  const std::string wire =
      "4;ext=1\r\nWiki\r\n5\r\npedia\r\nE\r\n in\r\n\r\nchunks.\r\n0\r\nT: v\r\n\r\n";
  for (size_t split = 0; split <= wire.size(); ++split) {
    ChunkedDecoder d(1 << 20);
    std::string body;
    size_t used = 0;
    auto s = d.Feed(std::string_view(wire).substr(0, split), &used, &body);
    ASSERT_NE(s, ChunkedDecoder::State::kError) << split << ": " << d.error();
    std::string rest = wire.substr(used);
    if (s != ChunkedDecoder::State::kDone) {
      s = d.Feed(rest, &used, &body);
      ASSERT_EQ(s, ChunkedDecoder::State::kDone) << split;
      EXPECT_EQ(used, rest.size());
    }
    EXPECT_EQ(body, "Wikipedia in\r\n\r\nchunks.") << split;
  }
}

TEST(HttpWireTest, ChunkedErrorsAndLimits) {
  std::string body;
  size_t used = 0;
  ChunkedDecoder bad_size(100);
  EXPECT_EQ(bad_size.Feed("zz\r\n", &used, &body), ChunkedDecoder::State::kError);
  ChunkedDecoder no_crlf(100);
  EXPECT_EQ(no_crlf.Feed("1\r\nab\r\n", &used, &body), ChunkedDecoder::State::kError);
  ChunkedDecoder limit(4);
  body.clear();
  EXPECT_EQ(limit.Feed("3\r\nabc\r\n3\r\ndef\r\n", &used, &body), ChunkedDecoder::State::kError);
  EXPECT_TRUE(limit.too_large());
  ChunkedDecoder huge(100);
  EXPECT_EQ(huge.Feed("ffffffffffffffffff\r\n", &used, &body), ChunkedDecoder::State::kError);
  ChunkedDecoder long_line(100);
  EXPECT_EQ(long_line.Feed(std::string(5000, '1'), &used, &body), ChunkedDecoder::State::kError);
}

TEST(HttpWireTest, ChunkSizeLinesAndContentLengthsAreStrict) {
  uint64_t n = 0;
  for (const auto& [line, want] :
       std::vector<std::pair<std::string, uint64_t>>{{"0", 0},
                                                     {"1a", 26},
                                                     {"FF", 255},
                                                     {"10;ext=1", 16},
                                                     {"10 ;ext", 16},
                                                     {"10\t;x", 16},
                                                     {"ffffffffffffffff", UINT64_MAX}}) {
    EXPECT_TRUE(ParseChunkSizeLine(line, &n)) << line;
    EXPECT_EQ(n, want) << line;
  }
  for (const char* bad : {"", ";x", "0x10", "+10", "-1", " 10", "10 ", "10 x", "1 0", "g",
                          "10000000000000000", "10\r"}) {
    EXPECT_FALSE(ParseChunkSizeLine(bad, &n)) << bad;
  }
  EXPECT_TRUE(ParseContentLength("0", &n));
  EXPECT_EQ(n, 0u);
  EXPECT_TRUE(ParseContentLength("18446744073709551615", &n));
  EXPECT_EQ(n, UINT64_MAX);
  for (const char* bad : {"", "-1", "+1", " 1", "1 ", "0x1", "1e3", "18446744073709551616"}) {
    EXPECT_FALSE(ParseContentLength(bad, &n)) << bad;
  }
  // The server's decoder and head parser use them.
  std::string body;
  size_t used = 0;
  ChunkedDecoder hex_prefix(100);
  EXPECT_EQ(hex_prefix.Feed("0x2\r\nab\r\n0\r\n\r\n", &used, &body), ChunkedDecoder::State::kError);
  RequestHead head;
  EXPECT_FALSE(ParseRequestHead("POST / HTTP/1.1\r\nContent-Length: +5\r\n", &head).ok());
}

TEST(HttpWireTest, ReasonPhrases) {
  EXPECT_STREQ(ReasonPhrase(200), "OK");
  EXPECT_STREQ(ReasonPhrase(410), "Gone");
  EXPECT_STREQ(ReasonPhrase(799), "Unknown");
}

TEST(HttpWireTest, TheHeadEndsAtTheFirstBlankLineWhateverItsLineEnds) {
  size_t sep = 0;
  EXPECT_EQ(FindHeadEnd("GET / HTTP/1.1\r\nA: b\r\n\r\nbody", 0, &sep), 20u);
  EXPECT_EQ(sep, 4u);
  EXPECT_EQ(FindHeadEnd("GET / HTTP/1.1\nA: b\n\nbody", 0, &sep), 19u);
  EXPECT_EQ(sep, 2u);
  // Mixed: a bare-LF blank line before a later CRLF one ends the head there.
  EXPECT_EQ(FindHeadEnd("GET / HTTP/1.1\r\n\nX\r\n\r\n", 0, &sep), 14u);
  EXPECT_EQ(sep, 3u);
  EXPECT_EQ(FindHeadEnd("GET / HTTP/1.1\n\r\nX", 0, &sep), 14u);
  EXPECT_EQ(sep, 3u);
  EXPECT_EQ(FindHeadEnd("GET / HTTP/1.1\r\nA: b\r\n\r", 0, &sep), std::string_view::npos);
}

TEST(HttpWireTest, RequestScanAgreesWithAFreshScanAtEveryArrival) {
  const std::string stream =
      "POST /f HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\n"  // mixed line ends
      "3\r\nabc\r\n0\r\n\r\n";
  for (size_t step = 1; step <= stream.size(); ++step) {
    RequestScan incremental;
    std::string buf;
    bool ready = false;
    for (size_t off = 0; off < stream.size() && !ready; off += step) {
      buf += stream.substr(off, step);
      ready = incremental.Ready(buf, 1024);
      EXPECT_EQ(ready, RequestScan().Ready(buf, 1024)) << "step " << step << " at " << buf.size();
    }
    EXPECT_TRUE(ready);
    EXPECT_EQ(buf.size(), stream.size()) << "ready only once the last chunk arrived";
  }
  // Not ready: a body still owed; ready at once: a body over the limit, a malformed head.
  EXPECT_FALSE(RequestScan().Ready("POST / HTTP/1.1\r\nContent-Length: 5\r\n\r\nab", 1024));
  EXPECT_TRUE(RequestScan().Ready("POST / HTTP/1.1\r\nContent-Length: 5000\r\n\r\n", 1024));
  EXPECT_TRUE(RequestScan().Ready("NOT HTTP\r\n\r\n", 1024));
}

}  // namespace
}  // namespace hami::net::wire
