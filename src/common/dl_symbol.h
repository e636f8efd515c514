// Typed dlsym for libraries loaded at run time (NVML, in src/nvml/library.cc).
//
//   decltype(&nvmlInit_v2) init = nullptr;
//   bool ok = ResolveSymbol(handle, "nvmlInit_v2", &init);
//
// Thread safety: as dlsym.
#pragma once

#include <dlfcn.h>

namespace hami {

// Sets `*out` to the symbol `name` of `handle` (nullptr when absent); true when found.
template <typename Fn>
bool ResolveSymbol(void* handle, const char* name, Fn* out) {
  *out = reinterpret_cast<Fn>(dlsym(handle, name));
  return *out != nullptr;
}

}  // namespace hami
