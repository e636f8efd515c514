// Helpers for the simulated driver's integration tests: spawning worker processes with their
// own environment and pipes, and loading the simulated libraries through dlopen.
//
// Thread safety: single-threaded test code.
#pragma once

#include <sys/types.h>

#include <map>
#include <string>
#include <utility>
#include <vector>

#include "nvml/abi.h"
#include "vgpu/cuda_abi.h"

namespace hami::simtest {

// A child process with pipes to its stdin, stdout and stderr.
struct Child {
  pid_t pid = -1;
  int in_fd = -1;   // write end of the child's stdin
  int out_fd = -1;  // read end of the child's stdout
  int err_fd = -1;  // read end of the child's stderr
};

using Env = std::vector<std::pair<std::string, std::string>>;  // value "\x01" = unset

// Starts `argv` (argv[0] is the program path) with `env` applied on top of ours.
Child Spawn(const std::vector<std::string>& argv, const Env& env);
// Reads one line (without '\n') from fd; returns false at EOF.
bool ReadLine(int fd, std::string* line);
std::string ReadAll(int fd);
// Closes the pipes and waits; returns the exit status (or 128+signal).
int Finish(Child* c, std::string* out = nullptr, std::string* err = nullptr);

// The CUDA driver entry points the workers use, resolved with dlsym.
struct Cuda {
  void* lib = nullptr;
#define HAMI_CU_FN(name) decltype(&::name) name = nullptr;
#include "sim_test_cuda_fns.inc"
#undef HAMI_CU_FN
  bool Load();
};

struct Nvml {
  void* lib = nullptr;
#define HAMI_NVML_FN(name) decltype(&::name) name = nullptr;
#include "sim_test_nvml_fns.inc"
#undef HAMI_NVML_FN
  bool Load();
};

}  // namespace hami::simtest
