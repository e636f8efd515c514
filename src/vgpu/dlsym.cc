// The dlsym override and the table of hooked entry points.
//
// Why dlsym: the CUDA runtime and nvidia-smi do not link libcuda/libnvidia-ml; they dlopen them
// and fetch entry points with dlsym(handle, name), which does not see preloaded definitions.
// Returning our hook for the names we intercept closes that path. Everything else, and every
// RTLD_NEXT lookup, goes to glibc unchanged.
#include <dlfcn.h>
#include <elf.h>
#include <link.h>
#include <stddef.h>
#include <string.h>

#include <atomic>

#include "nvml/abi.h"
#include "vgpu/cuda_abi.h"
#include "vgpu/dlsym_hook.h"
#include "vgpu/export.h"
#include "vgpu/runtime.h"

// Every exported CUDA hook; defined in hooks_cuda.cc.
// One entry per line; clang-format reflows X-macro lists differently on each pass.
// clang-format off
#define VGPU_CUDA_HOOKS(X) \
  X(cuInit) \
  X(cuGetProcAddress) \
  X(cuGetProcAddress_v2) \
  X(cuMemAlloc_v2) \
  X(cuMemFree_v2) \
  X(cuMemAllocPitch_v2) \
  X(cuMemAllocManaged) \
  X(cuMemAllocAsync) \
  X(cuMemAllocAsync_ptsz) \
  X(cuMemFreeAsync) \
  X(cuMemFreeAsync_ptsz) \
  X(cuMemAllocFromPoolAsync) \
  X(cuMemAllocFromPoolAsync_ptsz) \
  X(cuMemCreate) \
  X(cuMemRelease) \
  X(cuArrayCreate_v2) \
  X(cuArray3DCreate_v2) \
  X(cuArrayDestroy) \
  X(cuMipmappedArrayCreate) \
  X(cuMipmappedArrayDestroy) \
  X(cuMemGetInfo_v2) \
  X(cuDeviceTotalMem_v2) \
  X(cuLaunchKernel) \
  X(cuLaunchKernel_ptsz) \
  X(cuLaunchKernelEx) \
  X(cuLaunchKernelEx_ptsz) \
  X(cuLaunchCooperativeKernel) \
  X(cuLaunchCooperativeKernel_ptsz) \
  X(cuGraphInstantiateWithFlags) \
  X(cuGraphInstantiate) \
  X(cuGraphInstantiate_v2) \
  X(cuGraphLaunch) \
  X(cuGraphLaunch_ptsz) \
  X(cuGraphExecDestroy)
// clang-format on

// Every exported NVML hook; defined in hooks_nvml.cc.
// One entry per line; clang-format reflows X-macro lists differently on each pass.
// clang-format off
#define VGPU_NVML_HOOKS(X) \
  X(nvmlDeviceGetMemoryInfo) \
  X(nvmlDeviceGetMemoryInfo_v2)
// clang-format on

// Code that a sanitizer runtime may reach while it initialises (it resolves its interceptors
// with dlsym before its shadow memory exists) must not be instrumented and must not call
// intercepted libc functions.
#define VGPU_EARLY __attribute__((no_sanitize_address, no_sanitize_thread, no_sanitize_undefined))

