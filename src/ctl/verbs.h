// hamictl's verbs as functions: each takes the parsed flag values, writes its result to `out`
// and its messages to `err` (one line each, prefixed "hamictl: "), and returns the exit status
// (exit_codes.h). cmd/hamictl/main.cc parses flags and calls exactly one of these.
//
// Thread safety: each verb is meant to be the one thing the process does (run and demo fork and
// install signal handlers).
#pragma once

#include <ostream>
#include <string>
#include <vector>

#include "ctl/run_spec.h"

namespace hami::ctl {

int RunVerb(const RunFlags& flags, std::ostream& err);

int RegionShowVerb(const std::string& path, bool json, std::ostream& out, std::ostream& err);
// wait_ms < 0 is a usage error; 0 means do not wait.
int RegionSuspendVerb(const std::string& path, int wait_ms, std::ostream& out, std::ostream& err);
int RegionResumeVerb(const std::string& path, std::ostream& out, std::ostream& err);
int RegionSweepVerb(const std::string& path, std::ostream& out, std::ostream& err);
int RegionSetVerb(const std::string& path, const std::vector<std::string>& mem,
                  const std::vector<std::string>& cores, std::ostream& out, std::ostream& err);

int SmiVerb(bool json, std::ostream& out, std::ostream& err);

// build_dir "" = the build tree hamictl itself sits in.
int DemoVerb(const std::string& build_dir, std::ostream& out, std::ostream& err);

}  // namespace hami::ctl
