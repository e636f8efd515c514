// World (world.h) with WorldOptions::helm_install: hami-cpp deployed by its Helm chart onto the
// real control plane and a real node, every component a pod of the chart.

#include <algorithm>
#include <filesystem>
#include <map>
#include <set>
#include <sstream>
#include <thread>

#include "common/file_util.h"
#include "common/subprocess.h"
#include "k8s/object.h"
#include "k8s/typed.h"
#include "sim/node/oci_image.h"
#include "sim/world/waits.h"
#include "sim/world/world.h"
#include "sim/world/world_internal.h"

namespace hami::sim {
namespace {

namespace fs = std::filesystem;

// What the world sets itself for hami-cpp and cannot also take from the chart's values.
std::string HelmConflicts(const WorldOptions& o) {
  std::vector<std::string> found;
  if (!o.scheduler_args.empty()) found.push_back("scheduler_args");
  if (!o.plugin_args.empty()) found.push_back("plugin_args");
  if (!o.rbac_manifests.empty()) found.push_back("rbac_manifests");
  if (o.leader_elect) found.push_back("leader_elect");
  if (o.webhook_cert_secret) found.push_back("webhook_cert_secret");
  if (!o.service_accounts.empty()) found.push_back("service_accounts");
  std::string text;
  for (const std::string& f : found) text += (text.empty() ? "" : ", ") + f;
  return text;
}

// "Running 2/2", "Pending (ContainerCreating: ...)": what `kubectl get pods` would say of a pod,
// for the error of an install that never became ready.
std::string PodSummary(const k8s::Object& pod) {
  std::string text = k8s::Name(pod) + ": " + k8s::GetString(pod, "/status/phase");
  for (const auto& c : pod["status"].value("containerStatuses", k8s::Object::array())) {
    for (const char* which : {"state", "lastState"}) {
      const k8s::Object& state = c.value(which, k8s::Object::object());
      for (const auto& [kind, detail] : state.items()) {
        text += "; " + c.value("name", "") + (which[0] == 'l' ? " last " : " ") + kind;
        std::string why = detail.value("reason", "") + " " + detail.value("message", "");
        if (detail.contains("exitCode")) why += " exit code " + detail["exitCode"].dump();
        if (why != " ") text += " (" + why + ")";
      }
    }
  }
  return text;
}

bool ReadyAndStaying(const k8s::Object& pod) {
  return pod["metadata"].value("deletionTimestamp", "").empty() && PodReady(pod);
}

std::string Component(const k8s::Object& o) {
  return k8s::GetString(o, "/metadata/labels/app.kubernetes.io~1component");
}

// Waits until each of the chart's workloads (its Deployments and DaemonSets in kube-system, by
// component) has a Ready pod that is not being deleted. helm's --wait does not: it counts a
// workload ready while it is as many pods short as its update strategy may leave unavailable,
// which for one replica, or a DaemonSet on one node, is every pod.
Status WaitForComponentPods(k8s::RestClient& client, SteadyTime deadline) {
  std::set<std::string> wanted;
  k8s::ListOptions ours;
  ours.label_selector = "app.kubernetes.io/part-of=hami-cpp";
  const k8s::Resource workloads[] = {{"apps/v1", "deployments", true},
                                     {"apps/v1", "daemonsets", true}};
  for (const k8s::Resource& kind : workloads) {
    HAMI_ASSIGN_OR_RETURN(k8s::Object list, client.ListAll(kind, "kube-system", ours));
    for (const auto& o : list.value("items", k8s::Object::array())) wanted.insert(Component(o));
  }
  std::map<std::string, std::string> ready;  // pod name -> its component, while Ready
  auto seen = [&](const k8s::Object& pod, bool gone) {
    if (gone || !ReadyAndStaying(pod)) {
      ready.erase(k8s::Name(pod));
    } else {
      ready[k8s::Name(pod)] = Component(pod);
    }
  };
  auto all_ready = [&] {
    std::set<std::string> have;
    for (const auto& [pod, component] : ready) have.insert(component);
    return std::includes(have.begin(), have.end(), wanted.begin(), wanted.end());
  };
  FollowOptions follow;
  follow.deadline = deadline;
  follow.recovery = Recovery::kReconnect;
  Status s = FollowResource(
      client, k8s::kPods, "kube-system", follow,
      [&](const k8s::Object& list) {
        ready.clear();
        for (const auto& pod : list["items"]) seen(pod, false);
        return all_ready();
      },
      [&](const k8s::WatchEvent& e) {
        if (e.type == k8s::WatchEvent::Type::kBookmark) return false;
        seen(*e.object, e.type == k8s::WatchEvent::Type::kDeleted);
        return all_ready();
      });
  if (s.ok()) return s;
  std::string missing;
  for (const std::string& c : wanted) missing += " " + c;
  return s.WithContext("waiting for a Ready pod of each of:" + missing);
}

// Waits until the API server reaches the webhook at its Service: a dry-run GPU pod comes back
// handed to a scheduler other than the default one. The webhook's pod being Ready is not enough:
// kube-proxy programs the Service's new endpoint a moment later, and until then the call is
// refused (and the chart's failurePolicy Ignore lets the pod through unmutated). No event tells
// when kube-proxy is done, so the dry run is asked again every 200 ms until the deadline.
Status WaitForWebhook(k8s::RestClient& client, SteadyTime deadline) {
  const k8s::Object probe = {
      {"apiVersion", "v1"},
      {"kind", "Pod"},
      {"metadata", {{"name", "hami-webhook-probe"}, {"namespace", "default"}}},
      {"spec",
       {{"containers",
         {{{"name", "probe"}, {"image", "probe"},
           {"resources", {{"limits", {{"nvidia.com/gpu", "1"}}}}}}}}}}};
  std::string last;
  while (std::chrono::steady_clock::now() < deadline) {
    Result<k8s::HttpResponse> r =
        client.Send("POST", k8s::ResourcePath(k8s::kPods, "default") + "?dryRun=All",
                    probe.dump(), "application/json");
    if (r.ok() && r->status / 100 == 2) {
      const k8s::Object pod = k8s::Object::parse(r->body, nullptr, false);
      const std::string scheduler =
          pod.is_object() ? k8s::GetString(pod, "/spec/schedulerName") : "";
      if (!scheduler.empty() && scheduler != "default-scheduler") return OkStatus();
      last = "the dry-run pod came back for " + scheduler;
    } else {
      last = r.ok() ? std::to_string(r->status) + " " + r->body : r.status().ToString();
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
  }
  return DeadlineExceededError("the API server never reached hami-scheduler's webhook: " + last);
}

}  // namespace

Result<std::string> World::Helm(const std::vector<std::string>& args) {
  const std::string home = dir_ + "/helm";
  std::error_code ec;  // helm makes what it misses below; a failure shows in its error
  fs::create_directories(home, ec);
  std::vector<std::string> argv = {options_.kube_bin_dir + "/helm", "--kubeconfig", kubeconfig_};
  argv.insert(argv.end(), args.begin(), args.end());
  ProcessResult r = RunProcess(argv, {"HOME=" + home, "HELM_CACHE_HOME=" + home + "/cache",
                                      "HELM_CONFIG_HOME=" + home + "/config",
                                      "HELM_DATA_HOME=" + home + "/data", "PATH=/usr/bin:/bin"});
  if (r.exit_code != 0) {
    return InternalError("helm " + (args.empty() ? "" : args[0]) + " exited with " +
                         std::to_string(r.exit_code) + ": " + r.err + r.out);
  }
  return r.out;
}

Result<std::string> World::WriteKubeSchedulerImage() {
  const std::string binary = options_.kube_bin_dir + "/kube-scheduler";
  ProcessResult version = RunProcess({binary, "--version"}, BaseEnv());
  // "Kubernetes v1.34.4": the chart's default tag is the cluster's release, which this is.
  const size_t v = version.out.find(" v");
  if (version.exit_code != 0 || v == std::string::npos) {
    return InternalError(binary + " --version: " + version.err + version.out);
  }
  const size_t end = version.out.find_first_of(" \n", v + 1);
  const std::string tag = version.out.substr(v + 1, end - v - 1);
  const std::string rootfs = dir_ + "/kube-scheduler-image";
  std::error_code ec;
  fs::create_directories(rootfs + "/usr/local/bin", ec);
  fs::create_directories(rootfs + "/tmp", ec);
  fs::permissions(rootfs + "/tmp", fs::perms::all | fs::perms::sticky_bit, ec);
  fs::copy_file(binary, rootfs + "/usr/local/bin/kube-scheduler",
                fs::copy_options::overwrite_existing, ec);
  if (ec) return InternalError("cannot copy " + binary + ": " + ec.message());
  const std::string archive = dir_ + "/kube-scheduler-image.tar";
  HAMI_RETURN_IF_ERROR(WriteOciArchive(
      {"localhost/kube-scheduler:" + tag, rootfs, {"/usr/local/bin/kube-scheduler"}}, archive));
  fs::remove_all(rootfs, ec);
  return archive;
}

Status World::BootWithHelm() {
  if (options_.control_plane != ControlPlaneKind::kReal || options_.node_bin_dir.empty() ||
      options_.chart_dir.empty() || options_.nodes.size() != 1) {
    return InvalidArgumentError(
        "helm_install needs the real control plane, one real node (node_bin_dir) and chart_dir");
  }
  if (std::string conflicts = HelmConflicts(options_); !conflicts.empty()) {
    return InvalidArgumentError("with helm_install the chart's values configure hami-cpp (give "
                                "them in helm_values_yaml), not " + conflicts);
  }
  HAMI_RETURN_IF_ERROR(StartControlPlane());
  // The cluster's default scheduler, as every cluster has one: it places the chart's own pods
  // (the DaemonSets' included). The chart's kube-scheduler is a second one, `hami-scheduler`,
  // for the pods the webhook hands to it.
  HAMI_RETURN_IF_ERROR(control_plane_->StartScheduler(
      "apiVersion: kubescheduler.config.k8s.io/v1\nkind: KubeSchedulerConfiguration\n"));
  const WorldNode& n = options_.nodes[0];
  HAMI_RETURN_IF_ERROR(WriteNodeFiles(n));
  HAMI_RETURN_IF_ERROR(StartRealNode(n));
  HAMI_RETURN_IF_ERROR(HelmInstall());
  Status gpus = world_internal::WaitForNodeGpus(*client_, n, options_.start_timeout);
  HAMI_ASSIGN_OR_RETURN(k8s::Object pods, client_->ListAll(k8s::kPods, "kube-system"));
  if (!gpus.ok()) {
    // Why is the device plugin's pod's to say.
    std::string logs;
    for (const auto& pod : pods.value("items", k8s::Object::array())) {
      const std::string name = k8s::Name(pod);
      if (name.rfind("hami-device-plugin", 0) != 0) continue;
      // A container in CrashLoopBackOff has no log yet: the one that failed has.
      Result<k8s::HttpResponse> log = client_->Send(
          "GET", k8s::ResourcePath(k8s::kPods, "kube-system", name, "log") +
                     "?container=device-plugin&previous=true");
      std::string text = log.ok() ? log->body : log.status().ToString();
      if (text.size() > 3000) text = text.substr(text.size() - 3000);
      logs += "\n" + PodSummary(pod) + ", the end of its last container's log:\n" + text;
    }
    return Status(gpus.code(), gpus.message() + logs);
  }
  // The components' metrics, at their pods' addresses (the chart's ports).
  for (const auto& pod : pods.value("items", k8s::Object::array())) {
    const std::string component =
        k8s::GetString(pod, "/metadata/labels/app.kubernetes.io~1component");
    const std::string ip = k8s::GetString(pod, "/status/podIP");
    if (component == "hami-scheduler") scheduler_metrics_url_ = "http://" + ip + ":9395/metrics";
    if (component == "hami-monitor") monitor_urls_[n.name] = "http://" + ip + ":9394/metrics";
  }
  return OkStatus();
}

Status World::HelmInstall() {
  const WorldNode& n = options_.nodes[0];
  const std::string hook = HookPath(n.name);
  k8s::Object values = {
      {"global", {{"imageRegistry", "localhost"}, {"imageTag", "node-test"},
                  {"gpuHookPath", hook}}},
      {"devicePlugin", {{"libPath", hook + "/vgpu"},
                        {"monitor", {{"ctrPath", hook + "/vgpu/containers"}}}}}};
  if (!options_.node_config_json.empty()) {
    values["devicePlugin"]["nodeConfiguration"]["config"] = options_.node_config_json;
  }
  if (!options_.device_config_yaml.empty()) {
    values["device-config"]["content"] = options_.device_config_yaml;
  }
  // JSON is YAML.
  HAMI_RETURN_IF_ERROR(world_internal::WriteAll(dir_ + "/helm-values.yaml", values.dump(2)));
  HAMI_RETURN_IF_ERROR(world_internal::WriteAll(dir_ + "/helm-values-test.yaml",
                                                options_.helm_values_yaml));
  const int timeout = static_cast<int>(options_.start_timeout.count());
  helm_installed_ = true;  // a failed install may leave objects: the teardown uninstalls
  Result<std::string> installed = Helm(
      {"install", kHelmRelease, options_.chart_dir, "--namespace", "kube-system", "--values",
       dir_ + "/helm-values.yaml", "--values", dir_ + "/helm-values-test.yaml", "--wait",
       "--timeout", std::to_string(timeout) + "s"});
  if (!installed.ok()) {
    std::string pods;
    if (Result<k8s::Object> list = client_->ListAll(k8s::kPods, "kube-system"); list.ok()) {
      for (const auto& pod : list->value("items", k8s::Object::array())) {
        pods += "\n  " + PodSummary(pod);
      }
    }
    return Status(installed.status().code(),
                  installed.status().message() + "\nkube-system's pods:" + pods);
  }
  const SteadyTime deadline = std::chrono::steady_clock::now() + options_.start_timeout;
  HAMI_RETURN_IF_ERROR(WaitForComponentPods(*client_, deadline));
  HAMI_RETURN_IF_ERROR(WaitForWebhook(*client_, deadline));
  if (options_.on_start) options_.on_start("helm install " + std::string(kHelmRelease));
  return OkStatus();
}

}  // namespace hami::sim
