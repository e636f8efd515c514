// Human-readable rendering of the quantities hamictl prints: byte sizes, MiB, timestamps.
//
// Thread safety: all functions are pure.
#pragma once

#include <stdint.h>

#include <string>
#include <vector>

namespace hami::ctl {

// "0 B", "512 B", "256 MiB", "4 GiB", "1.50 GiB": the largest binary unit that keeps the value at
// least 1, with two decimals unless the value is a whole number of that unit.
std::string FormatBytes(uint64_t bytes);

// Whole MiB, rounded down (what nvidia-smi shows).
uint64_t ToMiB(uint64_t bytes);

// "2024-05-01 10:00:00 UTC"; "never" for 0.
std::string FormatEpochSeconds(uint64_t seconds);

// "1.234 s", "12.5 ms", "0 s" for a duration in nanoseconds.
std::string FormatDurationNs(uint64_t ns);

// Left-aligned columns separated by two spaces; rows[0] is the header. Rows may be shorter
// than the header (missing cells are blank). No trailing spaces.
std::string RenderTable(const std::vector<std::vector<std::string>>& rows);

}  // namespace hami::ctl
