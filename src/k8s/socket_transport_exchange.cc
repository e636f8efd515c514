// SocketTransport's I/O on a connected socket: timeouts, reads and writes (plain or TLS), and
// one HTTP/1.1 exchange: the request sent, the response head and body read with the request's
// deadline and cancellation observed.
#include <errno.h>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <poll.h>
#include <strings.h>
#include <sys/socket.h>
#include <sys/uio.h>

#include <algorithm>
#include <cctype>
#include <cstdint>
#include <cstring>

#include "k8s/socket_transport_internal.h"
#include "net/http_wire.h"

namespace hami::k8s::socket_internal {

// The socket timeout for each read of an exchange: the request's timeout, capped at kCancelTick
// when a cancellation must be watched (0, no timeout, for neither).
int64_t ReadWaitMs(const HttpRequest& request) {
  int64_t wait = request.timeout.count() > 0 ? request.timeout.count() : 0;
  if (request.cancel != nullptr && (wait == 0 || wait > kCancelTick.count())) {
    wait = kCancelTick.count();
  }
  return wait;
}

// Sets the socket's receive and send timeouts when they differ from the last ones set.
void SetIoTimeout(Conn& c, int64_t ms) {
  if (c.recv_timeout_ms == ms) return;
  timeval tv{};
  tv.tv_sec = static_cast<time_t>(ms / 1000);
  tv.tv_usec = static_cast<suseconds_t>((ms % 1000) * 1000);
  ::setsockopt(c.fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  ::setsockopt(c.fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
  c.recv_timeout_ms = ms;
}

// Appends what one read returns to c.buf. *error gets the reason for kError.
IoResult ReadMore(Conn& c, std::string* error) {
  if (c.pos > 0 && c.pos == c.buf.size()) {
    c.buf.clear();
    c.pos = 0;
  }
  size_t old = c.buf.size();
  c.buf.resize(old + kReadSize);
  if (c.ssl != nullptr) {
    ERR_clear_error();
    int n = SSL_read(c.ssl, c.buf.data() + old, static_cast<int>(kReadSize));
    if (n > 0) {
      c.buf.resize(old + static_cast<size_t>(n));
      return IoResult::kOk;
    }
    c.buf.resize(old);
    int err = SSL_get_error(c.ssl, n);
    if (err == SSL_ERROR_ZERO_RETURN) return IoResult::kEof;
    if (err == SSL_ERROR_WANT_READ || err == SSL_ERROR_WANT_WRITE) return IoResult::kTimeout;
    if (err == SSL_ERROR_SYSCALL && ERR_peek_error() == 0) {
      if (errno == EAGAIN || errno == EWOULDBLOCK) return IoResult::kTimeout;
      if (n == 0 || errno == 0) return IoResult::kEof;  // closed without close_notify
      *error = std::strerror(errno);
      return errno == ECONNRESET ? IoResult::kEof : IoResult::kError;
    }
    *error = OpenSslErrors();
    return IoResult::kError;
  }
  for (;;) {
    ssize_t n = ::recv(c.fd, c.buf.data() + old, kReadSize, 0);
    if (n > 0) {
      c.buf.resize(old + static_cast<size_t>(n));
      return IoResult::kOk;
    }
    c.buf.resize(old);
    if (n == 0) return IoResult::kEof;
    if (errno == EINTR) {
      c.buf.resize(old + kReadSize);
      continue;
    }
    if (errno == EAGAIN || errno == EWOULDBLOCK) return IoResult::kTimeout;
    if (errno == ECONNRESET) return IoResult::kEof;
    *error = std::strerror(errno);
    return IoResult::kError;
  }
}

// Sends head then body; false with *error on failure (a timeout included).
bool SendAll(Conn& c, const std::string& head, const std::string& body, std::string* error) {
  if (c.ssl != nullptr) {
    // One record for small requests: the head and the body together.
    std::string all;
    const std::string* out = &head;
    if (!body.empty()) {
      all.reserve(head.size() + body.size());
      all.append(head).append(body);
      out = &all;
    }
    size_t off = 0;
    while (off < out->size()) {
      ERR_clear_error();
      int n = SSL_write(c.ssl, out->data() + off, static_cast<int>(out->size() - off));
      if (n <= 0) {
        int err = SSL_get_error(c.ssl, n);
        *error = err == SSL_ERROR_WANT_WRITE || err == SSL_ERROR_WANT_READ ? "send timed out"
                 : err == SSL_ERROR_SYSCALL && ERR_peek_error() == 0
                     ? std::string(std::strerror(errno))
                     : OpenSslErrors();
        return false;
      }
      off += static_cast<size_t>(n);
    }
    return true;
  }
  iovec iov[2] = {{const_cast<char*>(head.data()), head.size()},
                  {const_cast<char*>(body.data()), body.size()}};
  size_t total = head.size() + body.size(), sent = 0;
  while (sent < total) {
    msghdr msg{};
    iovec part[2];
    int count = 0;
    size_t skip = sent;
    for (const iovec& v : iov) {
      if (skip >= v.iov_len) {
        skip -= v.iov_len;
        continue;
      }
      part[count++] = {static_cast<char*>(v.iov_base) + skip, v.iov_len - skip};
      skip = 0;
    }
    msg.msg_iov = part;
    msg.msg_iovlen = static_cast<size_t>(count);
    ssize_t n = ::sendmsg(c.fd, &msg, MSG_NOSIGNAL);
    if (n < 0) {
      if (errno == EINTR) continue;
      *error = errno == EAGAIN || errno == EWOULDBLOCK ? "send timed out" : std::strerror(errno);
      return false;
    }
    sent += static_cast<size_t>(n);
  }
  return true;
}

std::string Lower(std::string_view s) {
  std::string out(s);
  for (char& ch : out) ch = static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
  return out;
}

namespace {

// Whether the comma-separated header `value` lists `token` (lower case), ignoring case and
// surrounding blanks.
bool HeaderHasToken(std::string_view value, std::string_view token) {
  std::string v = Lower(value);
  size_t start = 0;
  while (start <= v.size()) {
    size_t comma = v.find(',', start);
    std::string_view part =
        std::string_view(v).substr(start, comma == std::string::npos ? v.npos : comma - start);
    while (!part.empty() && (part.front() == ' ' || part.front() == '\t')) part.remove_prefix(1);
    while (!part.empty() && (part.back() == ' ' || part.back() == '\t')) part.remove_suffix(1);
    if (part == token) return true;
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  return false;
}

}  // namespace

std::string RequestHead(const Url& url, const HttpRequest& request) {
  std::string head;
  head.reserve(256 + request.url.size());
  head.append(request.method).append(" ").append(url.target).append(" HTTP/1.1\r\nHost: ");
  head.append(url.host_header).append("\r\n");
  for (const auto& [k, v] : request.headers) {
    if (strcasecmp(k.c_str(), "host") == 0 || strcasecmp(k.c_str(), "content-length") == 0 ||
        strcasecmp(k.c_str(), "connection") == 0 ||
        strcasecmp(k.c_str(), "transfer-encoding") == 0) {
      continue;
    }
    head.append(k).append(": ").append(v).append("\r\n");
  }
  bool bodyless = request.method == "GET" || request.method == "HEAD";
  if (!bodyless && (!request.body.empty() || request.method != "DELETE")) {
    head.append("Content-Length: ").append(std::to_string(request.body.size())).append("\r\n");
  }
  head.append("\r\n");
  return head;
}

bool Bodyless(const HttpRequest& request) {
  return request.method == "GET" || request.method == "HEAD";
}

namespace {

// Reads one response from a connection into `response`: its head, then its body into
// response.body or, for a 2xx answer to a request with on_body, into that callback. Every wait
// is bounded by the request's timeout and cancellation. Lives for one exchange, on its thread.
class ResponseReader {
 public:
  // The request's deadline starts now. *stale is set when the connection ends before any byte
  // of the response arrived.
  ResponseReader(Conn& c, const Url& url, const HttpRequest& request, HttpResponse& response,
                 bool* stale)
      : c_(c),
        url_(url),
        request_(request),
        response_(response),
        stale_(stale),
        has_deadline_(request.timeout.count() > 0),
        deadline_(SteadyClock::now() + request.timeout) {}
  ResponseReader(const ResponseReader&) = delete;
  ResponseReader& operator=(const ResponseReader&) = delete;

  // Reads the status line and headers, skipping 1xx interim responses (8 at most). *keep_alive:
  // whether the server lets the connection carry another exchange (the HTTP version, then the
  // Connection header).
  Status ReadHead(bool* keep_alive);
  // Reads the body as the head frames it. *keep_alive is cleared for a body that runs to the end
  // of the connection; *abandoned is set when on_body declined more data and the connection
  // must not be reused.
  Status ReadBody(bool* keep_alive, bool* abandoned);

 private:
  // Reads until ready() holds, honouring the deadline and the cancellation.
  template <class Ready>
  Status Fill(Ready ready);
  Status CheckCancel() const;
  // With a cancellation to watch, waits for bytes on the connection or for the cancellation (its
  // WakeFd), so that a cancelled read ends at once rather than at the next kCancelTick. False
  // when cancelled or when the wait timed out (Fill then judges the cancellation and deadline);
  // true when a read will find something (bytes, the peer's close or an error). Without a
  // cancellation, true at once: the socket's own timeout bounds the read.
  bool WaitToRead() const;
  // DeadlineExceeded for a response still arriving when the deadline passed.
  Status Overdue() const;
  // Hands body bytes on, unless the callback already declined more.
  void Deliver(const char* p, size_t n);
  // Hands the next `n` body bytes to Deliver(), reading as needed; ends early once the caller's
  // callback declined more.
  Status Pass(uint64_t n);
  Status ReadChunked(bool* abandoned);
  Status ReadSized(const std::string& content_length, bool* abandoned);
  Status ReadToClose(bool* abandoned);

  Conn& c_;
  const Url& url_;
  const HttpRequest& request_;
  HttpResponse& response_;
  bool* const stale_;
  const bool has_deadline_;
  const SteadyClock::time_point deadline_;
  std::string error_;       // the reason ReadMore gives for kError
  bool any_byte_ = false;   // some response byte has arrived
  bool streaming_ = false;  // body bytes go to request_.on_body
  bool stopped_ = false;    // on_body declined more
};

template <class Ready>
Status ResponseReader::Fill(Ready ready) {
  while (!ready()) {
    // Checked before each read, so data that completes the response is never discarded for
    // a deadline that passed while it arrived.
    if (any_byte_ && has_deadline_ && SteadyClock::now() >= deadline_) return Overdue();
    IoResult r = WaitToRead() ? ReadMore(c_, &error_) : IoResult::kTimeout;
    if (r == IoResult::kOk) {
      any_byte_ = true;
    } else if (r == IoResult::kTimeout) {
      if (request_.cancel != nullptr && request_.cancel->cancelled()) {
        return Status(StatusCode::kCancelled, "request cancelled");
      }
      if (has_deadline_ && SteadyClock::now() >= deadline_) {
        return DeadlineExceededError("no response from " + url_.host_header + " within " +
                                     std::to_string(request_.timeout.count()) + " ms");
      }
    } else if (r == IoResult::kEof) {
      if (!any_byte_) *stale_ = true;
      return Status(StatusCode::kUnknown,
                    "connection to " + url_.host_header + " closed before the response ended");
    } else {
      return Status(StatusCode::kUnknown, "reading from " + url_.host_header + ": " + error_);
    }
  }
  return OkStatus();
}

bool ResponseReader::WaitToRead() const {
  if (request_.cancel == nullptr) return true;
  if (c_.ssl != nullptr && SSL_pending(c_.ssl) > 0) return true;  // decrypted, not yet read
  const int wake = request_.cancel->WakeFd();
  if (wake < 0) return true;  // no eventfd: the read's kCancelTick timeout looks instead
  pollfd fds[2] = {{c_.fd, POLLIN, 0}, {wake, POLLIN, 0}};
  int r = ::poll(fds, 2, static_cast<int>(ReadWaitMs(request_)));
  if (r <= 0) return false;  // timed out, or EINTR: Fill judges and comes back
  if (fds[1].revents != 0) return false;
  return fds[0].revents != 0;
}

Status ResponseReader::CheckCancel() const {
  if (request_.cancel != nullptr && request_.cancel->cancelled()) {
    return Status(StatusCode::kCancelled, "request cancelled");
  }
  return OkStatus();
}

Status ResponseReader::Overdue() const {
  return DeadlineExceededError("response from " + url_.host_header + " took longer than " +
                               std::to_string(request_.timeout.count()) + " ms");
}

void ResponseReader::Deliver(const char* p, size_t n) {
  if (n == 0 || stopped_) return;
  if (!streaming_) {
    response_.body.append(p, n);
  } else if (!request_.on_body(std::string_view(p, n))) {
    stopped_ = true;
  }
}

Status ResponseReader::Pass(uint64_t n) {
  while (n > 0 && !stopped_) {
    if (c_.available() == 0) HAMI_RETURN_IF_ERROR(Fill([this] { return c_.available() > 0; }));
    size_t take = static_cast<size_t>(std::min<uint64_t>(n, c_.available()));
    Deliver(c_.data(), take);
    c_.Consume(take);
    n -= take;
    HAMI_RETURN_IF_ERROR(CheckCancel());
  }
  return OkStatus();
}

Status ResponseReader::ReadHead(bool* keep_alive) {
  size_t header_end = 0;
  for (int interim = 0;; ++interim) {  // skips 1xx interim responses (a few at most)
    if (interim > 8) {
      return Status(StatusCode::kUnknown, "too many interim responses from " + url_.host_header);
    }
    HAMI_RETURN_IF_ERROR(Fill([&] {
      std::string_view have(c_.data(), c_.available());
      header_end = have.find("\r\n\r\n");
      return header_end != std::string_view::npos || have.size() > kMaxHeaderBytes;
    }));
    if (header_end == std::string_view::npos) {
      return Status(StatusCode::kUnknown, "response headers from " + url_.host_header +
                                              " exceed " + std::to_string(kMaxHeaderBytes));
    }
    net::wire::ResponseHead head;
    if (Status parsed =
            net::wire::ParseResponseHead(std::string_view(c_.data(), header_end), &head);
        !parsed.ok()) {
      return Status(StatusCode::kUnknown,
                    "from " + url_.host_header + ": " + std::string(parsed.message()));
    }
    response_.status = head.status;
    *keep_alive = head.http11;  // HTTP/1.1 keeps the connection by default
    response_.headers = std::move(head.headers);
    c_.Consume(header_end + 4);
    if (response_.status >= 100 && response_.status < 200) continue;
    break;
  }
  std::string connection = response_.Header("connection");
  if (HeaderHasToken(connection, "close")) *keep_alive = false;
  if (HeaderHasToken(connection, "keep-alive")) *keep_alive = true;
  return OkStatus();
}

Status ResponseReader::ReadBody(bool* keep_alive, bool* abandoned) {
  streaming_ = request_.on_body != nullptr && response_.status >= 200 && response_.status < 300;
  const bool no_body =
      request_.method == "HEAD" || response_.status == 204 || response_.status == 304;
  std::string te = response_.Header("transfer-encoding");
  std::string cl = response_.Header("content-length");
  if (no_body) return OkStatus();
  if (HeaderHasToken(te, "chunked")) return ReadChunked(abandoned);
  if (!cl.empty()) return ReadSized(cl, abandoned);
  // No framing: the body runs to the end of the connection.
  *keep_alive = false;
  return ReadToClose(abandoned);
}

Status ResponseReader::ReadChunked(bool* abandoned) {
  // The server's decoder (net/http_wire): one definition of the chunked framing for both
  // directions. A response is as long as the server makes it (a watch never ends).
  net::wire::ChunkedDecoder decoder(UINT64_MAX);
  std::string piece;  // decoded bytes of a stream, handed on as they come
  for (;;) {
    if (c_.available() == 0) HAMI_RETURN_IF_ERROR(Fill([this] { return c_.available() > 0; }));
    size_t used = 0;
    piece.clear();
    const net::wire::ChunkedDecoder::State state = decoder.Feed(
        std::string_view(c_.data(), c_.available()), &used, streaming_ ? &piece : &response_.body);
    c_.Consume(used);
    if (streaming_) Deliver(piece.data(), piece.size());
    if (state == net::wire::ChunkedDecoder::State::kError) {
      return Status(StatusCode::kUnknown,
                    "malformed chunked body from " + url_.host_header + ": " + decoder.error());
    }
    if (state == net::wire::ChunkedDecoder::State::kDone) return OkStatus();
    if (stopped_) {  // the connection is mid-body: not reused
      *abandoned = true;
      return OkStatus();
    }
    HAMI_RETURN_IF_ERROR(CheckCancel());
  }
}

Status ResponseReader::ReadSized(const std::string& content_length, bool* abandoned) {
  uint64_t length = 0;
  if (!net::wire::ParseContentLength(content_length, &length)) {
    return Status(StatusCode::kUnknown, "malformed Content-Length from " + url_.host_header);
  }
  // The length is the server's word: reserve only what a sane response needs up front.
  if (!streaming_) {
    response_.body.reserve(static_cast<size_t>(std::min<uint64_t>(length, 1 << 24)));
  }
  HAMI_RETURN_IF_ERROR(Pass(length));
  *abandoned = stopped_;
  return OkStatus();
}

Status ResponseReader::ReadToClose(bool* abandoned) {
  for (;;) {
    Deliver(c_.data(), c_.available());
    c_.Consume(c_.available());
    if (stopped_) {
      *abandoned = true;
      return OkStatus();
    }
    HAMI_RETURN_IF_ERROR(CheckCancel());
    IoResult r = ReadMore(c_, &error_);
    if (r == IoResult::kEof) return OkStatus();
    if (r == IoResult::kError) {
      return Status(StatusCode::kUnknown, "reading from " + url_.host_header + ": " + error_);
    }
    if (r == IoResult::kTimeout && has_deadline_ && SteadyClock::now() >= deadline_) {
      return Overdue();
    }
  }
}

}  // namespace

Result<HttpResponse> Exchange(Conn& c, const Url& url, const HttpRequest& request, bool* reusable,
                              bool* stale, bool sent, bool more_follow) {
  *reusable = false;
  *stale = false;
  HttpResponse response;
  ResponseReader reader(c, url, request, response, stale);  // the deadline starts here
  SetIoTimeout(c, ReadWaitMs(request));

  if (!sent) {
    std::string error;
    std::string head = RequestHead(url, request);
    if (!SendAll(c, head, Bodyless(request) ? std::string() : request.body, &error)) {
      *stale = true;  // nothing can have been processed from a request that did not arrive whole
      return Status(StatusCode::kUnknown, "sending to " + url.host_header + ": " + error);
    }
  }

  bool keep_alive = true;
  HAMI_RETURN_IF_ERROR(reader.ReadHead(&keep_alive));
  bool abandoned = false;
  HAMI_RETURN_IF_ERROR(reader.ReadBody(&keep_alive, &abandoned));
  if (abandoned) return response;
  *reusable = keep_alive && (more_follow || c.available() == 0);
  return response;
}

}  // namespace hami::k8s::socket_internal
