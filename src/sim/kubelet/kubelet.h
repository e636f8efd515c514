// Kubelet: the simulated kubelet of one node (docs/design.md, "The simulated kubelet and world").
// It plays the parts of a real kubelet that HAMi depends on, against the real interfaces:
//  - registers its Node (labels, capacity, Ready condition, InternalIP and the kubelet port in
//    daemonEndpoints) and keeps a Lease in kube-node-lease renewed;
//  - runs the device manager (device_manager.h) in <root>/device-plugins and mirrors every
//    plugin's devices into the node's capacity (all devices) and allocatable (healthy ones);
//    after a restart, resources of plugins not registered again yet count 0;
//  - admits each pod bound to the node one at a time: extended resources a plugin serves are
//    allocated through it (others are left to the scheduler, as kubelet does); a failure fails
//    the pod with UnexpectedAdmissionError;
//  - runs init containers in order, then the containers, each as a local process in its own
//    session (launch.h: env and mounts as a runtime would apply them, the stand-in workload for
//    images it cannot run), with restartPolicy, pod phase and container statuses written to
//    pods/status, and Events (Started, Killing, UnexpectedAdmissionError);
//  - serves GET /containerLogs/<namespace>/<pod>/<container>[?tailLines=N] on its HTTP port,
//    which the API server's pods/log proxies to (kubectl logs), and /exec/<namespace>/<pod>/
//    <container> over WebSocket (exec_session.h), which pods/exec proxies to (kubectl exec);
//  - puts an nvidia-smi (KubeletOptions::nvidia_smi) on the PATH of GPU containers;
//  - on deletion sends SIGTERM to each container's process group and SIGKILL after the pod's
//    terminationGracePeriodSeconds, then frees its devices.
// Simplifications: no images, volumes, probes or resource limits; Stop() kills the node's
// containers (a real kubelet restart leaves them running).
//
// Thread safety: Start/Stop from the owning thread; the accessors from any thread.
#pragma once

#include <chrono>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "common/status.h"
#include "k8s/rest_client.h"
#include "sim/kubelet/device_manager.h"

namespace hami::sim {

struct KubeletOptions {
  std::string node_name;
  std::string root_dir;  // device-plugins/, pods/<uid>/ (logs, working directories)
  std::map<std::string, std::string> labels;
  std::map<std::string, std::string> capacity = {
      {"cpu", "32"}, {"memory", "256Gi"}, {"pods", "110"}};
  std::vector<std::string> node_env;         // every container's base environment (KEY=VALUE)
  std::vector<std::string> stand_in;         // argv of the stand-in GPU workload
  bool stand_in_for_gpu_containers = false;  // see LaunchContext
  // Run every container in a PID namespace of its own (`unshare --pid --fork --mount-proc`, as a
  // container runtime does; needs root), so that its processes' PIDs differ from the host's ones
  // NVML reports. The simulated driver gets the host's procfs (HAMI_SIM_HOST_PROC_FD) to report
  // host PIDs as a real driver does. Without root this is refused with a warning.
  bool pid_namespaces = false;
  // The program containers with NVIDIA devices find as `nvidia-smi` on their PATH (hamictl,
  // which answers to that name with the container's view); linked as <root>/bin/nvidia-smi.
  // Empty: none.
  std::string nvidia_smi;
  // The container runtime's CDI spec directories (cdi_registry.h); empty: every CDI name a plugin
  // gives resolves.
  std::vector<std::string> cdi_spec_dirs;
  std::string address = "127.0.0.1";
  std::chrono::milliseconds heartbeat{10000};
  int lease_seconds = 40;
  std::chrono::milliseconds restart_backoff{1000};  // first restart delay; doubles up to 10 s
};

class Kubelet {
 public:
  static Result<std::unique_ptr<Kubelet>> Start(k8s::RestClient& client, KubeletOptions options);
  ~Kubelet();
  Kubelet(const Kubelet&) = delete;
  Kubelet& operator=(const Kubelet&) = delete;

  void Stop();
  int port() const;  // the kubelet HTTP port (container logs)
  DeviceManager& devices();

  class Impl;

 private:
  explicit Kubelet(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace hami::sim
