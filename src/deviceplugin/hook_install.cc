#include "deviceplugin/hook_install.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>

namespace hami::deviceplugin {
namespace {

Result<std::string> ReadAll(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return Status(StatusCode::kNotFound, "cannot read " + path);
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

Status Errno(const std::string& what) {
  return Status(StatusCode::kInternal, what + ": " + std::strerror(errno));
}

}  // namespace

Status WriteFileAtomically(const std::string& path, const std::string& content, int mode,
                           bool* changed) {
  if (Result<std::string> old = ReadAll(path); old.ok() && *old == content) return OkStatus();
  std::string tmp = path + ".tmp." + std::to_string(getpid());
  int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, mode);
  if (fd < 0) return Errno("cannot create " + tmp);
  size_t off = 0;
  while (off < content.size()) {
    ssize_t n = ::write(fd, content.data() + off, content.size() - off);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      Status s = Errno("cannot write " + tmp);
      ::close(fd);
      ::unlink(tmp.c_str());
      return s;
    }
    off += static_cast<size_t>(n);
  }
  if (::fchmod(fd, static_cast<mode_t>(mode)) != 0 || ::fsync(fd) != 0) {
    Status s = Errno("cannot finish " + tmp);
    ::close(fd);
    ::unlink(tmp.c_str());
    return s;
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

Result<InstalledHook> InstallHook(const std::string& hook_path, const std::string& library,
                                  const std::string& version) {
  Result<std::string> lib = ReadAll(library);
  if (!lib.ok()) {
    return Status(StatusCode::kFailedPrecondition,
                  "libvgpu.so to install not found at " + library + " (set --libvgpu)");
  }
  if (lib->size() < 4 || lib->compare(0, 4,
                                      "\x7f"
                                      "ELF") != 0) {
    return Status(StatusCode::kFailedPrecondition, library + " is not a shared library");
  }
  const std::string dir = hook_path + "/vgpu";
  std::error_code ec;
  std::filesystem::create_directories(dir + "/containers", ec);
  if (ec) return Status(StatusCode::kInternal, "cannot create " + dir + ": " + ec.message());
  ::chmod((dir + "/containers").c_str(), 0755);
  InstalledHook out;
  out.libvgpu_file = "libvgpu.so." + version;
  HAMI_RETURN_IF_ERROR(WriteFileAtomically(dir + "/" + out.libvgpu_file, *lib, 0755, &out.changed));
  HAMI_RETURN_IF_ERROR(WriteFileAtomically(dir + "/libvgpu.so", *lib, 0755, &out.changed));
  HAMI_RETURN_IF_ERROR(
      WriteFileAtomically(dir + "/ld.so.preload", dir + "/libvgpu.so\n", 0644, &out.changed));
  return out;
}

}  // namespace hami::deviceplugin
