// HTTP/1.1 request parsing for the project's server (http_server.cc): the request line and
// header block, percent-decoding, query strings. Pure functions over bytes, so the fuzz target
// and unit tests reach them without a socket.
//
// What is accepted: "METHOD SP origin-form SP HTTP/1.x" (or "*" for OPTIONS), header lines
// "Name: value" with optional whitespace around the value, CRLF or bare LF line ends. Rejected
// (the server answers 400 and closes): anything else on the request line, header names that are
// not tokens, obsolete line folding, control characters in values, a request carrying both
// Content-Length and Transfer-Encoding, a transfer coding other than "chunked", an unparsable
// or repeated-and-different Content-Length.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "common/status.h"

namespace hami::net::wire {

struct RequestHead {
  std::string method;
  std::string path;  // percent-decoded, without the query
  std::multimap<std::string, std::string> params;
  std::multimap<std::string, std::string> headers;  // names as sent
  int minor_version = 1;                            // HTTP/1.<minor>
  bool chunked = false;                             // Transfer-Encoding: chunked
  bool has_length = false;
  uint64_t content_length = 0;
  bool expect_continue = false;  // Expect: 100-continue
  bool keep_alive = true;        // from the version and the Connection header
  bool accepts_gzip = false;     // Accept-Encoding lists gzip (q > 0)
};

// Parses `head`: the bytes before the blank line that ends the header block (the request line,
// then header lines). InvalidArgument with a short reason on malformed input.
Status ParseRequestHead(std::string_view head, RequestHead* out);

// A response's status line and header fields, as the API client reads them.
struct ResponseHead {
  int status = 0;       // 100..999
  bool http11 = false;  // HTTP/1.1 (keeps the connection by default); else HTTP/1.0
  // Names lower-cased, values without surrounding blanks, in order; lines without a colon are
  // skipped.
  std::vector<std::pair<std::string, std::string>> headers;
};

// Parses a response head (the bytes before the blank line, lines ending in CRLF). The status
// line must be "HTTP/1.<digit> <three digits, not starting with 0>" then nothing or a space and
// a reason. InvalidArgument naming the status line (its first 80 bytes) otherwise.
Status ParseResponseHead(std::string_view head, ResponseHead* out);

// %XX sequences decoded; with `plus_as_space` (query strings) '+' becomes ' '. Malformed escapes
// are kept literally.
std::string PercentDecode(std::string_view s, bool plus_as_space);
// Every byte but the unreserved ones (letters, digits, - _ . ~) as %XX: a query value or a path
// segment.
std::string PercentEncode(std::string_view s);

// Decodes "a=1&b=&c" into params (values decoded, keys too).
void ParseQuery(std::string_view query, std::multimap<std::string, std::string>* params);

// A Content-Length value: 1*DIGIT that fits in 64 bits; no sign, no spaces, no other base.
bool ParseContentLength(std::string_view text, uint64_t* length);

// A chunk-size line (its CRLF removed), RFC 9112 section 7.1: 1*HEXDIG, then nothing, or
// optional spaces or tabs and a ";" that starts the (ignored) extensions. "0x", signs, leading
// spaces, sizes past 64 bits and anything else after the digits are refused. Both the server's
// ChunkedDecoder and the API client's response reader use it.
bool ParseChunkSizeLine(std::string_view line, uint64_t* size);

// Incremental decoder for a chunked request body. Feed() consumes what it can from `in` and
// reports how many bytes it used; the decoded data is appended to *body.
class ChunkedDecoder {
 public:
  enum class State { kMore, kDone, kError };
  explicit ChunkedDecoder(uint64_t max_body) : max_body_(max_body) {}
  State Feed(std::string_view in, size_t* used, std::string* body);
  // Why the last Feed returned kError.
  const std::string& error() const { return error_; }
  // True when the error was the body limit (413 rather than 400).
  bool too_large() const { return too_large_; }

 private:
  enum class Phase { kSize, kData, kDataEnd, kTrailer, kDone };
  uint64_t max_body_;
  Phase phase_ = Phase::kSize;
  uint64_t remaining_ = 0;
  std::string line_;  // a size or trailer line being collected
  size_t trailer_bytes_ = 0;
  std::string error_;
  bool too_large_ = false;
};

// Where the header block in `buf` ends: the first empty line, whatever mix of CRLF and bare LF
// ends it and the line before. Returns its offset (the head is buf[0, end)) and sets *sep to the
// bytes from there to the body; npos when there is none yet. `from` skips bytes already searched
// (pass up to 3 before the old end of the buffer: a blank line may straddle it).
size_t FindHeadEnd(std::string_view buf, size_t from, size_t* sep);

// The largest request head (request line and headers) a server reads.
inline constexpr size_t kMaxHeadBytes = 64 * 1024;

// Whether a connection's buffer holds a whole request (head and body), checked as bytes
// arrive: call Ready() with the whole buffer each time it grew (the same buffer, only ever
// appended to). The head is searched from where the last search stopped and a chunked body is
// fed to a decoder once, so a slow request costs O(its size), not O(size^2). "Ready" also covers
// requests the server will refuse (malformed head, head or body over the limits) and a head that
// asks for 100-continue before its body (the server answers those at once). One scan per
// request: start a new one for the next.
class RequestScan {
 public:
  bool Ready(std::string_view buf, uint64_t max_body_bytes);
  // Whether the head of the request being collected is complete (the body deadline applies).
  bool HeadComplete() const { return head_end_ != std::string::npos; }

 private:
  size_t scanned_ = 0;
  size_t head_end_ = std::string::npos;
  size_t fed_ = 0;
  bool chunked_ = false;
  uint64_t need_ = 0;
  std::unique_ptr<ChunkedDecoder> decoder_;
};

// The reason phrase of a status code ("OK", "Not Found", ...; "Unknown" for others).
const char* ReasonPhrase(int status);

}  // namespace hami::net::wire
