#include "net/http_exchange.h"

#include <algorithm>
#include <string_view>
#include <utility>

namespace hami::net {
namespace {

// Whether `buf` holds a whole request (or one the server refuses at once).
bool WholeRequest(const std::string& buf, size_t max_body_bytes) {
  return wire::RequestScan().Ready(buf, max_body_bytes);
}

// Writes an answer; true while the connection carries on. Closing on our side (request limit,
// shutting down) while pipelined requests may still be arriving: the client's unread bytes are
// drained first, so the close does not reset the connection before the answers are read.
bool SendAnswer(Connection& conn, HttpResponse& res, const AnswerFraming& framing,
                bool client_keep_alive) {
  if (!WriteResponse(conn, res, framing)) return false;
  if (framing.keep) return true;
  if (client_keep_alive) conn.LingerBeforeClose();
  return false;
}

}  // namespace

bool WriteDeferredAnswer(Connection& conn, PendingAnswer& pending,
                         const std::atomic<bool>& running) {
  HttpResponse res = pending.responder->Wait();  // already sent: it returns at once
  res.deferred.reset();
  AnswerFraming framing = pending.framing;
  framing.keep = framing.keep && running.load(std::memory_order_relaxed);
  framing.more = framing.keep && !conn.buf().empty();
  return SendAnswer(conn, res, framing, pending.client_keep_alive);
}

Exchange::Outcome Exchange::ServeWhileReady(bool whole_request,
                                            std::unique_ptr<PendingAnswer>* deferred) {
  bool handed_whole = whole_request;
  while (ctx_.running.load(std::memory_order_relaxed)) {
    if (!std::exchange(handed_whole, false)) {
      if (std::optional<Outcome> wait = WaitForWholeRequest()) return *wait;
    }
    if (std::optional<Outcome> done = ServeOne(deferred)) return *done;
  }
  return Outcome::kClose;
}

void Exchange::ServeUntilClosed() {
  while (ctx_.running.load(std::memory_order_relaxed) && !ServeOne(nullptr)) {
  }
}

std::optional<Exchange::Outcome> Exchange::WaitForWholeRequest() {
  const std::string& buf = conn_.buf();
  const size_t max_body = ctx_.options.max_body_bytes;
  if (WholeRequest(buf, max_body)) return std::nullopt;
  // Answers held back for pipelining leave before the connection waits for more.
  if (!conn_.Flush()) return Outcome::kClose;
  // A busy client's next request usually follows within a moment (kube-scheduler's bind after
  // its filter): wait that moment here rather than pay the trip through the reactor (an epoll
  // round, two thread wake-ups) for it. Then the reactor takes over.
  if (ctx_.options.keep_alive_linger.count() <= 0) return Outcome::kPark;
  Connection::Io io = conn_.ReadOnce();  // waits up to the linger (SO_RCVTIMEO)
  if (io == Connection::Io::kClosed || io == Connection::Io::kEof) return Outcome::kClose;
  if (!WholeRequest(buf, max_body)) return Outcome::kPark;  // none or part of one
  return std::nullopt;
}

std::optional<Exchange::Outcome> Exchange::ServeOne(std::unique_ptr<PendingAnswer>* deferred) {
  wire::RequestHead head;
  HttpRequest req;
  if (!ReadRequest(&head, &req)) return Outcome::kClose;
  HttpResponse res;
  ctx_.router.Serve(req, res);
  ++served_;
  AnswerFraming framing;
  framing.head_only = req.method == "HEAD";
  framing.accepts_gzip = head.accepts_gzip;
  framing.keep = head.keep_alive && served_ < ctx_.options.keep_alive_max_requests &&
                 ctx_.running.load(std::memory_order_relaxed);
  if (res.deferred && deferred != nullptr) {
    auto pending = std::make_unique<PendingAnswer>();
    pending->framing = framing;
    pending->client_keep_alive = head.keep_alive;
    pending->responder = std::move(res.deferred);
    *deferred = std::move(pending);
    // Answers held back for pipelining leave now, not after the deferred one.
    return conn_.Flush() ? Outcome::kDefer : Outcome::kClose;
  }
  if (res.deferred) res = res.deferred->Wait();  // no worker to free on this path
  // Another request already buffered (pipelining): its answer will follow this one.
  framing.more = framing.keep && !conn_.buf().empty();
  if (!SendAnswer(conn_, res, framing, head.keep_alive)) return Outcome::kClose;
  return std::nullopt;
}

bool Exchange::ReadRequest(wire::RequestHead* head, HttpRequest* req) {
  std::string& buf = conn_.buf();
  size_t end = 0, sep = 0;
  MonoTime deadline;
  if (!ReadHead(&end, &sep, &deadline)) return false;
  Status parsed = wire::ParseRequestHead(std::string_view(buf).substr(0, end), head);
  if (!parsed.ok()) {
    Reject(conn_, 400, "bad request: " + parsed.message());
    return false;
  }
  size_t consumed = end + sep;
  if (!ReadBody(*head, &consumed, deadline, &req->body)) return false;
  if (consumed >= buf.size()) {
    buf.clear();
  } else {
    buf.erase(0, consumed);  // a pipelined next request stays
  }
  req->method = std::move(head->method);
  req->path = std::move(head->path);
  req->params = std::move(head->params);
  req->headers = std::move(head->headers);
  req->remote_addr = peer_;
  return true;
}

// The head: its first byte within the keep-alive timeout, then all of it within the read
// timeout. On success the head is buf()[0, *end) and the body starts at *end + *sep.
bool Exchange::ReadHead(size_t* end, size_t* sep, MonoTime* deadline) {
  const HttpServerOptions& o = ctx_.options;
  std::string& buf = conn_.buf();
  bool begun = !buf.empty();
  *deadline = ctx_.clock.Now() + (begun ? o.read_timeout : o.keep_alive_timeout);
  size_t scanned = 0;
  for (;;) {
    *end = wire::FindHeadEnd(buf, scanned > 3 ? scanned - 3 : 0, sep);
    if (*end != std::string::npos || buf.size() > wire::kMaxHeadBytes) break;
    scanned = buf.size();
    // Closed, idle timeout, stop or a stalled head.
    if (!conn_.Fill(*deadline)) return false;
    if (!begun) {
      begun = true;
      *deadline = ctx_.clock.Now() + o.read_timeout;
    }
  }
  // Over the cap: no end within it yet, or an end found only past it.
  if (*end == std::string::npos || *end > wire::kMaxHeadBytes) {
    Reject(conn_, 431, "request header block larger than 64 KiB");
    return false;
  }
  return true;
}

bool Exchange::ReadBody(const wire::RequestHead& head, size_t* consumed, MonoTime deadline,
                        std::string* body) {
  if (!head.chunked && !(head.has_length && head.content_length > 0)) return true;
  const size_t max_body = ctx_.options.max_body_bytes;
  if (head.has_length && head.content_length > max_body) {
    Reject(conn_, 413, "request body larger than " + std::to_string(max_body) + " bytes");
    return false;
  }
  if (head.expect_continue && conn_.buf().size() == *consumed) {
    if (!conn_.Send({"HTTP/1.1 100 Continue\r\n\r\n"})) return false;
  }
  if (head.chunked) return ReadChunkedBody(consumed, deadline, body);
  return ReadSizedBody(static_cast<size_t>(head.content_length), consumed, deadline, body);
}

bool Exchange::ReadChunkedBody(size_t* consumed, MonoTime deadline, std::string* body) {
  std::string& buf = conn_.buf();
  wire::ChunkedDecoder decoder(ctx_.options.max_body_bytes);
  for (;;) {
    size_t used = 0;
    auto state = decoder.Feed(std::string_view(buf).substr(*consumed), &used, body);
    *consumed += used;
    if (state == wire::ChunkedDecoder::State::kDone) return true;
    if (state == wire::ChunkedDecoder::State::kError) {
      Reject(conn_, decoder.too_large() ? 413 : 400, "bad request body: " + decoder.error());
      return false;
    }
    buf.erase(0, *consumed);
    *consumed = 0;
    if (!conn_.Fill(deadline)) return false;
    deadline = ctx_.clock.Now() + ctx_.options.read_timeout;  // a body may take long while it moves
  }
}

bool Exchange::ReadSizedBody(size_t need, size_t* consumed, MonoTime deadline,
                             std::string* body) {
  std::string& buf = conn_.buf();
  while (buf.size() - *consumed < need) {
    size_t missing = need - (buf.size() - *consumed);
    if (!conn_.Fill(deadline, std::min<size_t>(std::max<size_t>(missing, 16384), 1 << 20))) {
      return false;
    }
    deadline = ctx_.clock.Now() + ctx_.options.read_timeout;  // a body may take long while it moves
  }
  if (*consumed == 0 && buf.size() == need) {
    *body = std::move(buf);
    buf.clear();
  } else {
    body->assign(buf, *consumed, need);
  }
  *consumed += need;
  return true;
}

}  // namespace hami::net
