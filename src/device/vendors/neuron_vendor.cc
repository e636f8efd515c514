#include "device/vendors/neuron_vendor.h"

#include <algorithm>
#include <bit>
#include <limits>
#include <string>
#include <vector>

#include "device/request.h"
#include "device/text_util.h"

namespace hami::device {
namespace {

constexpr int64_t kMax32 = std::numeric_limits<int32_t>::max();
// Core requests are split in shares of at most two cores (upstream's rule: AWS's plugin named
// two cores per device when it was written).
constexpr int64_t kCoresPerShare = 2;
// Device lists record whole-device requests as every core; see ParseRequest.
constexpr int32_t kWholeDevice = kExclusiveCores;
constexpr int64_t kMaxCoresPerDevice = 30;  // devcore is an int32 bitmask

class NeuronVendor final : public Vendor {
 public:
  explicit NeuronVendor(const VendorResources& config) {
    names_.count = config.count;
    names_.core = config.core;
    keys_.allocated = "hami.io/aws-neuron-devices-allocated";
    keys_.use_uuid = "aws.amazon.com/use-neuron-uuid";
    keys_.nouse_uuid = "aws.amazon.com/nouse-neuron-uuid";
  }

  std::string_view Key() const override { return kNeuronVendorKey; }
  const ResourceNames& resource_names() const override { return names_; }
  const VendorAnnotationKeys& annotation_keys() const override { return keys_; }
  std::string_view registration_capacity() const override { return names_.count; }
  bool cores_as_bitmask() const override { return true; }
  bool has_topology_rule() const override { return true; }
  NodeLockKind node_lock() const override { return NodeLockKind::kNone; }

  Result<std::optional<ContainerRequest>> ParseRequest(const ContainerResources& c) const override {
    ContainerRequest r;
    r.vendor = std::string(kNeuronVendorKey);
    const std::string where = "container " + text::Quote(c.name) + ": ";
    if (!names_.count.empty() && FindQuantity(c, names_.count)) {
      HAMI_ASSIGN_OR_RETURN(std::optional<int64_t> n,
                            ReadIntegerResource(c, names_.count, 1, kMax32));
      r.count = static_cast<int32_t>(*n);
      r.cores = kWholeDevice;
      return std::optional<ContainerRequest>(std::move(r));
    }
    if (names_.core.empty() || !FindQuantity(c, names_.core)) {
      return std::optional<ContainerRequest>();
    }
    HAMI_ASSIGN_OR_RETURN(std::optional<int64_t> cores,
                          ReadIntegerResource(c, names_.core, 1, 2 * kMax32));
    if (*cores <= kCoresPerShare) {
      r.count = 1;
      r.cores = static_cast<int32_t>(*cores);
    } else if (*cores % kCoresPerShare != 0) {
      return InvalidArgumentError(where + names_.core + " must be 1 or a multiple of " +
                                  std::to_string(kCoresPerShare) + ", got " +
                                  std::to_string(*cores));
    } else {
      r.count = static_cast<int32_t>(*cores / kCoresPerShare);
      r.cores = static_cast<int32_t>(kCoresPerShare);
    }
    return std::optional<ContainerRequest>(std::move(r));
  }

  Result<std::vector<DeviceInfo>> DecodeNodeDevices(const NodeView& node) const override {
    const int64_t devices = node.Capacity(names_.count);
    if (devices <= 0) return NotFoundError("node has no " + names_.count + " capacity");
    if (devices > 4096) {
      return InvalidArgumentError(names_.count + "=" + std::to_string(devices) +
                                  ": refusing more than 4096 devices");
    }
    const int64_t cores = names_.core.empty() ? 0 : node.Capacity(names_.core);
    const int64_t per_device = cores / devices;
    if (per_device < 1 || per_device > kMaxCoresPerDevice) {
      return InvalidArgumentError(names_.core + "=" + std::to_string(cores) + " for " +
                                  std::to_string(devices) + " devices: each device needs 1 to " +
                                  std::to_string(kMaxCoresPerDevice) + " cores");
    }
    std::string mode;
    if (node.labels != nullptr) {
      if (auto it = node.labels->find(kInstanceTypeLabel); it != node.labels->end()) {
        mode = it->second;
      }
    }
    std::vector<DeviceInfo> out;
    out.reserve(static_cast<size_t>(devices));
    for (int64_t i = 0; i < devices; ++i) {
      DeviceInfo d;
      d.id = std::string(node.name) + "-AWSNeuron-" + std::to_string(i);
      d.index = static_cast<uint32_t>(i);
      d.count = static_cast<int32_t>(per_device);
      d.devmem = 0;
      d.devcore = static_cast<int32_t>((int64_t{1} << per_device) - 1);
      d.type = std::string(kNeuronVendorKey);
      d.mode = mode;
      d.health = true;
      d.vendor = std::string(kNeuronVendorKey);
      out.push_back(std::move(d));
    }
    return out;
  }

