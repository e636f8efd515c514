// Conversions from Kubernetes objects (as the API client hands them over, nlohmann JSON) to the
// scheduling core's reduced views: a pod's device-relevant resources, the PodObject the ledger
// records, the NodeObject it registers.
//
// Inputs are untrusted API data: missing or mistyped fields read as absent, never throw.
// Quantities may arrive as JSON strings ("8192", "4Gi") or numbers (8192); both are kept as the
// quantity text the request parser expects.
//
// Thread safety: pure functions.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "common/status.h"
#include "device/device.h"
#include "k8s/object_fwd.h"
#include "scheduler/objects.h"

namespace hami::scheduler {

// metadata.annotations (or labels) as a map; non-string values are skipped.
device::Annotations AnnotationsOf(const k8s::Object& obj);
device::Annotations LabelsOf(const k8s::Object& obj);

// spec.initContainers then spec.containers: names, limits and requests.
device::PodResources PodResourcesOf(const k8s::Object& pod);

// What the ledger needs of a pod: identity, node, annotations, phase, deletion, init state.
PodObject PodObjectOf(const k8s::Object& pod);

// Node name and annotations.
NodeObject NodeObjectOf(const k8s::Object& node);

// status.allocatable[resource] as an integer; 0 when absent or not an integer quantity.
int64_t NodeAllocatable(const k8s::Object& node, std::string_view resource);

// metadata.resourceVersion read as an integer; -1 when it is not one (versions are opaque to
// clients in general; our API server and etcd use increasing integers).
int64_t ResourceVersionNumber(const k8s::Object& obj);
int64_t ResourceVersionNumberOf(std::string_view rv);

}  // namespace hami::scheduler
