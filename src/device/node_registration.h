// Codec for the node registration annotation (`hami.io/node-nvidia-register` and the other
// vendors' `hami.io/node-<x>-register`): the list of devices a node's device plugin reports.
//
// Two wire formats, both byte-compatible with upstream HAMi:
//  - JSON (v2.8+): an array of objects with keys in the order id, index, count, devmem, devcore,
//    type, numa, mode, migProfiles, health; every key omitted when zero/empty/false (so a
//    missing `health` means unhealthy). MIG profiles always carry name, memoryMB, core,
//    sliceCount, placements.
//      [{"id":"GPU-a","count":10,"devmem":32768,"devcore":100,"type":"NVIDIA-Tesla V100",
//        "mode":"hami-core","health":true}]
//  - Legacy text (<= v2.7, still used by some vendors): each device is
//    `id,count,devmem,devcore,type,numa,health[,index,mode]` followed by ':'. Seven-field
//    entries mean index 0, mode hami-core.
//      GPU-a,10,46068,100,NVIDIA-NVIDIA A40,0,true:
//
// Decoders take untrusted annotation text: they never throw, and on any defect return
// InvalidArgument naming the device and field. Beyond upstream's syntax checks they also reject
// what would corrupt a ledger or a pod device list: an empty id, an id containing , : or ;,
// duplicate ids, text that is not UTF-8, negative count/devmem/devcore.
//
// Thread safety: pure functions.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"
#include "device/device.h"

namespace hami::device {

// JSON form, exactly as upstream's MarshalNodeDevices writes it (`vendor` is not encoded).
std::string EncodeNodeDevicesJson(const std::vector<DeviceInfo>& devices);
Result<std::vector<DeviceInfo>> DecodeNodeDevicesJson(std::string_view text);

enum class LegacyFields {
  kSeven,  // id,count,devmem,devcore,type,numa,health   (v2.4-era plugins, seed 003)
  kNine,   // ...,index,mode                             (what upstream's encoder writes today)
};

// Legacy text form. Fails when a text field contains ',' or ':' (it could not be decoded back),
// or, for kSeven, when a device is not index 0 in hami-core mode (the form cannot say so) or
// carries MIG profiles.
Result<std::string> EncodeNodeDevicesLegacy(const std::vector<DeviceInfo>& devices,
                                            LegacyFields fields = LegacyFields::kNine);
Result<std::vector<DeviceInfo>> DecodeNodeDevicesLegacy(std::string_view text);

// Either form: JSON when the first non-blank character is '[' (or the value is "null"), legacy
// text otherwise.
Result<std::vector<DeviceInfo>> DecodeNodeDevices(std::string_view text);

// The semantic checks the decoders apply (exposed for encoders' callers and tests).
Status ValidateNodeDevices(const std::vector<DeviceInfo>& devices);

}  // namespace hami::device
