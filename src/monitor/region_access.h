// RegionAccess: what the node monitor reads and writes in a container's shared region, over the
// two layouts it knows: hami-cpp's own (src/vgpu/region.h) and, as a migration aid for nodes
// that still run containers started under HAMi-core, HAMi-core's 1.x layout (its shared
// region file: magic 19920718, major 1, 2,008,952 bytes; per-device usage summed
// over its process slots). Both are mapped shared; reads take no lock (each value is whole);
// the monitor writes only host PIDs and the feedback fields, as upstream's monitor does.
//
// The file is writable from inside its container, so the monitor never maps it: a mapping read
// past the end of a file that was truncated meanwhile raises SIGBUS, which would take the whole
// node's monitor down. Refresh() reads the header part and the live process slots with pread
// (a few KiB per container); the setters write single fields with pwrite, which every process
// mapping the file sees at once (one page cache).
//
// Thread safety: one thread at a time per object (the monitor's lock); the processes using the
// region may run concurrently.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

namespace hami::monitor {

struct RegionDeviceFigures {
  std::string uuid;
  uint64_t limit = 0, used = 0;  // bytes
  uint64_t context = 0, module = 0, buffer = 0;
  uint32_t sm_limit = 0;  // percent; 0 = none
};

struct RegionSlotView {
  int pid = 0;  // in the container's PID namespace; 0 = free
  int host_pid = 0;
  uint64_t start_time = 0;  // /proc stat field 22; 0 when the layout has none
};

class RegionAccess {
 public:
  virtual ~RegionAccess() = default;
  virtual const char* Format() const = 0;  // "hami-cpp" or "HAMi-core 1.x"

  // Reads the region's current state; the getters below answer from it. False (and `*why`)
  // when the file no longer holds a whole region (truncated, overwritten).
  virtual bool Refresh(std::string* why) = 0;

  virtual int DeviceCount() const = 0;
  virtual std::string Uuid(int dev) const = 0;
  // Quota and usage of one device, summed over the region's processes.
  virtual RegionDeviceFigures Device(int dev) const = 0;
  int FindDevice(const std::string& uuid) const;

  virtual uint64_t LastKernelTime() const = 0;  // epoch seconds; 0 = never
  virtual int32_t Priority() const = 0;
  virtual int32_t RecentKernel() const = 0;
  // Replaces recent_kernel only if it still holds `expected` (a launch may have marked it).
  virtual bool ReplaceRecentKernel(int32_t expected, int32_t desired) = 0;
  virtual int32_t UtilizationSwitch() const = 0;
  virtual void SetUtilizationSwitch(int32_t value) = 0;

  virtual int SlotCount() const = 0;
  // Any index is safe: one at or past SlotCount() (the count may shrink between refreshes)
  // reads as a free slot.
  virtual RegionSlotView Slot(int i) const = 0;
  virtual void SetHostPid(int i, int host_pid) = 0;
};

// Opens the region file at `path` and reads it once; nullptr and `*error` (naming the file) when
// it is neither layout.
std::unique_ptr<RegionAccess> OpenRegion(const std::string& path, std::string* error);

// HAMi-core 1.x's file size and magic, for tests that build such a file.
inline constexpr size_t kHamiCoreV1Size = 2008952;
inline constexpr int32_t kHamiCoreMagic = 19920718;

}  // namespace hami::monitor
