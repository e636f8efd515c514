// Exchange: the requests of one connection served in order on the calling thread (a worker, or
// the caller of HttpServer::ServeConnectionForTesting): read a request's head and body within
// their deadlines, refuse what cannot be read (400, 413, 431, then close), run the route, write
// the answer (net/http_response.h). Pipelined requests are answered in order; a handler may
// defer its answer (HttpResponse::Defer), which hands the connection back to the caller.
//
//   ExchangeContext ctx{options, clock, running, router};
//   size_t served = 0;
//   Exchange(ctx, conn, peer, &served).ServeUntilClosed();
//
// Deadlines, read from ctx.clock: a head's first byte within keep_alive_timeout, the whole head
// within read_timeout of its first byte, and no gap in a body longer than read_timeout.
//
// Thread safety: an Exchange lives on one thread, as its Connection does. The context's members
// are shared by all connections and read-only while the server runs.
#pragma once

#include <atomic>
#include <cstddef>
#include <memory>
#include <optional>
#include <string>

#include "common/clock.h"
#include "net/http_connection.h"
#include "net/http_response.h"
#include "net/http_router.h"
#include "net/http_server.h"
#include "net/http_wire.h"

namespace hami::net {

// What serving requests needs from the server. Everything here outlives every Exchange.
struct ExchangeContext {
  const HttpServerOptions& options;
  const Clock& clock;
  const std::atomic<bool>& running;
  const Router& router;
};

// A request whose handler deferred its answer: what writing that answer needs once it comes.
struct PendingAnswer {
  AnswerFraming framing;           // `more` is decided when the answer is written
  bool client_keep_alive = false;  // the client asked to keep the connection (linger on close)
  std::shared_ptr<Responder> responder;
};

// Writes the deferred answer `pending` waited for (its Responder has sent it). False when the
// connection is to be closed.
bool WriteDeferredAnswer(Connection& conn, PendingAnswer& pending,
                         const std::atomic<bool>& running);

class Exchange {
 public:
  // kPark: no whole request is buffered (the reactor waits for the next one without a thread).
  // kDefer: a handler deferred its answer; the connection waits without a thread.
  enum class Outcome { kClose, kPark, kDefer };

  // `served` counts the connection's requests over all its exchanges (keep_alive_max_requests).
  Exchange(const ExchangeContext& ctx, Connection& conn, const std::string& peer, size_t* served)
      : ctx_(ctx), conn_(conn), peer_(peer), served_(*served) {}
  Exchange(const Exchange&) = delete;
  Exchange& operator=(const Exchange&) = delete;

  // A worker's turn: serves requests while whole ones are buffered (or arrive within the
  // keep-alive linger), then kPark. `whole_request`: the buffer is known to hold one (the
  // reactor's hand-off), so the first round skips that check. A deferred answer returns kDefer
  // with *deferred set. Answers held back for pipelining have left when it returns.
  Outcome ServeWhileReady(bool whole_request, std::unique_ptr<PendingAnswer>* deferred);
  // Reads every request itself, waiting for deferred answers, until the connection closes,
  // fails, times out or the server stops.
  void ServeUntilClosed();

 private:
  // One request read, answered and written; nullopt while the connection carries on.
  std::optional<Outcome> ServeOne(std::unique_ptr<PendingAnswer>* deferred);
  // Before reading on a worker: nullopt when a whole request is buffered, else what to return.
  std::optional<Outcome> WaitForWholeRequest();
  // Reads the next request into *req (rejecting what cannot be read); false: close.
  bool ReadRequest(wire::RequestHead* head, HttpRequest* req);
  bool ReadHead(size_t* end, size_t* sep, MonoTime* deadline);
  bool ReadBody(const wire::RequestHead& head, size_t* consumed, MonoTime deadline,
                std::string* body);
  bool ReadChunkedBody(size_t* consumed, MonoTime deadline, std::string* body);
  bool ReadSizedBody(size_t need, size_t* consumed, MonoTime deadline, std::string* body);

  const ExchangeContext& ctx_;
  Connection& conn_;
  const std::string& peer_;
  size_t& served_;
};

}  // namespace hami::net
