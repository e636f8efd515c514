#include "net/http_response.h"

#include <strings.h>
#include <zlib.h>

#include <algorithm>
#include <cstdio>
#include <string_view>
#include <utility>

#include "net/http_wire.h"

namespace hami::net {
namespace {

// Plain bodies at least this large are gzipped for clients that accept it; below it the saving
// is not worth the CPU (the extender's answers are a few hundred bytes).
constexpr size_t kGzipMinBytes = 4096;

bool Compressible(const std::string& content_type) {
  return content_type.rfind("text/", 0) == 0 || content_type.find("json") != std::string::npos ||
         content_type.find("yaml") != std::string::npos;
}

// gzip of `in` at the fastest level; false (and `out` untouched) on any zlib failure.
bool Gzip(const std::string& in, std::string* out) {
  z_stream zs{};
  if (deflateInit2(&zs, Z_BEST_SPEED, Z_DEFLATED, 15 + 16, 8, Z_DEFAULT_STRATEGY) != Z_OK) {
    return false;
  }
  std::string buf(deflateBound(&zs, static_cast<uLong>(in.size())), '\0');
  zs.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(in.data()));
  zs.avail_in = static_cast<uInt>(in.size());
  zs.next_out = reinterpret_cast<Bytef*>(buf.data());
  zs.avail_out = static_cast<uInt>(buf.size());
  int rc = deflate(&zs, Z_FINISH);
  size_t produced = buf.size() - zs.avail_out;
  deflateEnd(&zs);
  if (rc != Z_STREAM_END) return false;
  buf.resize(produced);
  *out = std::move(buf);
  return true;
}

// A streaming answer's writer: each Write is one HTTP chunk.
class StreamWriter : public ChunkWriter {
 public:
  explicit StreamWriter(Connection& conn) : conn_(conn) {}

  bool Write(std::string_view data) override {
    if (failed_ || !conn_.running()) return false;
    if (data.empty()) return Drain();  // an empty chunk would end the stream
    char size[20];
    int n = std::snprintf(size, sizeof size, "%zx\r\n", data.size());
    if (!conn_.Send({held_, std::string_view(size, static_cast<size_t>(n)), data, "\r\n"})) {
      failed_ = true;
    }
    held_.clear();
    return !failed_;
  }

  bool TryWrite(std::string_view data, bool* pending) override {
    *pending = false;
    if (failed_ || !conn_.running()) return false;
    char size[20];
    int n = data.empty() ? 0 : std::snprintf(size, sizeof size, "%zx\r\n", data.size());
    std::string_view head(size, static_cast<size_t>(n)), tail = data.empty() ? "" : "\r\n";
    if (!held_.empty()) {
      held_.append(head).append(data).append(tail);
      *pending = true;
      return true;
    }
    ssize_t sent = conn_.TrySend({head, data, tail});
    if (sent < 0) {
      failed_ = true;
      return false;
    }
    // Keep what did not leave, in order.
    size_t skip = static_cast<size_t>(sent);
    for (std::string_view piece : {head, data, tail}) {
      size_t k = std::min(skip, piece.size());
      held_.append(piece.substr(k));
      skip -= k;
    }
    *pending = !held_.empty();
    return true;
  }

  bool Drain() override {
    if (held_.empty()) return !failed_;
    if (failed_ || !conn_.running() || !conn_.Send({held_})) failed_ = true;
    held_.clear();
    return !failed_;
  }

  bool ServerRunning() const override { return conn_.running(); }

 private:
  Connection& conn_;
  std::string held_;  // framed bytes TryWrite could not send yet
  bool failed_ = false;
};

// A connection after a 101 answer, handed to HttpResponse::upgrade.
class Upgraded : public UpgradedConnection {
 public:
  explicit Upgraded(Connection& conn) : conn_(conn) {}
  int fd() const override { return conn_.fd(); }
  bool HasBuffered() const override { return conn_.Buffered(); }
  ReadResult Read(std::string* out) override {
    if (!conn_.running()) return ReadResult::kEnd;
    std::string& buf = conn_.buf();
    if (buf.empty()) {
      // The worker's socket is blocking with a receive timeout of a few milliseconds.
      Connection::Io io = conn_.ReadOnce();
      if (io == Connection::Io::kEof || io == Connection::Io::kClosed) return ReadResult::kEnd;
      if (buf.empty()) return ReadResult::kNothing;
    }
    out->append(buf);
    buf.clear();
    return ReadResult::kData;
  }
  bool Write(std::string_view data) override {
    return conn_.running() && (data.empty() || conn_.Send({data}));
  }
  bool ServerRunning() const override { return conn_.running(); }