  TopologyChoice ChooseDevices(std::span<const DeviceCandidate> candidates,
                               int32_t need) const override {
    if (need == 1) {  // one device (or cores of one): the engine's preference order
      TopologyChoice c;
      if (!candidates.empty()) c.picked.push_back(0);
      return c;
    }
    const std::string_view type = candidates.empty() ? std::string_view() : candidates[0].mode;
    const bool inferentia = text::AsciiLower(type).find("inf") != std::string::npos;
    return ChooseNeuronWindow(candidates, need, inferentia);
  }

  void EncodePodExtras(const PodSingleDevice& devices, const PodWriteContext& ctx,
                       Annotations* pod) const override {
    std::string ids;
    bool cores = false;
    for (size_t k = 0; k < devices.size(); ++k) {
      const bool whole = WholeDeviceRequest(ctx, k);
      for (const ContainerDevice& d : devices[k]) {
        if (d.index < 0) continue;
        if (whole) {
          if (!ids.empty()) ids += ',';
          ids += std::to_string(d.index);
          continue;
        }
        // Core numbers run across the node: cores-per-device x index + the core's bit.
        const int64_t per_device =
            d.devcore > 0 ? std::popcount(static_cast<uint32_t>(d.devcore)) : kCoresPerShare;
        for (int bit = 0; bit < 31; ++bit) {
          if ((d.cores >> bit & 1) == 0) continue;
          if (!ids.empty()) ids += ',';
          ids += std::to_string(per_device * d.index + bit);
          cores = true;
        }
      }
    }
    if (ids.empty()) return;
    (*pod)["AWS_NEURON_IDS"] = ids;
    (*pod)["NEURON_ALLOC_TIME"] = std::to_string(ctx.unix_seconds * 1000000000LL);
    (*pod)["NEURON_ALLOCATED"] = "false";
    (*pod)["aws.amazon.com/predicate-node"] = std::string(ctx.node);
    if (cores) (*pod)["NEURON_RESOURCE_TYPE"] = names_.core;
  }

 private:
  // Whether container k asked for whole devices (aws.amazon.com/neuron) rather than cores.
  static bool WholeDeviceRequest(const PodWriteContext& ctx, size_t k) {
    if (ctx.requests == nullptr || k >= ctx.requests->containers.size()) return false;
    for (const ContainerRequest& r : ctx.requests->containers[k]) {
      if (r.vendor == kNeuronVendorKey) return r.cores >= kWholeDevice;
    }
    return false;
  }

  ResourceNames names_;
  VendorAnnotationKeys keys_;
};

}  // namespace

TopologyChoice ChooseNeuronWindow(std::span<const DeviceCandidate> candidates, int32_t need,
                                  bool inferentia) {
  TopologyChoice c;
  if (need <= 0) return c;
  if (!inferentia && need != 1 && need != 4 && need != 8 && need != 16) return c;
  uint32_t top = 0;
  for (const DeviceCandidate& d : candidates) top = std::max(top, d.index + 1);
  std::vector<int> pos(top, -1);
  for (size_t i = 0; i < candidates.size(); ++i) {
    if (candidates[i].idle) pos[candidates[i].index] = static_cast<int>(i);
  }
  const uint32_t n = static_cast<uint32_t>(need);
  const uint32_t step = inferentia ? 1 : n;
  for (uint32_t start = 0; start + n <= top; start += step) {
    bool ok = true;
    for (uint32_t i = start; i < start + n && ok; ++i) ok = pos[i] >= 0;
    if (!ok) continue;
    for (uint32_t i = start; i < start + n; ++i) c.picked.push_back(static_cast<size_t>(pos[i]));
    return c;
  }
  return c;
}

std::unique_ptr<Vendor> MakeAwsNeuronVendor(const VendorResources& config) {
  return std::make_unique<NeuronVendor>(config);
}

}  // namespace hami::device
