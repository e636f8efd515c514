// AWS Neuron (Inferentia and Trainium): key "AWSNeuron", enabled by the `awsneuron:` section.
// AWS's device plugin registers no HAMi annotation, so the devices come from node capacity, as
// upstream's module reads them:
//  - `aws.amazon.com/neuron` (devices) and `aws.amazon.com/neuroncore` (cores): devices
//    `<node>-AWSNeuron-<i>`, one task per core, no memory, devcore = the bitmask of the
//    device's cores (two cores: 3). The cores per device are this node's own ratio (upstream
//    keeps the first node's for the whole cluster).
//  - the node label `node.kubernetes.io/instance-type` is the devices' mode: multi-device
//    requests follow the instance's ring (below).
// Requests (limits, else requests):
//  - `aws.amazon.com/neuron: n` takes n whole devices (every core);
//  - `aws.amazon.com/neuroncore: c` takes c cores of one device for c <= 2, else c/2 whole
//    two-core shares on c/2 devices (an odd c above 1 is refused, as upstream refuses it);
//  - both must be integers above 0; neuron wins when both are given.
// A core request gets the lowest free cores of its device (Vendor::cores_as_bitmask); device
// lists record the mask (`<id>,AWSNeuron,0,<mask>`). Several devices are taken idle, in a
// window of consecutive indices: any start on Inferentia (instance type containing "inf"),
// 1, 4, 8 or 16 devices aligned to their size elsewhere (Trainium's rings); otherwise
// NumaNotFit.
// Pods get `hami.io/aws-neuron-devices-allocated` and, for AWS's plugin, `AWS_NEURON_IDS`
// (device indices for device requests; core numbers cores-per-device x index + bit for core
// requests, with `NEURON_RESOURCE_TYPE=aws.amazon.com/neuroncore`), `NEURON_ALLOC_TIME` (unix
// ns), `NEURON_ALLOCATED=false` and `aws.amazon.com/predicate-node`. Core numbers cover every
// core of a device (upstream names only its first two). `aws.amazon.com/use-neuron-uuid` /
// `nouse-neuron-uuid` narrow by device. No node lock.
//
// Thread safety: immutable after construction.
#pragma once

#include <memory>

#include "device/config.h"
#include "device/vendor.h"

namespace hami::device {

inline constexpr std::string_view kNeuronVendorKey = "AWSNeuron";

std::unique_ptr<Vendor> MakeAwsNeuronVendor(const VendorResources& config);

// Neuron's ring rule: `need` idle candidates with consecutive indices; `inferentia` allows any
// start, else need must be 1, 4, 8 or 16 and the window start a multiple of it.
TopologyChoice ChooseNeuronWindow(std::span<const DeviceCandidate> candidates, int32_t need,
                                  bool inferentia);

}  // namespace hami::device
