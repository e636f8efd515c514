// Device description of the simulated GPU node: what hardware the sim pretends to have.
//
// The description comes from a small line-oriented config file (format in README.md, next to
// this header) or, when no file is named, from a built-in default of two NVLink-connected
// 80 GiB A100s. Parsing never aborts: a bad file yields an error naming the line and reason.
//
// Thread safety: all functions are pure or read only their arguments; a SimConfig is a value.
#pragma once

#include <stdint.h>

#include <string>
#include <vector>

namespace hami::sim {

inline constexpr int kMaxDevices = 16;
inline constexpr int kMaxNvLinks = 18;  // NVML_NVLINK_MAX_LINKS

struct DeviceSpec {
  std::string name = "NVIDIA A100-SXM4-80GB";
  // "GPU-xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx"; if empty, derived from SimConfig::node and the
  // index (stable)
  std::string uuid;
  uint64_t memory_bytes = 80ull << 30;
  int sm_count = 108;
  int max_threads_per_sm = 2048;
  int cc_major = 8;
  int cc_minor = 0;
  int numa_node = 0;
  int pcie_switch = -1;  // devices sharing a non-negative id sit under one PCIe switch
  uint32_t pci_domain = 0;
  uint32_t pci_bus = 0;  // 0 means "derive from the index"
  uint32_t pci_device = 0;
  uint32_t pci_device_id = 0x20B510DE;  // device id << 16 | vendor id
  // One entry per NVLink, naming the peer device index (a peer may appear several times).
  std::vector<int> nvlink_peers;
};

struct SimConfig {
  // The node this describes (`node = gpu-1`): derived UUIDs depend on it, so two nodes'
  // cards differ as real ones do. Empty: UUIDs derived from the index alone.
  std::string node;
  std::string driver_version = "550.54.15";
  int cuda_driver_version = 12040;
  // How a real driver's timing looks, for tests of code that must cope with it:
  // per-process utilisation sampled once per period (0: computed exactly on every query), and
  // how much GPU time a stream may have queued before a launch blocks (a real driver blocks only
  // on its launch-slot count, about 1024 kernels, however long they run).
  int nvml_sample_ms = 0;
  int max_queued_ms = 200;
  std::vector<DeviceSpec> devices;
};

// The default node: two A100-SXM4-80GB, 108 SMs, NUMA 0 and 1, 12 NVLinks between them.
SimConfig DefaultConfig();

// Parses config text. On success returns true and fills *config (device defaults applied,
// UUIDs and bus ids derived where left out). On failure returns false and sets *error to
// "line N: reason" (or a whole-file reason).
bool ParseConfig(const std::string& text, SimConfig* config, std::string* error);

// Reads and parses the file at `path`; errors name the path.
bool LoadConfigFile(const std::string& path, SimConfig* config, std::string* error);

// Stable 64-bit fingerprint of everything in the config; the shared state records it so that a
// state file built from another config is detected.
uint64_t ConfigFingerprint(const SimConfig& config);

// Parses "GPU-" + 32 hex digits (dashes anywhere after the prefix) into 16 bytes.
bool ParseUuidBytes(const std::string& uuid, unsigned char out[16]);

// Parses a PCI bus id in NVML ("00000000:07:00.0") or CUDA ("0000:07:00.0") form, with or
// without the ".function" suffix.
bool ParsePciBusId(const std::string& text, uint32_t* domain, uint32_t* bus, uint32_t* device);

}  // namespace hami::sim
