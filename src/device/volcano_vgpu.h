// Codecs for the annotations of Volcano's vGPU mode (scheduler plugin `deviceshare` with
// `deviceshare.VGPUEnable: true`), the protocol between Volcano's scheduler and a vGPU node agent.
// Wire facts from ../shared/reference/volcano-deviceshare.md, sections 4.2, 4.3, 4.8 and 4.9.
//
// Node side, written by the agent:
//   volcano.sh/node-vgpu-register   one record per GPU, each terminated by ':'
//       UUID "," COUNT "," DEVMEM "," TYPE "," HEALTH "," MODE ":"
//     e.g. "GPU-a,10,15360,NVIDIA-Tesla T4,true,hami-core:GPU-b,10,15360,NVIDIA-Tesla T4,true,"
//          "hami-core:"
//     COUNT = split count, DEVMEM = MiB / gpuMemoryFactor, TYPE = "NVIDIA-" + model name,
//     MODE = hami-core | mig. Agents up to v1.9.x wrote five fields (no MODE), which today's
//     schedulers refuse for the whole node. This is not HAMi's `hami.io/node-nvidia-register`
//     format (node_registration.h).
//   volcano.sh/node-vgpu-handshake  only for schedulers up to Volcano v1.15.0 (removed in v1.15.1).
//   hamivgpu                        the node lock (key without a prefix; gpushare mode uses
//                                   `gpu`): an RFC 3339 time, no owner. HAMi's lock is
//                                   `hami.io/mutex.lock` with an owner (node_lock.h).
//
// Pod side, written by the scheduler (on the Binding from Volcano v1.16, by a pod patch before
// bind up to v1.15):
//   volcano.sh/vgpu-node            node name
//   volcano.sh/vgpu-time            Unix seconds, decimal; the agent writes 2^64-1 when done
//   volcano.sh/vgpu-ids-new         the devices (the scheduler's permanent record)
//   volcano.sh/devices-to-allocate  the same value at first; the agent empties each container's
//                                   entry as it serves it
//   volcano.sh/bind-phase           allocating | success | failed
// Device lists use HAMi's device syntax (pod_devices.h) but join containers with ';' without a
// trailing ';', and have one entry per *requesting* app container (not per container):
//   "GPU-a,NVIDIA,3000,50:GPU-b,NVIDIA,3000,50:;GPU-c,NVIDIA,8000,0:"  = 2 requesting containers
//   ";GPU-c,NVIDIA,8000,0:"                                          = the first one served
//
// Decoders take untrusted annotation text: they never throw or crash, and on any defect return
// InvalidArgument naming the device and field.
//
// Thread safety: pure functions.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"
#include "device/device.h"
#include "device/wire_time.h"

