// PodWorker's admission and container start: the devices the plugins allocate, each
// container's launch as a local process in a session of its own, and what the kubelet's other
// threads ask of a worker (kills, log paths, exec).
#include "sim/kubelet/kubelet_internal.h"

#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/eventfd.h>
#include <sys/syscall.h>

#include <algorithm>
#include <filesystem>

#include "common/thread_name.h"
#include "sim/kubelet/cdi_registry.h"
#include "device/resource_quantity.h"

namespace hami::sim {

using kubelet_internal::Json;
using kubelet_internal::Now;
using kubelet_internal::ReadFile;

namespace {

constexpr const char* kUnshare = "/usr/bin/unshare";
constexpr const char* kNsenter = "/usr/bin/nsenter";

// The host's procfs as a directory descriptor every container inherits (see
// KubeletOptions::pid_namespaces); -1 when containers cannot get PID namespaces here.
int HostProcFd() {
  static const int fd = [] {
    if (geteuid() != 0 || access(kUnshare, X_OK) != 0) {
      HAMI_LOG(Warning) << "--pid-namespaces needs root and " << kUnshare
                        << "; containers share the host's PID namespace";
      return -1;
    }
    int d = open("/proc", O_PATH | O_DIRECTORY);  // no O_CLOEXEC: inherited on purpose
    if (d < 0) HAMI_LOG(Warning) << "cannot open /proc; containers share the host's PIDs";
    return d;
  }();
  return fd;
}

bool Executable(const std::string& path) {
  return access(path.c_str(), X_OK) == 0 && !std::filesystem::is_directory(path);
}

// An extended resource's count as the API server stores it: a quantity in canonical form, so
// 1000 devices arrive as "1k". Anything that is not a whole number counts as none (the API
// server refuses such requests for extended resources before they get here).
int64_t Quantity(const Json& v) {
  if (v.is_number_integer()) return v.get<int64_t>();
  if (!v.is_string()) return 0;
  Result<int64_t> n = device::ParseIntegerQuantity(v.get_ref<const std::string&>());
  return n.ok() && *n > 0 ? *n : 0;
}

ContainerSpec SpecOf(const Json& c) {
  ContainerSpec s;
  s.name = c.value("name", "");
  s.image = c.value("image", "");
  for (const char* key : {"command", "args"}) {
    auto it = c.find(key);
    if (it == c.end() || !it->is_array()) continue;
    for (const Json& a : *it) {
      if (a.is_string()) (std::string(key) == "command" ? s.command : s.args).push_back(a);
    }
  }
  if (auto env = c.find("env"); env != c.end() && env->is_array()) {
    for (const Json& e : *env) {
      if (!e.is_object() || !e.contains("name") || !e["name"].is_string()) continue;
      EnvVar v;
      v.name = e["name"];
      if (e.contains("value") && e["value"].is_string()) {
        v.value = e["value"].get<std::string>();
      } else if (e.contains("valueFrom")) {
        std::string path = k8s::GetString(e, "/valueFrom/fieldRef/fieldPath");
        if (!path.empty()) v.field_ref = path;
      } else {
        v.value = "";
      }
      s.env.push_back(std::move(v));
    }
  }
  return s;
}

int PidfdOpen(pid_t pid) { return static_cast<int>(syscall(SYS_pidfd_open, pid, 0)); }

}  // namespace

PodWorker::PodWorker(Kubelet::Impl& k, k8s::ObjectPtr pod) : k_(k), pod_(std::move(pod)) {
  ns_ = k8s::Namespace(*pod_);
  name_ = k8s::Name(*pod_);
  uid_ = k8s::Uid(*pod_);
  dir_ = k.options_.root_dir + "/pods/" + uid_;
  restart_policy_ = k8s::GetString(*pod_, "/spec/restartPolicy");
  if (restart_policy_.empty()) restart_policy_ = "Always";
  grace_ = k8s::GetInt(*pod_, "/spec/terminationGracePeriodSeconds", 30);
  wake_ = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
}

PodWorker::~PodWorker() {
  if (thread_.joinable()) thread_.join();
  for (Container& c : containers_) {
    if (c.pidfd >= 0) close(c.pidfd);
  }
  if (wake_ >= 0) close(wake_);
}

void PodWorker::Admit() {
  std::filesystem::create_directories(dir_);
  Status s = AllocateDevices();
  if (!s.ok()) {
    HAMI_LOG(Warning) << "kubelet " << k_.options_.node_name << ": pod " << Key()
                      << " rejected: " << s.message();
    std::string msg =
        "Pod was rejected: Allocate failed due to " + s.message() + ", which is unexpected";
    Json st;
    st["status"] = {{"phase", "Failed"},
                    {"reason", "UnexpectedAdmissionError"},
                    {"message", msg},
                    {"startTime", Now()}};
    k_.devices_->FreePod(uid_);
    k_.Event(pod_, "Warning", "UnexpectedAdmissionError", msg);
    thread_ = std::thread([this, st] {
      SetCurrentThreadName("pod-worker");
      WriteStatusUntilDone(st);
      MutexLock l(mu_);
      finished_ = true;
    });
    return;
  }
  thread_ = std::thread([this] {
    SetCurrentThreadName("pod-worker");
    Run();
  });
}

void PodWorker::Kill(int64_t grace) {
  {
    MutexLock l(mu_);
    if (deleting_) return;
    deleting_ = true;
    if (grace >= 0) grace_ = grace;
    kill_deadline_ = std::chrono::steady_clock::now() + std::chrono::seconds(grace_);
    for (Container& c : containers_) {
      if (c.state == Container::State::kRunning) ::kill(-c.pid, SIGTERM);
    }
  }
  Wake();
}

void PodWorker::KillNow() {
  {
    MutexLock l(mu_);
    grace_ = 0;
  }
  Kill();
  {
    MutexLock l(mu_);
    kill_deadline_ = std::chrono::steady_clock::now();
  }
  Wake();
}

std::string PodWorker::LogPath(const std::string& container) {
  MutexLock l(mu_);
  for (const Container& c : containers_) {
    if (c.spec.name == container) return c.log_path;
  }
  return "";
}

Result<ExecProcess> PodWorker::ExecInto(const std::string& container,
                                        std::vector<std::string> command) {
  MutexLock l(mu_);
  for (const Container& c : containers_) {
    if (c.spec.name != container) continue;
    if (c.state != Container::State::kRunning) {
      return Status(StatusCode::kFailedPrecondition,
                    "container " + container + " is not running (cannot exec in a stopped "
                    "container)");
    }
    ExecProcess p;
    p.argv = std::move(command);
    p.env = c.launch.env;
    p.workdir = c.workdir;
    if (!c.launch.argv.empty() && c.launch.argv[0] == kUnshare) {
      // unshare --fork: the container's first process is its child.
      std::string children =
          ReadFile("/proc/" + std::to_string(c.pid) + "/task/" + std::to_string(c.pid) +
                   "/children")
              .value_or("");
      long inner = std::strtol(children.c_str(), nullptr, 10);  // NOLINT(runtime/int)
      if (inner > 0) {
        p.argv.insert(p.argv.begin(), {kNsenter, "--target", std::to_string(inner), "--pid",
                                       "--mount", "--"});
      }
    }
    return p;
  }
  return Status(StatusCode::kNotFound, "container \"" + container + "\" is not in pod " + name_);
}

std::vector<std::string> PodWorker::ContainerNames() {
  MutexLock l(mu_);
  std::vector<std::string> out;
  for (const Container& c : containers_) {
    if (!c.init) out.push_back(c.spec.name);
  }
  return out;
}

Status PodWorker::AllocateDevices() {
  const Json& spec = (*pod_)["spec"];
  std::map<std::string, ResourceState> resources = k_.devices_->Resources();
  std::map<std::string, std::vector<ContainerNeed>> needs;
  std::vector<std::pair<Json, bool>> all;
  for (const char* list : {"initContainers", "containers"}) {
    if (!spec.contains(list) || !spec[list].is_array()) continue;
    for (const Json& c : spec[list]) all.emplace_back(c, std::string(list) == "initContainers");
  }
  for (const auto& [c, init] : all) {
    Container ctr;
    ctr.spec = SpecOf(c);
    ctr.init = init;
    ctr.log_path = dir_ + "/" + ctr.spec.name + ".log";
    ctr.workdir = dir_ + "/" + ctr.spec.name;
    containers_.push_back(std::move(ctr));
    for (const auto& [res, st] : resources) {
      int64_t n = 0;
      std::string key = "/" + res;
      for (const char* part : {"limits", "requests"}) {
        const Json* r = nullptr;
        if (c.contains("resources") && c["resources"].contains(part)) r = &c["resources"][part];
        if (r != nullptr && r->contains(res)) {
          n = Quantity((*r)[res]);
          break;
        }
      }
      needs[res].push_back({containers_.back().spec.name, init, n});
    }
  }
  for (const auto& [res, list] : needs) {
    if (std::none_of(list.begin(), list.end(),
                     [](const ContainerNeed& n) { return n.count > 0; })) {
      continue;
    }
    Result<std::vector<ContainerDevices>> got = k_.devices_->AllocatePod(uid_, res, list);
    if (!got.ok()) return got.status();
    for (ContainerDevices& d : *got) {
      // The IDs are the kubelet's slots for the resource; which devices they stand for is the
      // plugin's answer (HAMi's plugins follow the scheduler's placement, not the slots), so
      // the line gives both.
      std::string slots, devices;
      for (const std::string& id : d.device_ids) slots += (slots.empty() ? "" : ",") + id;
      for (const char* env : {"NVIDIA_VISIBLE_DEVICES", "CUDA_VISIBLE_DEVICES",
                              "ASCEND_VISIBLE_DEVICES", "HIP_VISIBLE_DEVICES"}) {
        auto it = d.envs.find(env);
        if (it == d.envs.end()) continue;
        devices += (devices.empty() ? "" : " ") + it->first + "=" + it->second;
      }
      HAMI_LOG(Info) << "kubelet " << k_.options_.node_name << ": pod " << Key() << " container "
                     << d.name << ": " << d.device_ids.size() << " " << res << " slot(s) "
                     << slots << "; the plugin's devices: "
                     << (devices.empty() ? "(no visible-devices variable)" : devices);
      answers_[d.name].push_back(std::move(d));
    }
  }
  return OkStatus();
}

LaunchContext PodWorker::Context() const {
  LaunchContext ctx;
  ctx.node_env = k_.options_.node_env;
  ctx.stand_in = k_.options_.stand_in;
  ctx.stand_in_for_gpu_containers = k_.options_.stand_in_for_gpu_containers;
  for (const std::string& kv : ctx.node_env) {
    if (kv.rfind("PATH=", 0) == 0) ctx.path = kv.substr(5);
  }
  if (ctx.path.empty()) ctx.path = "/usr/local/bin:/usr/bin:/bin";
  ctx.fields = {{"metadata.name", name_},
                {"metadata.namespace", ns_},
                {"metadata.uid", uid_},
                {"spec.nodeName", k_.options_.node_name},
                {"spec.serviceAccountName", k8s::GetString(*pod_, "/spec/serviceAccountName")},
                {"status.hostIP", k_.options_.address},
                {"status.podIP", k_.options_.address}};
  ctx.read_file = ReadFile;
  ctx.executable = Executable;
  if (!k_.options_.cdi_spec_dirs.empty()) {
    ctx.cdi_registry = [dirs = k_.options_.cdi_spec_dirs] { return CdiDeviceNames(dirs); };
  }
  return ctx;
}

bool PodWorker::StartContainer(Container& c) {
  std::vector<const ContainerDevices*> answers;
  for (const ContainerDevices& d : answers_[c.spec.name]) answers.push_back(&d);
  LaunchContext ctx = Context();
  ctx.has_devices = !answers.empty();
  Result<Launch> launch = PrepareLaunch(c.spec, answers, ctx);
  std::filesystem::create_directories(c.workdir);
  int log = open(c.log_path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
  if (!launch.ok()) {
    std::string line = "hami-sim-kubelet: cannot start container " + c.spec.name + ": " +
                       launch.status().message() + "\n";
    if (log >= 0) (void)!write(log, line.data(), line.size());
    if (log >= 0) close(log);
    MutexLock l(mu_);
    c.state = Container::State::kTerminated;
    c.exit_code = 128;
    c.started_at = c.finished_at = Now();
    c.done = true;
    return false;
  }
  if (launch->stand_in && log >= 0) {
    std::string line = "hami-sim-kubelet: " + launch->note + "\n";
    (void)!write(log, line.data(), line.size());
  }
  if (!k_.options_.nvidia_smi.empty()) AddDriverTools(&*launch, k_.tools_dir());
  if (int proc = k_.options_.pid_namespaces ? HostProcFd() : -1; proc >= 0) {
    launch->argv.insert(launch->argv.begin(),
                        {kUnshare, "--pid", "--fork", "--mount-proc", "--"});
    launch->env.push_back("HAMI_SIM_HOST_PROC_FD=" + std::to_string(proc));
  }
  std::vector<char*> argv, envp;
  for (std::string& a : launch->argv) argv.push_back(a.data());
  argv.push_back(nullptr);
  for (std::string& e : launch->env) envp.push_back(e.data());
  envp.push_back(nullptr);
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
  if (log >= 0) {
    posix_spawn_file_actions_adddup2(&fa, log, 1);
    posix_spawn_file_actions_adddup2(&fa, log, 2);
  }
  posix_spawn_file_actions_addchdir_np(&fa, c.workdir.c_str());
  posix_spawnattr_t attr;
  posix_spawnattr_init(&attr);
  sigset_t none;
  sigemptyset(&none);
  posix_spawnattr_setsigmask(&attr, &none);
  sigset_t dfl;
  sigfillset(&dfl);
  posix_spawnattr_setsigdefault(&attr, &dfl);
  posix_spawnattr_setflags(&attr,
                           POSIX_SPAWN_SETSID | POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF);
  pid_t pid = -1;
  int rc = posix_spawn(&pid, argv[0], &fa, &attr, argv.data(), envp.data());
  posix_spawn_file_actions_destroy(&fa);
  posix_spawnattr_destroy(&attr);
  if (log >= 0) close(log);
  MutexLock l(mu_);
  if (rc != 0) {
    c.state = Container::State::kTerminated;
    c.exit_code = 127;
    c.started_at = c.finished_at = Now();
    c.done = true;
    return false;
  }
  c.pid = pid;
  c.pidfd = PidfdOpen(pid);
  c.state = Container::State::kRunning;
  c.started_at = Now();
  c.launch = std::move(*launch);
  return true;
}

}  // namespace hami::sim
