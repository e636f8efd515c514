#include "net/socket_bio.h"

#include <openssl/bio.h>
#include <sys/socket.h>

#include <cerrno>
#include <cstdint>

namespace hami::net {
namespace {

int Fd(BIO* bio) { return static_cast<int>(reinterpret_cast<intptr_t>(BIO_get_data(bio))); }

int BioWrite(BIO* bio, const char* data, int len) {
  BIO_clear_retry_flags(bio);
  for (;;) {
    ssize_t n = ::send(Fd(bio), data, static_cast<size_t>(len), MSG_NOSIGNAL);
    if (n >= 0) return static_cast<int>(n);
    if (errno == EINTR) continue;
    if (errno == EAGAIN || errno == EWOULDBLOCK) BIO_set_retry_write(bio);
    return -1;
  }
}

int BioRead(BIO* bio, char* data, int len) {
  BIO_clear_retry_flags(bio);
  for (;;) {
    ssize_t n = ::recv(Fd(bio), data, static_cast<size_t>(len), 0);
    if (n >= 0) return static_cast<int>(n);
    if (errno == EINTR) continue;
    if (errno == EAGAIN || errno == EWOULDBLOCK) BIO_set_retry_read(bio);
    return -1;
  }
}

long BioCtrl(BIO*, int cmd, long, void*) {  // NOLINT(runtime/int)
  return cmd == BIO_CTRL_FLUSH ? 1 : 0;
}

const BIO_METHOD* Method() {
  static const BIO_METHOD* method = [] {
    BIO_METHOD* m = BIO_meth_new(BIO_get_new_index() | BIO_TYPE_SOURCE_SINK, "hami-socket");
    BIO_meth_set_write(m, BioWrite);
    BIO_meth_set_read(m, BioRead);
    BIO_meth_set_ctrl(m, BioCtrl);
    return m;
  }();
  return method;
}

}  // namespace

bio_st* NewSocketBio(int fd) {
  BIO* bio = BIO_new(Method());
  if (bio == nullptr) return nullptr;
  BIO_set_data(bio, reinterpret_cast<void*>(static_cast<intptr_t>(fd)));
  BIO_set_init(bio, 1);
  return bio;
}

}  // namespace hami::net
