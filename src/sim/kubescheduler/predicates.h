// Predicates over pods and nodes for the simulated kube-scheduler (kube_scheduler.h): which pods
// it leaves alone, which informer updates are worth a requeue, and its minimal built-in node
// filtering (NodeUnschedulable, nodeSelector).
//
// Thread safety: pure functions.
#pragma once

#include "k8s/object.h"

namespace hami::sim {

// status.phase is Succeeded or Failed.
bool IsTerminal(const k8s::Object& pod);
// spec.nodeName is set.
bool IsAssigned(const k8s::Object& pod);
// metadata.deletionTimestamp is set.
bool IsBeingDeleted(const k8s::Object& obj);
// Whether an informer update changed something kube-scheduler reacts to: false for a resync
// (same object), true when either side is missing; otherwise compares the objects without
// resourceVersion, managedFields, generation and a pod's status or a node's heartbeat times.
bool ChangedForScheduling(const k8s::ObjectPtr& before, const k8s::ObjectPtr& after, bool is_pod);
// The pod tolerates the node.kubernetes.io/unschedulable:NoSchedule taint.
bool ToleratesUnschedulable(const k8s::Object& pod);
// Every label of the pod's spec.nodeSelector is on the node with the same value.
bool MatchesNodeSelector(const k8s::Object& pod, const k8s::Object& node);

}  // namespace hami::sim