namespace hami::vgpu {
namespace {

VGPU_EARLY bool StrEq(const char* a, const char* b) {
  while (*a != '\0' && *a == *b) {
    ++a;
    ++b;
  }
  return *a == *b;
}

VGPU_EARLY size_t StrLen(const char* s) {
  size_t n = 0;
  while (s[n] != '\0') ++n;
  return n;
}

struct HookEntry {
  const char* name;
  void* hook;
  size_t real_offset;  // where RealCuda keeps the driver's address of this name
};

#define VGPU_ENTRY(name) {#name, reinterpret_cast<void*>(&::name), offsetof(RealCuda, name)},
const HookEntry kCudaHooks[] = {VGPU_CUDA_HOOKS(VGPU_ENTRY)};
#undef VGPU_ENTRY
#define VGPU_ENTRY(name) {#name, reinterpret_cast<void*>(&::name), 0},
const HookEntry kNvmlHooks[] = {VGPU_NVML_HOOKS(VGPU_ENTRY)};
#undef VGPU_ENTRY

constexpr int kNumCuda = sizeof(kCudaHooks) / sizeof(kCudaHooks[0]);
constexpr int kNumNvml = sizeof(kNvmlHooks) / sizeof(kNvmlHooks[0]);

constinit std::atomic<void*> g_cuda_real[kNumCuda] = {};
constinit std::atomic<void*> g_nvml_real[kNumNvml] = {};

using DlsymFn = void* (*)(void*, const char*);
// Accessed with __atomic builtins rather than std::atomic: its out-of-line member functions
// would be instrumented, and this is read on the early (pre-sanitizer-init) path.
constinit DlsymFn g_real_dlsym = nullptr;

// Base names whose export carries a version suffix, with the CUDA version that introduced it
// (the same mapping the driver's headers apply). Higher versions first.
struct VersionedName {
  const char* base;
  const char* versioned;
  int min_version;
};
const VersionedName kVersioned[] = {
    {"cuMemAlloc", "cuMemAlloc_v2", 3020},
    {"cuMemFree", "cuMemFree_v2", 3020},
    {"cuMemAllocPitch", "cuMemAllocPitch_v2", 3020},
    {"cuMemGetInfo", "cuMemGetInfo_v2", 3020},
    {"cuDeviceTotalMem", "cuDeviceTotalMem_v2", 3020},
    {"cuArrayCreate", "cuArrayCreate_v2", 3020},
    {"cuArray3DCreate", "cuArray3DCreate_v2", 3020},
    {"cuGetProcAddress", "cuGetProcAddress_v2", 12000},
    {"cuGraphInstantiate", "cuGraphInstantiateWithFlags", 12000},
};

}  // namespace

namespace {

// Finds glibc's dlsym by reading the dynamic symbol table of libc.so.6 (or libdl.so.2 on glibc
// < 2.34), reaching the loaded objects through the loader's link map (_r_debug, plain data).
// Unlike dlvsym or dl_iterate_phdr, this calls no function at all, so it is safe even when our
// dlsym override is called by a sanitizer runtime during its own initialisation, before its
// interceptors of those functions work.
struct LookupState {
  const char* name;
  void* found;
};

template <typename T>
VGPU_EARLY T DynPtr(ElfW(Addr) base, ElfW(Addr) value) {
  // Most architectures relocate the dynamic section's pointers in place; some keep them as
  // offsets. A value below the load base is an offset.
  if (value < base) value += base;
  return reinterpret_cast<T>(value);
}

VGPU_EARLY bool EndsWith(const char* s, const char* suffix) {
  size_t n = StrLen(s), m = StrLen(suffix);
  return n >= m && StrEq(s + n - m, suffix);
}

// Looks `st->name` up in one loaded object; returns 1 when found.
VGPU_EARLY int FindInObject(const link_map* map, LookupState* st) {
  const char* obj = map->l_name;
  if (obj == nullptr || !(EndsWith(obj, "/libc.so.6") || EndsWith(obj, "/libdl.so.2"))) return 0;
  const ElfW(Addr) base = map->l_addr;
  const ElfW(Dyn)* dyn = map->l_ld;
  if (dyn == nullptr) return 0;
  const ElfW(Sym)* symtab = nullptr;
  const char* strtab = nullptr;
  const uint32_t* gnu_hash = nullptr;
  const ElfW(Half)* versym = nullptr;
  for (; dyn->d_tag != DT_NULL; ++dyn) {
    switch (dyn->d_tag) {
      case DT_SYMTAB:
        symtab = DynPtr<const ElfW(Sym)*>(base, dyn->d_un.d_ptr);
        break;
      case DT_STRTAB:
        strtab = DynPtr<const char*>(base, dyn->d_un.d_ptr);
        break;
      case DT_GNU_HASH:
        gnu_hash = DynPtr<const uint32_t*>(base, dyn->d_un.d_ptr);
        break;
      case DT_VERSYM:
        versym = DynPtr<const ElfW(Half)*>(base, dyn->d_un.d_ptr);
        break;
      default:
        break;
    }
  }
  if (symtab == nullptr || strtab == nullptr || gnu_hash == nullptr) return 0;
  uint32_t h = 5381;
  for (const char* c = st->name; *c; ++c) h = h * 33 + static_cast<unsigned char>(*c);
  const uint32_t nbuckets = gnu_hash[0], symoffset = gnu_hash[1], bloom_size = gnu_hash[2];
  const auto* bloom = reinterpret_cast<const ElfW(Addr)*>(gnu_hash + 4);
  const auto* buckets = reinterpret_cast<const uint32_t*>(bloom + bloom_size);
  const uint32_t* chain = buckets + nbuckets;
  if (nbuckets == 0) return 0;
  uint32_t idx = buckets[h % nbuckets];
  if (idx < symoffset) return 0;
  void* fallback = nullptr;
  for (;; ++idx) {
    uint32_t h2 = chain[idx - symoffset];
    const ElfW(Sym)& sym = symtab[idx];
    if ((h | 1) == (h2 | 1) && sym.st_shndx != SHN_UNDEF &&
        ELF64_ST_TYPE(sym.st_info) == STT_FUNC && StrEq(strtab + sym.st_name, st->name)) {
      void* addr = reinterpret_cast<void*>(base + sym.st_value);
      // Prefer the default version (not hidden) when several are defined.
      if (versym == nullptr || (versym[idx] & 0x8000) == 0) {
        st->found = addr;
        return 1;
      }
      fallback = addr;
    }
    if (h2 & 1) break;
  }
  if (fallback != nullptr) {
    st->found = fallback;
    return 1;
  }
  return 0;
}

}  // namespace

VGPU_EARLY void* RealDlsym(void* handle, const char* name) {
  DlsymFn f = __atomic_load_n(&g_real_dlsym, __ATOMIC_ACQUIRE);
  if (f == nullptr) {
    LookupState st{"dlsym", nullptr};
    for (const link_map* m = _r_debug.r_map; m != nullptr && st.found == nullptr; m = m->l_next) {
      FindInObject(m, &st);
    }
    f = reinterpret_cast<DlsymFn>(st.found);
    if (f == nullptr) {
      // Unusual libc layout: fall back to asking the loader (newest glibc first).
      static const char* const kVersions[] = {"GLIBC_2.34", "GLIBC_2.2.5", "GLIBC_2.17"};
      for (const char* v : kVersions) {
        f = reinterpret_cast<DlsymFn>(dlvsym(RTLD_NEXT, "dlsym", v));
        if (f != nullptr) break;
      }
    }
    if (f == nullptr) return nullptr;
    __atomic_store_n(&g_real_dlsym, f, __ATOMIC_RELEASE);
  }
  return f(handle, name);
}

VGPU_EARLY void* HookFor(const char* name) {
  if (name[0] == 'c') {
    for (const auto& e : kCudaHooks) {
      if (StrEq(e.name, name)) return e.hook;
    }
  } else if (name[0] == 'n') {
    for (const auto& e : kNvmlHooks) {
      if (StrEq(e.name, name)) return e.hook;
    }
  }
  return nullptr;
}

void ResolveHookTargets(const RealCuda& real) {
  // Every hooked name is also in RealCuda (resolved once by the runtime): copy, do not look up
  // again (each dlsym costs microseconds of start-up).
  for (int i = 0; i < kNumCuda; ++i) {
    void* p;
    memcpy(&p, reinterpret_cast<const char*>(&real) + kCudaHooks[i].real_offset, sizeof(p));
    g_cuda_real[i].store(p, std::memory_order_relaxed);
  }
}

void ResolveNvmlHookTargets(void* handle) {
  for (int i = 0; i < kNumNvml; ++i) {
    g_nvml_real[i].store(RealDlsym(handle, kNvmlHooks[i].name), std::memory_order_relaxed);
  }
}

void* MapRealToHook(void* real) {
  if (real == nullptr) return nullptr;
  for (int i = 0; i < kNumCuda; ++i) {
    if (g_cuda_real[i].load(std::memory_order_relaxed) == real) return kCudaHooks[i].hook;
  }
  return real;
}

const char* VersionedHookName(const char* symbol, int cuda_version, unsigned long long flags) {
  for (const auto& v : kVersioned) {
    if (strcmp(v.base, symbol) == 0 && cuda_version >= v.min_version) return v.versioned;
  }
  for (const auto& e : kCudaHooks) {
    if (strcmp(e.name, symbol) != 0) continue;
    if ((flags & CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM) != 0) {
      char ptsz[96];
      size_t n = strlen(symbol);
      if (n + 6 < sizeof(ptsz)) {
        memcpy(ptsz, symbol, n);
        memcpy(ptsz + n, "_ptsz", 6);
        for (const auto& p : kCudaHooks) {
          if (strcmp(p.name, ptsz) == 0) return p.name;
        }
      }
    }
    return e.name;
  }
  return nullptr;
}

}  // namespace hami::vgpu

// glibc declares dlsym's name nonnull; the check is kept for callers that break that contract.
#pragma GCC diagnostic ignored "-Wnonnull-compare"
VGPU_EXPORT VGPU_EARLY void* dlsym(void* handle, const char* name) {
  using hami::vgpu::HookFor;
  using hami::vgpu::RealDlsym;
  if (name != nullptr && handle != RTLD_NEXT &&
      ((name[0] == 'c' && name[1] == 'u') ||
       (name[0] == 'n' && name[1] == 'v' && name[2] == 'm' && name[3] == 'l'))) {
    void* hook = HookFor(name);
    if (hook != nullptr) {
      // Hand out a hook only for functions the library behind `handle` really has.
      return RealDlsym(handle, name) != nullptr ? hook : nullptr;
    }
  }
  return RealDlsym(handle, name);
}
