// Shared by device/config.cc (the YAML reader) and config_defaults.cc (the built-in chips); not
// part of device/config.h's API.
#pragma once

#include "device/config.h"

namespace hami::device::config_internal {

// Puts a chip's templates in memory order (smallest first, ties as listed): how every Ascend
// chip is kept, parsed or built in.
void SortTemplates(AscendChipConfig* c);

}  // namespace hami::device::config_internal
