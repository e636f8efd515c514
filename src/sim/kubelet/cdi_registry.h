// The container runtime's CDI registry, as containerd with CDI enabled has it: the devices the
// spec files in its spec directories define (`<kind>=<name>`). A container named a device no spec
// defines is not started ("unresolvable CDI devices ..."), which is what makes a device plugin's
// missing spec visible on the simulated node as on a real one.
//
// Spec files are *.json, *.yaml and *.yml, read afresh at each lookup (containerd refreshes its
// cache when the directories change); a file that cannot be read is skipped with a warning, as
// the runtime reports spec errors but still resolves the other files' devices.
//
// Thread safety: a pure function of the file system.
#pragma once

#include <set>
#include <string>
#include <vector>

namespace hami::sim {

// Every fully qualified device name the spec files in `dirs` define. A missing directory defines
// none.
std::set<std::string> CdiDeviceNames(const std::vector<std::string>& dirs);

}  // namespace hami::sim
