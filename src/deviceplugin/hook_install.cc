#include "deviceplugin/hook_install.h"

#include <sys/stat.h>

#include <filesystem>

#include "common/file_util.h"

namespace hami::deviceplugin {

Status RecreateContainerDir(const std::string& dir) {
  std::error_code ec;
  std::filesystem::remove_all(dir, ec);
  if (ec) return Status(StatusCode::kInternal, "cannot clear " + dir + ": " + ec.message());
  std::filesystem::create_directories(dir, ec);
  if (ec) return Status(StatusCode::kInternal, "cannot create " + dir + ": " + ec.message());
  if (chmod(dir.c_str(), 0777) != 0) {
    return Status(StatusCode::kInternal, "cannot chmod " + dir);
  }
  return OkStatus();
}

Status PrepareHookDirectory(const std::string& hook_path) {
  const std::string containers = hook_path + "/vgpu/containers";
  std::error_code ec;
  std::filesystem::create_directories(containers, ec);
  if (ec) return Status(StatusCode::kInternal, "cannot create " + containers + ": " + ec.message());
  ::chmod(containers.c_str(), 0755);
  return OkStatus();
}

Result<InstalledHook> InstallHook(const std::string& hook_path, const std::string& library,
                                  const std::string& version) {
  // A sanitizer build's library is larger than an ordinary one; no build reaches this cap.
  Result<std::string> lib = ReadFileToString(library, size_t{512} << 20);
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
  HAMI_RETURN_IF_ERROR(PrepareHookDirectory(hook_path));
  InstalledHook out;
  out.libvgpu_file = "libvgpu.so." + version;
  HAMI_RETURN_IF_ERROR(WriteFileAtomically(dir + "/" + out.libvgpu_file, *lib, 0755, &out.changed));
  HAMI_RETURN_IF_ERROR(WriteFileAtomically(dir + "/libvgpu.so", *lib, 0755, &out.changed));
  HAMI_RETURN_IF_ERROR(
      WriteFileAtomically(dir + "/ld.so.preload", dir + "/libvgpu.so\n", 0644, &out.changed));
  return out;
}

}  // namespace hami::deviceplugin
