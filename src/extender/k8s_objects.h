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

namespace hami::extender {

// metadata.annotations (or labels) as a map; non-string values are skipped.
device::Annotations AnnotationsOf(const k8s::Object& obj);
device::Annotations LabelsOf(const k8s::Object& obj);

// spec.initContainers then spec.containers: names, limits and requests.
device::PodResources PodResourcesOf(const k8s::Object& pod);

// What the ledger needs of a pod: identity, node, annotations, phase, deletion, init state.
scheduler::PodObject PodObjectOf(const k8s::Object& pod);

// Node name and annotations.
scheduler::NodeObject NodeObjectOf(const k8s::Object& node);

// The part of a pod the scheduler service reads, for its pod informer's cache (every pod of the
// cluster, so its size is the scheduler's memory): apiVersion, kind; metadata name, namespace,
// uid, resourceVersion, creation and deletion timestamps, labels and annotations (without
// kubectl's last-applied-configuration copy of the whole object); spec nodeName, schedulerName,
// priority and each (init) container's name and resources; status phase and each init
// container status's name and state. managedFields, env, volumes, probes and the rest go.
// PodObjectOf and PodResourcesOf give the same result for the trimmed pod as for the whole one.
k8s::Object TrimPodForScheduler(const k8s::Object& pod);

// status.allocatable[resource] as an integer; 0 when absent or not an integer quantity.
int64_t NodeAllocatable(const k8s::Object& node, std::string_view resource);
// status.capacity[resource] as an integer; 0 when absent or not an integer.
int64_t NodeCapacityOf(const k8s::Object& node, std::string_view resource);

// metadata.resourceVersion read as an integer; -1 when it is not one (versions are opaque to
// clients in general; our API server and etcd use increasing integers).
int64_t ResourceVersionNumber(const k8s::Object& obj);
int64_t ResourceVersionNumberOf(std::string_view rv);

}  // namespace hami::extender
