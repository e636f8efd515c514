// Random UUIDs (RFC 4122 version 4, lower-case "8-4-4-4-12" hex): region file names, the
// simulated API server's object UIDs and admission request UIDs.
//
// Thread safety: safe from any thread (each thread has its own generator, seeded from
// std::random_device).
#pragma once

#include <string>

namespace hami {

std::string NewRandomUuid();

}  // namespace hami
