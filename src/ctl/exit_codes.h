// Exit statuses of hamictl, shared by every verb.
//
// `run` follows the convention of env(1) and container runtimes: the command's own status when
// it ran, 125 when hamictl failed before starting it, 126 when it cannot be executed, 127 when it
// is not found. A command killed by signal N gives 128 + N, as in a shell.
//
// Thread safety: constants only.
#pragma once

namespace hami::ctl {

inline constexpr int kExitOk = 0;
inline constexpr int kExitFailure = 1;  // the operation ran and failed (or a check failed)
inline constexpr int kExitUsage = 2;    // bad flags or arguments
inline constexpr int kExitRunFailed = 125;
inline constexpr int kExitCannotExec = 126;
inline constexpr int kExitNotFound = 127;

}  // namespace hami::ctl
