// The `hamictl run` request: validation of the user's limit flags and construction of the
// environment that hands those limits to libvgpu.so (the env contract of src/vgpu/config.h).
//
// Everything here is pure so that validation and the env contract are unit-tested without
// starting processes; run.h does the process work.
//
// Thread safety: all functions are pure.
#pragma once

#include <stdint.h>

#include <optional>
#include <string>
#include <vector>

namespace hami::ctl {

// A memory quota from `--mem SIZE` (device == -1: every device) or `--mem IDX=SIZE`.
struct MemQuota {
  int device = -1;
  uint64_t bytes = 0;
};

// An SM quota from `--cores PCT` (device == -1: every device) or `--cores IDX=PCT`.
struct CoreQuota {
  int device = -1;
  int percent = 0;
};

// Flag values exactly as the user typed them (what cmd/hamictl collects).
struct RunFlags {
  std::vector<std::string> mem;
  std::vector<std::string> cores;
  std::string policy;
  std::string priority;
  std::string region;
  bool keep_region = false;
  bool sim = false;
  std::string sim_state;
  std::string lib;
  std::string log_level;
  bool summary = false;
  std::vector<std::string> command;
};

// A validated request.
struct RunSpec {
  std::vector<MemQuota> mem;
  std::vector<CoreQuota> cores;
  std::string policy;           // "", "default", "force" or "disable"
  std::optional<int> priority;  // CUDA_TASK_PRIORITY
  std::string region;           // "" = a fresh region in a new temp dir
  bool keep_region = false;
  bool sim = false;
  std::string sim_state;         // "" = the caller's HAMI_SIM_STATE, else kDefaultSimState
  std::string lib;               // "" = the libvgpu.so next to hamictl
  std::optional<int> log_level;  // LIBCUDA_LOG_LEVEL
  bool summary = false;
  std::vector<std::string> command;
};

inline constexpr char kDefaultSimState[] = "/tmp/hami-sim/state";

// Parses "SIZE" or "IDX=SIZE" (`flag` names the flag in messages). With `allow_zero`, "0" is
// accepted (it means "no limit" in a region); `run` rejects it because leaving the flag out says
// the same thing.
bool ParseMemQuota(const std::string& flag, const std::string& text, bool allow_zero, MemQuota* out,
                   std::string* error);
// Parses "PCT" or "IDX=PCT"; PCT is an integer percentage in [1, 100] ([0, 100] with
// `allow_zero`).
bool ParseCoreQuota(const std::string& flag, const std::string& text, bool allow_zero,
                    CoreQuota* out, std::string* error);

// Validates every flag of `run`. On failure returns false and a one-line reason naming the flag.
bool ValidateRunFlags(const RunFlags& flags, RunSpec* spec, std::string* error);

// Where the artefacts `run` needs are.
struct RunPaths {
  std::string lib;      // libvgpu.so to preload
  std::string sim_dir;  // folder with the simulated libcuda.so.1 / libnvidia-ml.so.1
};

// The environment of the command: `base` (KEY=VALUE strings, normally the caller's environment)
// with the env contract replaced by what `spec` says. Every inherited variable of the contract
// (CUDA_DEVICE_MEMORY_LIMIT*, CUDA_DEVICE_SM_LIMIT*, CUDA_DEVICE_MEMORY_SHARED_CACHE,
// GPU_CORE_UTILIZATION_POLICY, CUDA_TASK_PRIORITY, CUDA_DISABLE_CONTROL) is dropped so that the
// flags alone define the limits; LIBCUDA_LOG_LEVEL is kept unless --log-level is given.
// LD_PRELOAD keeps its entries (a sanitizer runtime must stay first) and gains `paths.lib`.
// With spec.sim, LD_LIBRARY_PATH starts with `paths.sim_dir` and HAMI_SIM_STATE is set.
std::vector<std::string> BuildRunEnv(const RunSpec& spec, const std::vector<std::string>& base,
                                     const RunPaths& paths, const std::string& region_path);

// Value of `key` in a KEY=VALUE list, or nullopt.
std::optional<std::string> EnvValue(const std::vector<std::string>& env, const std::string& key);

// The process environment as KEY=VALUE strings.
std::vector<std::string> CurrentEnvironment();

}  // namespace hami::ctl
