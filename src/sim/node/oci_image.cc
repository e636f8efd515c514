#include "sim/node/oci_image.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>

#include <nlohmann/json.hpp>
#include <openssl/evp.h>

namespace hami::sim {
namespace {

constexpr size_t kBlock = 512;

std::string Errno(const std::string& what) { return what + ": " + strerror(errno); }

// The lowercase hex SHA-256 of a file.
// Lower-case hex of `len` bytes of a digest.
std::string Hex(const unsigned char* md, unsigned len) {
  std::string hex;
  char two[3];
  for (unsigned i = 0; i < len; ++i) {
    snprintf(two, sizeof(two), "%02x", md[i]);
    hex += two;
  }
  return hex;
}

Result<std::string> Sha256File(const std::string& path) {
  int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return InternalError(Errno("open " + path));
  EVP_MD_CTX* ctx = EVP_MD_CTX_new();
  EVP_DigestInit_ex(ctx, EVP_sha256(), nullptr);
  std::vector<char> buf(1 << 20);
  ssize_t n;
  while ((n = read(fd, buf.data(), buf.size())) > 0) EVP_DigestUpdate(ctx, buf.data(), n);
  close(fd);
  unsigned char md[EVP_MAX_MD_SIZE];
  unsigned len = 0;
  EVP_DigestFinal_ex(ctx, md, &len);
  EVP_MD_CTX_free(ctx);
  if (n < 0) return InternalError(Errno("read " + path));
  return Hex(md, len);
}

std::string Sha256Bytes(const std::string& bytes) {
  unsigned char md[EVP_MAX_MD_SIZE];
  unsigned len = 0;
  EVP_Digest(bytes.data(), bytes.size(), md, &len, EVP_sha256(), nullptr);
  return Hex(md, len);
}

// Adds the tree under `dir` (absolute) as `name` (relative, "" for the root) in name order.
Status AddTree(TarWriter& tar, const std::string& dir, const std::string& name) {
  DIR* d = opendir(dir.c_str());
  if (d == nullptr) return InternalError(Errno("opendir " + dir));
  std::vector<std::string> entries;
  while (dirent* e = readdir(d)) {
    if (strcmp(e->d_name, ".") != 0 && strcmp(e->d_name, "..") != 0) entries.push_back(e->d_name);
  }
  closedir(d);
  std::sort(entries.begin(), entries.end());
  for (const std::string& e : entries) {
    const std::string path = dir + "/" + e, rel = name.empty() ? e : name + "/" + e;
    struct stat st;
    if (lstat(path.c_str(), &st) != 0) return InternalError(Errno("lstat " + path));
    const int mode = st.st_mode & 07777;
    if (S_ISDIR(st.st_mode)) {
      tar.AddDirectory(rel, mode);
      HAMI_RETURN_IF_ERROR(AddTree(tar, path, rel));
    } else if (S_ISLNK(st.st_mode)) {
      char target[4096];
      ssize_t n = readlink(path.c_str(), target, sizeof(target) - 1);
      if (n < 0) return InternalError(Errno("readlink " + path));
      tar.AddSymlink(rel, std::string(target, n));
    } else if (S_ISREG(st.st_mode)) {
      tar.AddFile(rel, mode, path);
    } else {
      return InvalidArgumentError(path + " is neither a file, a folder nor a symbolic link");
    }
    HAMI_RETURN_IF_ERROR(tar.status());
  }
  return OkStatus();
}

nlohmann::json Descriptor(const std::string& media_type, const std::string& digest,
                          uint64_t size) {
  return {{"mediaType", media_type}, {"digest", "sha256:" + digest}, {"size", size}};
}

}  // namespace

TarWriter::TarWriter(const std::string& path) {
  fd_ = open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd_ < 0) status_ = InternalError(Errno("create " + path));
}

TarWriter::~TarWriter() {
  if (fd_ >= 0) close(fd_);
}

void TarWriter::Write(const void* data, size_t n) {
  const char* p = static_cast<const char*>(data);
  while (status_.ok() && n > 0) {
    ssize_t w = write(fd_, p, n);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) {
      status_ = InternalError(Errno("write to a tar archive"));
      return;
    }
    p += w;
    n -= static_cast<size_t>(w);
  }
}

void TarWriter::Pad(uint64_t size) {
  static const char kZeros[kBlock] = {};
  if (size % kBlock != 0) Write(kZeros, kBlock - size % kBlock);
}

void TarWriter::Header(const std::string& name, int mode, uint64_t size, char type,
                       const std::string& link) {
  if (!status_.ok()) return;
  char h[kBlock] = {};
  std::string prefix, base = name;
  if (base.size() > 100) {
    // Split at a '/' so that the prefix takes at most 155 bytes and the rest at most 100.
    size_t cut = name.rfind('/', 155);
    while (cut != std::string::npos && name.size() - cut - 1 > 100) cut = std::string::npos;
    if (cut == std::string::npos || cut == 0) {
      status_ = InvalidArgumentError("name too long for a ustar archive: " + name);
      return;
    }
    prefix = name.substr(0, cut);
    base = name.substr(cut + 1);
  }
  if (link.size() > 100) {
    status_ = InvalidArgumentError("link target too long for a ustar archive: " + link);
    return;
  }
  memcpy(h, base.data(), base.size());
  snprintf(h + 100, 8, "%07o", mode & 07777);
  snprintf(h + 108, 8, "%07o", 0);
  snprintf(h + 116, 8, "%07o", 0);
  snprintf(h + 124, 12, "%011llo", static_cast<unsigned long long>(size));  // NOLINT
  snprintf(h + 136, 12, "%011o", 0);
  memset(h + 148, ' ', 8);
  h[156] = type;
  memcpy(h + 157, link.data(), link.size());
  memcpy(h + 257, "ustar", 6);
  memcpy(h + 263, "00", 2);
  memcpy(h + 265, "root", 4);
  memcpy(h + 297, "root", 4);
  memcpy(h + 345, prefix.data(), prefix.size());
  unsigned sum = 0;
  for (unsigned char c : h) sum += c;
  snprintf(h + 148, 8, "%06o", sum);  // six digits, NUL, and the space already there
  Write(h, kBlock);
}

