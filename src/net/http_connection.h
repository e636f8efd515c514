// Connection: one accepted socket of the HTTP server, its TLS state and the bytes read from it
// but not yet consumed. It offers the two kinds of I/O its two owners need: the reactor's
// non-blocking steps (Handshake, ReadNow), which never wait, and a worker's blocking calls
// (Fill, ReadOnce, Send, ...), which wait at most the socket's SO_RCVTIMEO/SO_SNDTIMEO per call
// and loop until a deadline read from the server's Clock.
//
//   Connection conn(fd, /*ssl=*/nullptr, running, clock);
//   if (!conn.Fill(clock.Now() + std::chrono::seconds(1))) return;  // closed, stopped, too slow
//   conn.Send({head, body});
//
// Once the connection reports a failure it stays failed: every later call returns at once.
//
// Thread safety: none. A connection belongs to one thread at a time (the reactor, or the worker
// serving it); it changes hands only through the server's locked queues.
#pragma once

#include <sys/types.h>
#include <sys/uio.h>

#include <atomic>
#include <cstddef>
#include <initializer_list>
#include <string>
#include <string_view>

#include "common/clock.h"

struct ssl_st;  // OpenSSL's SSL, declared here to keep OpenSSL's headers out of this one

namespace hami::net {

class Connection {
 public:
  // Takes over `ssl` (may be null: plain, or TLS attached later with AttachSsl), not `fd`.
  // `running` turns false when the server stops; `clock` dates every deadline. Both outlive this.
  Connection(int fd, ssl_st* ssl, const std::atomic<bool>& running, const Clock& clock)
      : fd_(fd), ssl_(ssl), running_(running), clock_(clock) {}
  ~Connection();
  Connection(const Connection&) = delete;
  Connection& operator=(const Connection&) = delete;

  enum class Io { kOk, kWantRead, kWantWrite, kEof, kClosed };

  // ---- A worker's side: the socket blocks for at most its timeouts per call. ----

  // Reads more bytes into buf(). False on end of stream, error, the server stopping, or the
  // clock passing `deadline`. Answers held back by Queue leave first.
  bool Fill(MonoTime deadline, size_t want = 16384);
  // One read, waiting at most the socket's receive timeout: kOk when bytes arrived, kWantRead
  // when none did in time, kEof or kClosed when the connection ended.
  Io ReadOnce();

  // Holds an answer back while more pipelined requests are already buffered, so that their
  // answers leave together (the next Send or Flush writes it first). Large backlogs go at once.
  bool Queue(std::initializer_list<std::string_view> pieces);
  bool Flush() { return queued_.empty() || Send({}); }
  // Sends anything queued, then the pieces in order, as one write (one TCP segment when they
  // fit); false on failure.
  bool Send(std::initializer_list<std::string_view> pieces);
  // Sends as much of the pieces as the socket takes without waiting and returns how many bytes
  // left, or -1 on failure. TLS connections send nothing here (a partial SSL_write would have to
  // be repeated with the same arguments): their caller falls back to Send.
  ssize_t TrySend(std::initializer_list<std::string_view> pieces);

  // After a final answer to a request that was not read to its end: stops sending and discards
  // what the client is still sending (up to 1 MiB or a second), so that closing does not reset
  // the connection before the client has read the answer.
  void LingerBeforeClose();

  // ---- The reactor's side: the socket is non-blocking, nothing here waits. ----

  // One step of the TLS handshake (kOk once it is complete, or for a plain connection).
  Io Handshake();
  // Appends what the socket (or TLS record layer) has ready, at most `max` bytes. *got says
  // whether anything arrived. kEof: the peer finished sending (it may still read our answer);
  // kClosed: the connection broke. Bytes read before either stay in the buffer.
  Io ReadNow(size_t max, bool* got);
  // For a TLS connection whose TLS state is made when its first bytes arrive (an accepted
  // connection that never sends anything then costs no TLS state). Before any TLS I/O.
  void AttachSsl(ssl_st* ssl) { ssl_ = ssl; }

  std::string& buf() { return buf_; }
  bool running() const { return running_.load(std::memory_order_relaxed); }
  ssl_st* ssl() const { return ssl_; }
  int fd() const { return fd_; }
  // Bytes a read would return without waiting on the socket.
  bool Buffered() const;

 private:
  bool SendPieces(std::initializer_list<std::string_view> pieces);
  bool SendTls(std::initializer_list<std::string_view> pieces);
  // The non-empty pieces (at most 4) as an iovec array; returns how many.
  static size_t ToIovecs(std::initializer_list<std::string_view> pieces, iovec (&iov)[4]);
  // One SSL_read into `to`; on failure *io says why (kWantRead covers "try again").
  ssize_t ReadTls(char* to, size_t want, Io* io);

  const int fd_;
  ssl_st* ssl_;  // set once: at construction, or by AttachSsl before any TLS I/O
  const std::atomic<bool>& running_;
  const Clock& clock_;
  std::string buf_;
  std::string queued_;  // answers held back for pipelined requests
  bool healthy_ = true;
  bool clean_ = true;  // no TLS error: a close_notify may be sent
};

// Switches an accepted socket between the reactor's non-blocking mode and a worker's blocking
// one (whose waits SO_RCVTIMEO/SO_SNDTIMEO bound). False when fcntl fails.
bool SetNonBlocking(int fd, bool on);

// The remote IP address of a connected socket ("" when it has none, e.g. a Unix socket).
std::string PeerAddress(int fd);

}  // namespace hami::net
