// An OpenSSL BIO over a connected socket that sends with MSG_NOSIGNAL: OpenSSL's own socket BIO
// writes with write(2), which raises SIGPIPE when the peer has gone. Shared by the HTTP server
// and the API client's socket transport. Reads and writes block as the socket does; EAGAIN (a
// SO_RCVTIMEO/SO_SNDTIMEO expiry) is reported to OpenSSL as "retry".
#pragma once

struct bio_st;  // OpenSSL's BIO, declared here to keep OpenSSL's headers out of this one

namespace hami::net {

// A new BIO on `fd`, or null when OpenSSL cannot allocate one. The BIO does not own `fd`:
// freeing it (with the SSL object it is attached to) leaves the socket open.
bio_st* NewSocketBio(int fd);

}  // namespace hami::net
