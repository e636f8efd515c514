// Installs what containers preload into the node's hook directory (HOOK_PATH, `/usr/local` in
// HAMi's chart; the files live in `<hook>/vgpu`):
//   libvgpu.so.<version>  the library Allocate mounts into new containers
//   libvgpu.so            the same bytes under the plain name (tools, older layouts)
//   ld.so.preload         one line, `<hook>/vgpu/libvgpu.so`: the path the library has inside
//                         containers, which Allocate mounts at /etc/ld.so.preload
//   containers/           per-container directories (region files), made by Allocate
// Every file is written to a temporary name and renamed into place, and only when its content
// differs: a container that runs keeps the inode it has mounted, whatever the plugin installs
// later, and a crash never leaves a half-written library behind.
//
// Thread safety: not for concurrent use on the same directory (the plugin installs at start).
#pragma once

#include <string>

#include "common/status.h"

namespace hami::deviceplugin {

struct InstalledHook {
  std::string libvgpu_file;  // file name under <hook>/vgpu, e.g. "libvgpu.so.0.1.0"
  bool changed = false;      // something was (re)written
};

// `library`: the libvgpu.so to install; `version`: the suffix of the versioned name.
Result<InstalledHook> InstallHook(const std::string& hook_path, const std::string& library,
                                  const std::string& version);

// Makes `<hook>/vgpu/containers` (0755) and nothing else: what a node whose containers get no
// libvgpu.so (operating modes mig and mps) still needs, since hami-monitor reads that folder and
// the plugin keeps its MIG state beside it.
Status PrepareHookDirectory(const std::string& hook_path);

// Makes `dir` (a container's directory under <hook>/vgpu/containers) anew: empty, and writable
// by every process of the container (mode 0777), whatever an earlier container left there.
Status RecreateContainerDir(const std::string& dir);

}  // namespace hami::deviceplugin
