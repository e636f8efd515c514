// `hamictl run`: starts a command with libvgpu.so preloaded and the limits of a RunSpec, waits
// for it and returns its exit status.
//
// The region: a fresh file in a new temp dir (removed afterwards unless keep_region), or the
// file the user named (shared with other commands, never removed). hamictl creates it before the
// command starts, from the same environment libvgpu reads, so `hamictl region show` works at
// once and a named region that already exists with other limits is reported.
//
// While the command runs, SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGUSR1 and SIGUSR2 sent to hamictl
// are forwarded to it (signals the caller ignores stay ignored; signals the terminal sends are not
// forwarded because the terminal already sent them to the command's process group).
//
// Thread safety: RunCommand forks and installs process-wide signal handlers for its duration;
// call it from one thread of a single-threaded process.
#pragma once

#include <ostream>
#include <string>

#include "ctl/layout.h"
#include "ctl/run_spec.h"

namespace hami::ctl {

// Messages (errors, warnings, the --summary lines) go to `err`. Returns the exit status to
// report (see exit_codes.h).
int RunCommand(const RunSpec& spec, const Layout& layout, std::ostream& err);

// Finds `name` the way execvp does, in `path_var` (a PATH value). Returns kExitOk and the path,
// or kExitNotFound / kExitCannotExec with a one-line reason.
int ResolveCommand(const std::string& name, const std::string& path_var, std::string* resolved,
                   std::string* error);

}  // namespace hami::ctl