namespace hami::device {

// ---- node registration ----------------------------------------------------------------------

inline constexpr std::string_view kVolcanoNodeRegisterAnnotation = "volcano.sh/node-vgpu-register";

// Writes id, count, devmem, type, health and mode of each device, in the given order (the agent
// sorts by NVML minor number; the scheduler numbers devices by position). index, devcore, numa
// and MIG profiles are not part of the format and are ignored. Fails, naming the device, when
// ValidateNodeDevices does, when type or mode is empty or contains ',' or ':', or when the list
// is empty (the scheduler needs at least one ':' in the value).
Result<std::string> EncodeVolcanoNodeDevices(const std::vector<DeviceInfo>& devices);

// Reads the register value as the scheduler does: the value must contain ':'; pieces between
// ':' that have no ',' are skipped; every other piece needs at least six fields (fields beyond
// the sixth are ignored, as upstream does). A five-field record gets an error that names the
// old agent. Beyond upstream: COUNT and DEVMEM must be non-negative 32-bit integers,
// HEALTH a boolean (Go's ParseBool spellings), TYPE and MODE non-empty, and the list passes
// ValidateNodeDevices. Decoded devices carry index = position, devcore = 0, numa = 0.
Result<std::vector<DeviceInfo>> DecodeVolcanoNodeDevices(std::string_view text);

// The node's mode as the scheduler sees it: the mode of the last record, kModeMig only when it
// is exactly "mig", kModeHamiCore otherwise (also for an empty list).
std::string_view VolcanoNodeMode(const std::vector<DeviceInfo>& devices);

// ---- handshake (schedulers up to v1.15.0) ---------------------------------------------------

inline constexpr std::string_view kVolcanoNodeHandshakeAnnotation =
    "volcano.sh/node-vgpu-handshake";

// "Reported <YYYY-MM-DD HH:MM:SS> +0000 UTC" for a UTC time: old schedulers accept any value
// without "Requesting"/"Deleted" as a live report.
std::string EncodeVolcanoHandshakeReported(const CivilTime& utc);

// Whether an old scheduler has stamped the value ("Requesting_..." or "Deleted_..." anywhere in
// it, as that scheduler tests) and so waits for the agent to report again. False for an empty
// value (no old scheduler has seen the node) and for the agent's own report.
bool VolcanoHandshakeAwaitsReport(std::string_view value);

// ---- node lock ------------------------------------------------------------------------------

inline constexpr std::string_view kVolcanoNodeLockAnnotation = "hamivgpu";
inline constexpr std::string_view kVolcanoGpuShareNodeLockAnnotation = "gpu";
// The scheduler takes over a lock older than this.
inline constexpr int64_t kVolcanoNodeLockExpirySeconds = 300;

// RFC 3339 with second precision, in the zone the timestamp carries.
std::string EncodeVolcanoNodeLock(const Timestamp& t);
// An RFC 3339 time; anything else is an error (which the scheduler, too, cannot get past until
// the agent deletes the annotation).
Result<Timestamp> DecodeVolcanoNodeLock(std::string_view text);
// Whether a lock taken at `lock` is older than the expiry at `now_unix_seconds`.
bool VolcanoNodeLockExpired(const Timestamp& lock, int64_t now_unix_seconds);

// ---- pod annotations ------------------------------------------------------------------------

inline constexpr std::string_view kVolcanoVgpuNodeAnnotation = "volcano.sh/vgpu-node";
inline constexpr std::string_view kVolcanoVgpuTimeAnnotation = "volcano.sh/vgpu-time";
inline constexpr std::string_view kVolcanoVgpuIdsAnnotation = "volcano.sh/vgpu-ids-new";
inline constexpr std::string_view kVolcanoDevicesToAllocateAnnotation =
    "volcano.sh/devices-to-allocate";
inline constexpr std::string_view kVolcanoBindPhaseAnnotation = "volcano.sh/bind-phase";
inline constexpr std::string_view kVolcanoBindTimeAnnotation = "volcano.sh/bind-time";
// Pod's wish for a node mode (hami-core | mig); absent = any.
inline constexpr std::string_view kVolcanoVgpuModeAnnotation = "volcano.sh/vgpu-mode";

inline constexpr std::string_view kVolcanoBindPhaseAllocating = "allocating";
inline constexpr std::string_view kVolcanoBindPhaseSuccess = "success";
inline constexpr std::string_view kVolcanoBindPhaseFailed = "failed";

// The device type Volcano writes into every device entry.
inline constexpr std::string_view kVolcanoDeviceType = "NVIDIA";

// What the agent writes into vgpu-time once a pod is served, so that it sorts after every pod
// still waiting (upstream's marker; our selection also checks bind-phase and the pod phase).
inline constexpr uint64_t kVolcanoVgpuTimeDone = UINT64_MAX;

// Decimal vgpu-time as Go's strconv.ParseUint(s, 10, 64) reads it: ASCII digits only, no sign,
// at most 2^64-1. nullopt otherwise (upstream then orders the pod last).
std::optional<uint64_t> ParseVolcanoTime(std::string_view text);
std::string FormatVolcanoTime(uint64_t seconds);

// Containers' entries joined with ';' (no trailing ';'); each entry in HAMi's device syntax.
// An empty list encodes as "", which decodes as one empty entry: the format cannot say "no
// containers", and the scheduler never writes a pod without one.
std::string EncodeVolcanoPodDevices(const PodSingleDevice& pod);

// Splits on ';' keeping every entry, empty ones included: N entries are N-1 separators, so ""
// is one empty entry and "X;" is X then an empty entry. Each entry is read by
// DecodeContainerDevices (pod_devices.h: segments without ',' skipped; at least UUID,TYPE,MEM,
// CORES, a non-empty UUID and TYPE, MEM and CORES non-negative 32-bit integers); errors name the
// entry. Volcano's MIG device names (`GPU-<uuid>[<group>-<position>]`) pass as UUIDs.
Result<PodSingleDevice> DecodeVolcanoPodDevices(std::string_view text);

// Everything the scheduler recorded on a pod for Volcano vGPU.
struct VolcanoAssignment {
  std::string node;                          // vgpu-node; empty when absent
  std::optional<uint64_t> time;              // vgpu-time; nullopt when absent or unreadable
  std::string bind_phase;                    // bind-phase; empty when absent
  std::optional<PodSingleDevice> to_allocate;  // devices-to-allocate; nullopt when absent
  std::optional<PodSingleDevice> ids;          // vgpu-ids-new; nullopt when absent

  // The order key of the agent's pod choice: unreadable or absent times sort last.
  uint64_t TimeOrLast() const { return time.value_or(UINT64_MAX); }
  friend bool operator==(const VolcanoAssignment&, const VolcanoAssignment&) = default;
};

// Reads the annotations above from a pod's annotations. Only a malformed device list is an
// error (named by its key); a missing or unreadable vgpu-time is not (see TimeOrLast).
Result<VolcanoAssignment> DecodeVolcanoAssignment(const Annotations& annotations);

}  // namespace hami::device
