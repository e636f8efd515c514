// Typed helpers over RestClient for what the scheduler does: pods, nodes, the pods/binding
// subresource, annotation patches, Events, Leases.
//
//   HAMI_RETURN_IF_ERROR(BindPod(client, "default", "p", uid, "node-1"));
//   HAMI_RETURN_IF_ERROR(PatchPodAnnotations(client, "default", "p", {{"hami.io/bind-phase",
//                                                                      "allocating"}}));
//
// Thread safety: as RestClient (stateless functions).
#pragma once

#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"
#include "k8s/object_fwd.h"
#include "k8s/rest_client.h"

namespace hami::k8s {

Result<Object> GetPod(RestClient& c, std::string_view ns, std::string_view name);
Result<Object> ListPods(RestClient& c, std::string_view ns, const ListOptions& options = {});
Result<Object> GetNode(RestClient& c, std::string_view name);
Result<Object> ListNodes(RestClient& c, const ListOptions& options = {});

// Annotation changes as a JSON merge patch: a value sets the key, nullopt removes it.
using AnnotationChanges = std::map<std::string, std::optional<std::string>>;
// Both return the object's new resourceVersion only (the reply is not parsed into a document).
Result<WriteAck> PatchPodAnnotations(RestClient& c, std::string_view ns, std::string_view name,
                                     const AnnotationChanges& changes);
Result<WriteAck> PatchNodeAnnotations(RestClient& c, std::string_view name,
                                      const AnnotationChanges& changes);
// The merge patch body PatchPodAnnotations sends: {"metadata":{"annotations":{...}}}.
std::string AnnotationMergePatch(const AnnotationChanges& changes);

// POST pods/<name>/binding: assigns the pod to `node`. `uid` (may be empty) guards against binding
// a recreated pod of the same name. `annotations` ride on the Binding: the API server sets them
// on the pod in the same write as spec.nodeName.
Status BindPod(RestClient& c, std::string_view ns, std::string_view pod, std::string_view uid,
               std::string_view node, const std::map<std::string, std::string>& annotations = {});

// A core/v1 Event about an object, as a scheduler's event recorder writes it.
struct EventSpec {
  ObjectPtr involved{};         // the object the event is about (kind/apiVersion may be absent)
  std::string kind = "Pod";     // used when `involved` has no kind
  std::string type = "Normal";  // or "Warning"
  std::string reason{};         // CamelCase, e.g. "FilteringFailed"
  std::string message{};
  std::string component = "hami-scheduler";
  std::string host{};  // source.host / reportingInstance
};
// Builds the Event object (name "<object>.<hex nanoseconds>", first/lastTimestamp = now, count 1).
Object MakeEvent(const EventSpec& spec, WallTimePoint now);
Result<WriteAck> CreateEvent(RestClient& c, const EventSpec& spec);
// Posts several events in one pipelined batch (RestClient::CreateAckBatch); one result each.
std::vector<Result<WriteAck>> CreateEvents(RestClient& c, const std::vector<EventSpec>& specs);

Result<Object> GetLease(RestClient& c, std::string_view ns, std::string_view name);
Result<Object> CreateLease(RestClient& c, std::string_view ns, const Object& lease);
// PUT with the lease's resourceVersion as precondition (IsConflict when someone else wrote).
Result<Object> UpdateLease(RestClient& c, std::string_view ns, const Object& lease);

}  // namespace hami::k8s
