// Whole-file reads and atomic writes: the one implementation every component uses (kubeconfigs,
// certificates, the installed libvgpu.so and ld.so.preload, the simulators' state files).
//
// Thread safety: functions of their arguments (and the file system).
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

#include "common/status.h"

namespace hami {

inline constexpr size_t kDefaultMaxFileBytes = size_t{16} << 20;

// The whole file. Errors name the path: NotFound, PermissionDenied, InvalidArgument when it is
// larger than `max_bytes` (the cap keeps a path like /dev/zero from hanging a reader), Internal.
Result<std::string> ReadFileToString(const std::string& path,
                                     size_t max_bytes = kDefaultMaxFileBytes);

// Writes `content` to `path` through a temporary file beside it, fsync and rename(2), so readers
// see the old file or the new one, never a part. A file that already holds exactly `content` is
// left alone (its mode too). `*changed` (may be null) is set to true when it wrote and left as it
// was otherwise, so one flag can gather several writes.
Status WriteFileAtomically(const std::string& path, std::string_view content, int mode = 0600,
                           bool* changed = nullptr);

}  // namespace hami
