// Document 004's Volcano examples as the main job's scenario 10 (demo_volcano.cc) and the
// Volcano end-to-end tests apply them: the vGPU scheduler configuration, the queue and the vGPU
// Job.
//
// Thread safety: immutable data and a pure function.
#pragma once

#include <string>

namespace hami::sim::volcano_examples {

// Document 004's vGPU scheduler configuration (deviceshare.VGPUEnable, binpack) in the tiers of
// its GPU-sharing example, with Volcano's node lock on; booleans and integers unquoted, as
// Volcano reads them (it ignores the document's "true" with a warning).
inline constexpr const char* kVgpuSchedulerConf = R"(actions: "enqueue, allocate, backfill"
tiers:
- plugins:
  - name: priority
  - name: gang
  - name: conformance
- plugins:
  - name: predicates
  - name: proportion
  - name: nodeorder
  - name: binpack
  - name: deviceshare
    arguments:
      deviceshare.VGPUEnable: true
      deviceshare.SchedulePolicy: "binpack"
      deviceshare.ScheduleWeight: 10
      deviceshare.NodeLockEnable: true
)";

// Document 004's queue `training`.
inline constexpr const char* kTrainingQueue = R"(apiVersion: scheduling.volcano.sh/v1beta1
kind: Queue
metadata:
  name: training
spec:
  weight: 1
  reclaimable: true
)";

// Document 004's vGPU Job `vgpu-training` (one trainer of 1 vGPU and 4096 MiB), verbatim but
// for its container's command: `command` (a JSON array of strings) in place of the training
// image's, none when empty (the image's own).
inline std::string VgpuJob(const std::string& command = "") {
  return std::string(R"(apiVersion: batch.volcano.sh/v1alpha1
kind: Job
metadata:
  name: vgpu-training
spec:
  schedulerName: volcano
  minAvailable: 1
  queue: training
  tasks:
    - replicas: 1
      name: trainer
      template:
        metadata:
          annotations:
            volcano.sh/vgpu-mode: "hami-core"
        spec:
          restartPolicy: Never
          containers:
            - name: trainer
              image: training:latest
)") + (command.empty() ? "" : "              command: " + command + "\n") +
         R"(              resources:
                requests:
                  volcano.sh/vgpu-number: "1"
                  volcano.sh/vgpu-memory: "4096"
                limits:
                  volcano.sh/vgpu-number: "1"
                  volcano.sh/vgpu-memory: "4096"
)";
}

}  // namespace hami::sim::volcano_examples
