// Writing the HTTP server's answers onto a Connection: the status line and headers (framing is
// the server's: handler-set Content-Length, Transfer-Encoding and Connection are dropped), then
// a plain body (gzipped when it is large, compressible and the client accepts gzip), a chunked
// stream run by the handler, or a 101 hand-over to the handler's upgrade function.
//
//   AnswerFraming framing{.head_only = req.method == "HEAD", .keep = true};
//   if (!WriteResponse(conn, res, framing)) return;  // the connection is to be closed
//
// Thread safety: as Connection; each call runs on the thread that owns the connection.
#pragma once

#include <string>

#include "net/http_connection.h"
#include "net/http_server.h"

namespace hami::net {

// How one answer goes out, from its request and the state of its connection.
struct AnswerFraming {
  bool head_only = false;     // a HEAD request: the head without the body
  bool accepts_gzip = false;  // the request's Accept-Encoding lists gzip
  bool keep = false;          // the connection stays open after this answer
  // Another request is already buffered (pipelining): a plain answer may wait to leave together
  // with the next one (Connection::Queue).
  bool more = false;
};

// Sends `res` (its stream or upgrade function runs here, on the calling thread). False when the
// connection must be dropped: a failed write, a broken stream, and always after a 101 answer.
bool WriteResponse(Connection& conn, HttpResponse& res, const AnswerFraming& framing);

// Answers an unreadable or refused request with `status` and `why` (plain text) and lingers so
// the client can read it; the caller then closes the connection.
void Reject(Connection& conn, int status, const std::string& why);

}  // namespace hami::net
