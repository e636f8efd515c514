// OCI image archives made from a folder, for a real node without a registry: containerd imports
// them (`ctr images import`) into the namespace its CRI plugin serves.
//
//   WriteOciArchive({.name = "localhost/hami-cpp:node-test", .rootfs = dir,
//                    .entrypoint = {"/pause"}}, "/tmp/image.tar");
//
// The archive is an OCI image layout (oci-layout, index.json, blobs/sha256/...) in a tar file,
// with one uncompressed layer: the folder's regular files, folders and symbolic links (owner
// root, modes kept, timestamps zero, names sorted, so the same folder gives the same digests).
// The index names the image in containerd's annotation (io.containerd.image.name) and OCI's
// (org.opencontainers.image.ref.name, the tag). linux/amd64 only.
//
// Thread safety: free functions, no shared state.
#pragma once

#include <string>
#include <vector>

#include "common/status.h"

namespace hami::sim {

struct OciImage {
  std::string name;  // e.g. localhost/hami-cpp:node-test (repository:tag)
  std::string rootfs;
  std::vector<std::string> entrypoint;
  std::vector<std::string> env = {"PATH=/usr/local/bin:/usr/bin:/bin"};
};

// Writes the archive (replacing `archive`); the layer is staged beside it. InvalidArgument for a
// name without a tag or a file type other than those above, Internal for I/O failures.
Status WriteOciArchive(const OciImage& image, const std::string& archive);

// A POSIX ustar archive written as a stream: entries, then Finish. Names longer than 100 bytes
// are split into the prefix field (up to 255 in all). For OCI layers and layouts only: no
// hard links, device files or extended headers.
class TarWriter {
 public:
  // Opens `path` for writing. Check status() before use.
  explicit TarWriter(const std::string& path);
  ~TarWriter();
  TarWriter(const TarWriter&) = delete;
  TarWriter& operator=(const TarWriter&) = delete;

  const Status& status() const { return status_; }
  void AddDirectory(const std::string& name, int mode);
  void AddSymlink(const std::string& name, const std::string& target);
  // The content of host file `source`.
  void AddFile(const std::string& name, int mode, const std::string& source);
  void AddBytes(const std::string& name, int mode, const std::string& content);
  // The two zero blocks that end an archive; closes the file. The final status.
  Status Finish();

 private:
  void Header(const std::string& name, int mode, uint64_t size, char type,
              const std::string& link);
  void Write(const void* data, size_t n);
  void Pad(uint64_t size);

  int fd_ = -1;
  Status status_;
};

}  // namespace hami::sim
