// The hami-scheduler's mutating admission webhook (`POST /webhook`), as a pure function from an
// AdmissionReview request body to the AdmissionReview response body.
//
// For a pod that asks for HAMi devices the webhook points spec.schedulerName at our scheduler,
// adds the environment and default resources HAMi's NVIDIA rules call for, and refuses pods HAMi
// cannot serve. The rules, in the order they apply:
//   1. a pod without containers is refused; a pod addressed to another scheduler (schedulerName
//      set, differing from ours, and not `default-scheduler` while force-overwrite is on) is
//      allowed unchanged;
//   2. resource values must be valid quantities in range (e.g. gpumem-percentage 0..100);
//      otherwise the pod is refused with the reason (upstream silently ignores most of these);
//   3. per container, init containers first, with NVIDIA enabled: CUDA_TASK_PRIORITY from the
//      priority resource, GPU_CORE_UTILIZATION_POLICY when gpuCorePolicy is force/disable, the
//      device count defaultGPUNum when only memory/cores are given, gpucores 100 for requests
//      that take whole cards, runtimeClassName, and NVIDIA_VISIBLE_DEVICES=none for containers
//      without devices when overwriteEnv is on;
//   4. a pod with devices is refused when a container is privileged, when it is already bound to
//      a node, or when it would exceed its namespace's quota.
// Nothing else (no annotations) is changed. Environment variables already present are given the
// new value rather than duplicated.
//
//   Result<std::string> answer = HandleAdmissionReview(body, vendors, config, options, &quota);
//   if (!answer.ok()) -> HTTP 400 with answer.status().message(); else HTTP 200 with *answer.
//
// Thread safety: pure functions; safe to call concurrently as long as `quota` is.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"
#include "device/config.h"
#include "device/vendor.h"

namespace hami::extender {

// Namespace quota pre-check, implemented by the service from its ResourceQuota informer
// (`limits.<memory resource>` and `limits.<core resource>` of each vendor).
class QuotaChecker {
 public:
  virtual ~QuotaChecker() = default;
  // OK when a pod asking `mem_mib` more memory (device MiB, after memoryFactor, as the ledger
  // charges it) and `cores` more cores of `vendor` (vendor key, e.g. "NVIDIA") fits namespace
  // `ns`'s quota; ResourceExhausted with a message naming the limit otherwise. Called from
  // request threads concurrently.
  virtual Status Check(std::string_view ns, std::string_view vendor, int64_t mem_mib,
                       int64_t cores) const = 0;
};

struct WebhookOptions {
  // --scheduler-name; "" leaves spec.schedulerName alone.
  std::string scheduler_name = "hami-scheduler";
  // --force-overwrite-default-scheduler: pods naming `default-scheduler` are taken over too.
  bool force_overwrite_default_scheduler = true;
  // What the scheduler knows of its nodes, for vendor rules that depend on them (Enflame's
  // vGCU slices); null without a cluster (such rules then refuse the pod, saying why).
  const device::NodeCapacityFacts* node_facts = nullptr;
};

// The verdict on one pod.
struct AdmissionDecision {
  bool allowed = true;
  // With allowed == false: 400 when the pod or one of its values is malformed, 403 when it is
  // well-formed but refused.
  int32_t code = 200;
  std::string message;  // why it was refused; empty when allowed
  std::string patch;    // RFC 6902 JSON Patch (JSON array text); empty when nothing changes
  // Said back to the client (AdmissionReview response.warnings; kubectl prints them) about an
  // admitted pod that will not work as its author likely expects. Today: a container asking for
  // several MIG devices (nvidia.com/vgpu-mode: mig), of which a CUDA process sees only one.
  std::vector<std::string> warnings;
};

// Applies the rules above to one pod (`pod_json`: the Pod object as JSON) in namespace `ns`
// (the AdmissionReview's request.namespace; the pod's own metadata.namespace when empty). The
// patch turns `pod_json` into the mutated pod; paths are escaped per RFC 6901.
AdmissionDecision ReviewPod(std::string_view pod_json, std::string_view ns,
                            const device::VendorRegistry& vendors,
                            const device::DeviceConfig& config, const WebhookOptions& options,
                            const QuotaChecker* quota);

// Handles one `POST /webhook` body. Returns the full JSON text of the AdmissionReview response,
// in the request's apiVersion (admission.k8s.io/v1 or v1beta1), with response.uid =
// request.uid and the mutation as a base64 JSONPatch (patchType "JSONPatch"). A request whose
// object cannot be read as a Pod gets a response with allowed=false and status code 400. A body
// that is not an AdmissionReview request at all (not JSON, nested deeper than 256 levels, no
// apiVersion we speak, no request.uid) is an InvalidArgument error for the HTTP layer to answer
// with 400. `quota` may be null (no quota pre-check). Never throws.
Result<std::string> HandleAdmissionReview(std::string_view body,
                                          const device::VendorRegistry& vendors,
                                          const device::DeviceConfig& config,
                                          const WebhookOptions& options, const QuotaChecker* quota);

}  // namespace hami::extender