void TarWriter::AddDirectory(const std::string& name, int mode) {
  Header(name + "/", mode, 0, '5', "");
}

void TarWriter::AddSymlink(const std::string& name, const std::string& target) {
  Header(name, 0777, 0, '2', target);
}

void TarWriter::AddBytes(const std::string& name, int mode, const std::string& content) {
  Header(name, mode, content.size(), '0', "");
  Write(content.data(), content.size());
  Pad(content.size());
}

void TarWriter::AddFile(const std::string& name, int mode, const std::string& source) {
  if (!status_.ok()) return;
  int in = open(source.c_str(), O_RDONLY | O_CLOEXEC);
  struct stat st;
  if (in < 0 || fstat(in, &st) != 0) {
    status_ = InternalError(Errno("open " + source));
    if (in >= 0) close(in);
    return;
  }
  const uint64_t size = static_cast<uint64_t>(st.st_size);
  Header(name, mode, size, '0', "");
  std::vector<char> buf(1 << 20);
  uint64_t left = size;
  while (status_.ok() && left > 0) {
    ssize_t n = read(in, buf.data(), std::min<uint64_t>(buf.size(), left));
    if (n <= 0) {
      status_ = InternalError(source + " changed while being archived");
      break;
    }
    Write(buf.data(), static_cast<size_t>(n));
    left -= static_cast<uint64_t>(n);
  }
  close(in);
  Pad(size);
}

Status TarWriter::Finish() {
  static const char kZeros[2 * kBlock] = {};
  Write(kZeros, sizeof(kZeros));
  if (fd_ >= 0 && close(fd_) != 0 && status_.ok()) status_ = InternalError(Errno("close"));
  fd_ = -1;
  return status_;
}

Status WriteOciArchive(const OciImage& image, const std::string& archive) {
  size_t colon = image.name.rfind(':');
  if (colon == std::string::npos || image.name.find('/', colon) != std::string::npos ||
      colon + 1 == image.name.size()) {
    return InvalidArgumentError("image name '" + image.name + "' has no tag");
  }
  const std::string tag = image.name.substr(colon + 1);
  const std::string layer = archive + ".layer";
  {
    TarWriter tar(layer);
    HAMI_RETURN_IF_ERROR(tar.status());
    HAMI_RETURN_IF_ERROR(AddTree(tar, image.rootfs, ""));
    HAMI_RETURN_IF_ERROR(tar.Finish());
  }
  Result<std::string> layer_digest = Sha256File(layer);
  HAMI_RETURN_IF_ERROR(layer_digest.status());
  struct stat st;
  if (stat(layer.c_str(), &st) != 0) return InternalError(Errno("stat " + layer));
  const uint64_t layer_size = static_cast<uint64_t>(st.st_size);

  nlohmann::json config = {
      {"architecture", "amd64"},
      {"os", "linux"},
      {"config", {{"Env", image.env}, {"Entrypoint", image.entrypoint}}},
      {"rootfs", {{"type", "layers"}, {"diff_ids", {"sha256:" + *layer_digest}}}}};
  const std::string config_text = config.dump();
  const std::string config_digest = Sha256Bytes(config_text);
  nlohmann::json manifest = {
      {"schemaVersion", 2},
      {"mediaType", "application/vnd.oci.image.manifest.v1+json"},
      {"config", Descriptor("application/vnd.oci.image.config.v1+json", config_digest,
                            config_text.size())},
      {"layers", {Descriptor("application/vnd.oci.image.layer.v1.tar", *layer_digest,
                             layer_size)}}};
  const std::string manifest_text = manifest.dump();
  const std::string manifest_digest = Sha256Bytes(manifest_text);
  nlohmann::json entry = Descriptor("application/vnd.oci.image.manifest.v1+json",
                                    manifest_digest, manifest_text.size());
  entry["annotations"] = {{"io.containerd.image.name", image.name},
                          {"org.opencontainers.image.ref.name", tag}};
  nlohmann::json index = {{"schemaVersion", 2}, {"manifests", {entry}}};

  TarWriter tar(archive);
  tar.AddBytes("oci-layout", 0644, R"({"imageLayoutVersion":"1.0.0"})");
  tar.AddBytes("index.json", 0644, index.dump());
  tar.AddDirectory("blobs", 0755);
  tar.AddDirectory("blobs/sha256", 0755);
  tar.AddBytes("blobs/sha256/" + config_digest, 0644, config_text);
  tar.AddBytes("blobs/sha256/" + manifest_digest, 0644, manifest_text);
  tar.AddFile("blobs/sha256/" + *layer_digest, 0644, layer);
  Status done = tar.Finish();
  unlink(layer.c_str());
  return done;
}

}  // namespace hami::sim
