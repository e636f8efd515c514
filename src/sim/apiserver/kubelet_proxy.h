// What the simulated API server asks of a node's kubelet on a client's behalf (pods/log, and
// pods/exec's upgraded stream), over HTTPS to the address the node publishes, as kube-apiserver
// does. Like kube-apiserver started without --kubelet-certificate-authority, it does not verify
// the kubelet's (self-signed) serving certificate.
//
// Thread safety: the functions are stateless; a KubeletStream belongs to one thread.
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "common/status.h"

namespace hami::sim {

struct KubeletReply {
  int status = 0;
  std::string body;
};

// GET https://<host>:<port><path>; Unavailable when the kubelet cannot be reached.
Result<KubeletReply> KubeletGet(const std::string& host, int port, const std::string& path);

// A kubelet connection after its 101 answer: the byte stream of the protocol it switched to.
class KubeletStream {
 public:
  virtual ~KubeletStream() = default;
  virtual int fd() const = 0;  // to poll for POLLIN
  // Bytes Read returns without the socket being readable (decrypted TLS records).
  virtual bool HasBuffered() const = 0;
  // Appends what is there; false at the end of the stream or on an error.
  virtual bool Read(std::string* out) = 0;
  virtual bool Write(std::string_view data) = 0;
};

struct KubeletUpgradeReply {
  int status = 0;
  std::vector<std::pair<std::string, std::string>> headers;  // names lower-cased
  std::string body;   // the answer's body when it did not switch (status != 101)
  std::string early;  // stream bytes that came with the 101 head
  std::unique_ptr<KubeletStream> stream;  // set when status is 101
};

// Sends `method` `path_and_query` with `headers` (the client's upgrade headers) to the kubelet
// and reads its answer. Unavailable when the kubelet cannot be reached or answers nothing
// readable within 10 s.
Result<KubeletUpgradeReply> KubeletUpgrade(
    const std::string& host, int port, const std::string& method,
    const std::string& path_and_query,
    const std::vector<std::pair<std::string, std::string>>& headers);

}  // namespace hami::sim
