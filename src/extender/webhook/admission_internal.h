// Internal to the admission webhook: what the review flow (admission.cc) and the container rules
// (container_mutation.cc) share. Only these two files include it.
//
// Thread safety: pure functions over the caller's JSON; nothing is shared between calls.
#pragma once

#include <cstddef>
#include <nlohmann/json_fwd.hpp>
#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"
#include "device/config.h"
#include "device/device.h"
#include "device/vendor.h"
#include "extender/webhook/admission.h"

namespace hami::extender::admission_internal {

using Json = nlohmann::json;

// The string member `key` of `obj`, or "" when absent or not a string.
std::string_view StringMember(const Json& obj, std::string_view key);

// One container of the pod being mutated: its JSON (inside the mutated copy) and the resource
// view the request rules read, kept in step with every limit the webhook adds.
struct Container {
  Json* json = nullptr;
  std::string path;  // "spec.containers[0]", for messages
  device::ContainerResources resources;
  bool privileged = false;
};

// Reads spec.<field> (an optional array of containers) of the mutated pod into `out`, each with
// its JSON path. InvalidArgument when the array, a container or a quantity is malformed.
Status ReadContainers(Json& spec, std::string_view field, std::vector<Container>* out);

// Validates the pod's quantities, then applies the NVIDIA and every vendor's admission rules to
// each container. Returns the mutated pod's requests; `*has_devices` says whether any container
// asks for devices. An error means the pod is malformed (the review answers 400).
Result<device::PodRequests> MutateContainers(const Json& pod, Json& mutated, Json& spec,
                                             std::vector<Container>& containers,
                                             size_t init_count,
                                             const device::VendorRegistry& vendors,
                                             const device::DeviceConfig& config,
                                             const WebhookOptions& options, bool* has_devices);

}  // namespace hami::extender::admission_internal
