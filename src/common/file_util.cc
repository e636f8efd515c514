#include "common/file_util.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <fstream>

namespace hami {
namespace {

Status Errno(const std::string& what) {
  return Status(StatusCode::kInternal, what + ": " + std::strerror(errno));
}

}  // namespace

Result<std::string> ReadFileToString(const std::string& path, size_t max_bytes) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    int err = errno;
    std::string msg = path + ": " + std::strerror(err);
    if (err == ENOENT) return NotFoundError(msg);
    if (err == EACCES) return PermissionDeniedError(msg);
    return InternalError(msg);
  }
  std::string out;
  char buf[65536];
  while (in) {
    in.read(buf, sizeof(buf));
    out.append(buf, static_cast<size_t>(in.gcount()));
    if (out.size() > max_bytes) {
      return InvalidArgumentError(path + ": larger than " + std::to_string(max_bytes) + " bytes");
    }
  }
  if (in.bad()) return InternalError(path + ": read error");
  return out;
}

Status WriteFileAtomically(const std::string& path, std::string_view content, int mode,
                           bool* changed) {
  // One byte more than `content` is enough to tell a longer file apart.
  if (Result<std::string> old = ReadFileToString(path, content.size() + 1);
      old.ok() && *old == content) {
    return OkStatus();
  }
  std::string tmp = path + ".tmp." + std::to_string(::getpid());
  int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, mode);
  if (fd < 0) return Errno("cannot create " + tmp);
  auto fail = [&](const std::string& what) {
    Status s = Errno(what);
    ::close(fd);
    ::unlink(tmp.c_str());
    return s;
  };
  size_t off = 0;
  while (off < content.size()) {
    ssize_t n = ::write(fd, content.data() + off, content.size() - off);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return fail("cannot write " + tmp);
    off += static_cast<size_t>(n);
  }
  // fchmod: the umask narrowed open's mode.
  if (::fchmod(fd, static_cast<mode_t>(mode)) != 0 || ::fsync(fd) != 0) {
    return fail("cannot finish " + tmp);
  }
  ::close(fd);
  if (::rename(tmp.c_str(), path.c_str()) != 0) {
    Status s = Errno("cannot rename " + tmp + " to " + path);
    ::unlink(tmp.c_str());
    return s;
  }
  if (changed != nullptr) *changed = true;
  return OkStatus();
}

}  // namespace hami
