// Pins the glibc symbols libvgpu.so references to old versions, so that a library built on a
// current distribution still loads into containers with an old glibc (floor: glibc 2.17, e.g.
// CentOS 7). Without this, linking against glibc >= 2.34 binds dlsym, pthread_* and friends to
// GLIBC_2.34, which older glibc does not have. Force-included into every translation unit of
// the library; check_abi.sh verifies the result. dlsym itself is not pinned: the library defines
// it (the override) and reaches glibc's through dlvsym.
#pragma once

#include <features.h>

#if defined(__x86_64__) && defined(__GLIBC__)
#define VGPU_PIN(sym, ver) __asm__(".symver " #sym "," #sym "@" ver);
VGPU_PIN(dlvsym, "GLIBC_2.2.5")
VGPU_PIN(dlopen, "GLIBC_2.2.5")
VGPU_PIN(dlerror, "GLIBC_2.2.5")
VGPU_PIN(memcpy, "GLIBC_2.2.5")
VGPU_PIN(pthread_create, "GLIBC_2.2.5")
VGPU_PIN(pthread_attr_setstacksize, "GLIBC_2.2.5")
VGPU_PIN(pthread_sigmask, "GLIBC_2.2.5")
#undef VGPU_PIN
#endif