 private:
  Connection& conn_;
};

// The status line and the handler's headers, without the framing ones and the final blank line.
std::string StartHead(const HttpResponse& res) {
  std::string head;
  head.reserve(256);
  head += "HTTP/1.1 ";
  head += std::to_string(res.status);
  head += ' ';
  head += wire::ReasonPhrase(res.status);
  head += "\r\n";
  if (res.status != 101) {
    head += "Content-Type: ";
    head += res.content_type;
    head += "\r\n";
  }
  for (const auto& [k, v] : res.headers) {
    // Framing is the server's business.
    if (::strcasecmp(k.c_str(), "Content-Length") == 0 ||
        ::strcasecmp(k.c_str(), "Transfer-Encoding") == 0 ||
        ::strcasecmp(k.c_str(), "Connection") == 0) {
      continue;
    }
    head += k;
    head += ": ";
    head += v;
    head += "\r\n";
  }
  return head;
}

// Switching protocols: the connection is the handler's until it returns, then it closes.
bool WriteUpgrade(Connection& conn, const HttpResponse& res, std::string head) {
  head += "Connection: Upgrade\r\n\r\n";
  if (!res.upgrade || !conn.Send({head})) return false;
  Upgraded up(conn);
  try {
    res.upgrade(up);
  } catch (...) {
  }
  return false;
}

bool WriteStream(Connection& conn, const HttpResponse& res, std::string head) {
  head += "Transfer-Encoding: chunked\r\n\r\n";
  if (!conn.Send({head})) return false;
  StreamWriter writer(conn);
  try {
    res.stream(writer);
  } catch (...) {
    return false;  // drops the connection: the client sees a truncated stream
  }
  if (!writer.Drain()) return false;  // anything TryWrite still held goes first
  return conn.Send({"0\r\n\r\n"});
}

bool WritePlain(Connection& conn, const HttpResponse& res, const AnswerFraming& framing,
                std::string head) {
  const bool no_body = res.status == 204 || res.status == 304 || res.status < 200;
  std::string gz;
  std::string_view body = res.body;
  if (!no_body && framing.accepts_gzip && body.size() >= kGzipMinBytes &&
      Compressible(res.content_type) && Gzip(res.body, &gz)) {
    body = gz;
    head += "Content-Encoding: gzip\r\nVary: Accept-Encoding\r\n";
  }
  if (!no_body) {
    head += "Content-Length: ";
    head += std::to_string(body.size());
    head += "\r\n";
  }
  head += "\r\n";
  if (framing.head_only || no_body) return framing.more ? conn.Queue({head}) : conn.Send({head});
  return framing.more ? conn.Queue({head, body}) : conn.Send({head, body});
}

}  // namespace

bool WriteResponse(Connection& conn, HttpResponse& res, const AnswerFraming& framing) {
  std::string head = StartHead(res);
  if (res.status == 101) return WriteUpgrade(conn, res, std::move(head));
  if (!framing.keep) head += "Connection: close\r\n";
  if (res.stream && !framing.head_only) return WriteStream(conn, res, std::move(head));
  return WritePlain(conn, res, framing, std::move(head));
}

void Reject(Connection& conn, int status, const std::string& why) {
  std::string body = why + "\n";
  std::string head = "HTTP/1.1 " + std::to_string(status) + " " + wire::ReasonPhrase(status) +
                     "\r\nContent-Type: text/plain; charset=utf-8\r\nContent-Length: " +
                     std::to_string(body.size()) + "\r\nConnection: close\r\n\r\n";
  if (conn.Send({head, body})) conn.LingerBeforeClose();
}

}  // namespace hami::net
