#include "sim/kubelet/kubelet.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/eventfd.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <deque>
#include <filesystem>
#include <mutex>
#include <set>
#include <thread>

#include "common/file_util.h"
#include "common/log.h"
#include "common/thread_annotations.h"
#include "common/thread_name.h"
#include "device/resource_quantity.h"
#include "k8s/api_error.h"
#include "k8s/informer.h"
#include "k8s/object.h"
#include "k8s/typed.h"
#include "net/http_server.h"
#include "net/tls.h"
#include "net/websocket.h"
#include "sim/kubelet/exec_session.h"
#include "sim/kubelet/launch.h"

namespace hami::sim {

using Json = nlohmann::json;
using SteadyTime = std::chrono::steady_clock::time_point;

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

std::string Now() { return k8s::FormatTime(std::chrono::system_clock::now()); }

std::optional<std::string> ReadFile(const std::string& path) {
  Result<std::string> text = ReadFileToString(path);
  if (!text.ok()) return std::nullopt;
  return std::move(*text);
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

struct Container {
  ContainerSpec spec;
  bool init = false;
  Launch launch;
  std::string log_path;
  std::string workdir;
  pid_t pid = -1;
  int pidfd = -1;
  int restarts = 0;
  enum class State { kWaiting, kRunning, kTerminated } state = State::kWaiting;
  std::string waiting_reason = "ContainerCreating";
  int exit_code = 0;
  std::string started_at, finished_at;
  SteadyTime restart_at{};
  bool done = false;  // will not run again
};

class PodWorker;

class Kubelet::Impl {
 public:
  Impl(k8s::RestClient& client, KubeletOptions options)
      : client_(client), options_(std::move(options)) {}
  ~Impl() { Stop(); }

  Status Start();
  void Stop();

  k8s::RestClient& client_;
  const KubeletOptions options_;
  std::unique_ptr<DeviceManager> devices_;
  std::unique_ptr<net::HttpServer> http_;
  int port_ = 0;
  std::unique_ptr<k8s::Informer> pods_;

  void Event(const k8s::ObjectPtr& pod, const std::string& type, const std::string& reason,
             const std::string& message) {
    k8s::EventSpec e;
    e.involved = pod;
    e.type = type;
    e.reason = reason;
    e.message = message;
    e.component = "kubelet";
    e.host = options_.node_name;
    if (Result<k8s::WriteAck> r = k8s::CreateEvent(client_, e); !r.ok()) {
      HAMI_VLOG(1) << "kubelet: event " << reason << " not posted: " << r.status().message();
    }
  }

 private:
  friend class PodWorker;
  Status RegisterNode();
  Status UpdateNodeStatus();
  Status RenewLease();
  void HeartbeatLoop();
  void AdmitLoop();
  void OnPod(const k8s::ObjectPtr& pod);
  void OnDelete(const k8s::ObjectPtr& pod);
  // A pod with a deletionTimestamp: its containers stop within the grace period, then the pod
  // is removed from the API (delete with grace 0).
  void OnTerminating(const k8s::ObjectPtr& pod);
  void ServeLogs(const net::HttpRequest& req, net::HttpResponse& res);
  void ServeExec(const net::HttpRequest& req, net::HttpResponse& res);
  // Where the node's driver tools (nvidia-smi) are linked.
  std::string tools_dir() const { return options_.root_dir + "/bin"; }
  // The pod worker of <ns>/<name>, or null.
  std::shared_ptr<PodWorker> WorkerOf(const std::string& ns, const std::string& name);

  Mutex mu_;
  std::condition_variable cv_;
  bool stopping_ GUARDED_BY(mu_) = false;
  bool status_dirty_ GUARDED_BY(mu_) = true;
  std::deque<k8s::ObjectPtr> admit_queue_ GUARDED_BY(mu_);
  std::map<std::string, std::shared_ptr<PodWorker>> workers_ GUARDED_BY(mu_);  // by pod UID
  std::map<std::string, std::string> uid_of_ GUARDED_BY(mu_);  // "ns/name" -> UID
  std::set<std::string> terminating_ GUARDED_BY(mu_);  // UIDs being stopped after a deletion
  std::vector<std::thread> reapers_ GUARDED_BY(mu_);   // deleted pods' workers
  std::string start_time_ = Now();
  // Extended resources an earlier run of this kubelet reported (written by RegisterNode, then
  // read by the heartbeat thread).
  std::set<std::string> plugin_resources_;
  std::thread heartbeat_, admitter_;
};

// One pod's containers, on its own thread.
class PodWorker {
 public:
  PodWorker(Kubelet::Impl& k, k8s::ObjectPtr pod) : k_(k), pod_(std::move(pod)) {
    ns_ = k8s::Namespace(*pod_);
    name_ = k8s::Name(*pod_);
    uid_ = k8s::Uid(*pod_);
    dir_ = k.options_.root_dir + "/pods/" + uid_;
    restart_policy_ = k8s::GetString(*pod_, "/spec/restartPolicy");
    if (restart_policy_.empty()) restart_policy_ = "Always";
    grace_ = k8s::GetInt(*pod_, "/spec/terminationGracePeriodSeconds", 30);
    wake_ = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
  }
  ~PodWorker() {
    if (thread_.joinable()) thread_.join();
    for (Container& c : containers_) {
      if (c.pidfd >= 0) close(c.pidfd);
    }
    if (wake_ >= 0) close(wake_);
  }

  std::string Key() const { return ns_ + "/" + name_; }
  const std::string& uid() const { return uid_; }

  // Admission on the admitter thread; then the containers run on the worker's own thread.
  void Admit() {
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

  // Deletion: SIGTERM now, SIGKILL after the grace period (on the worker's thread).
  // SIGTERM to every container; SIGKILL after `grace` seconds (< 0: the pod's
  // terminationGracePeriodSeconds).
  void Kill(int64_t grace = -1) {
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
  // Kubelet shutdown: no grace.
  void KillNow() {
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
  void Join() {
    if (thread_.joinable()) thread_.join();
  }

  std::string LogPath(const std::string& container) {
    MutexLock l(mu_);
    for (const Container& c : containers_) {
      if (c.spec.name == container) return c.log_path;
    }
    return "";
  }
  // What `kubectl exec` into `container` runs: `command` in the container's environment and
  // working directory, inside its PID and mount namespaces when it has its own.
  Result<ExecProcess> ExecInto(const std::string& container, std::vector<std::string> command) {
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
  std::vector<std::string> ContainerNames() {
    MutexLock l(mu_);
    std::vector<std::string> out;
    for (const Container& c : containers_) {
      if (!c.init) out.push_back(c.spec.name);
    }
    return out;
  }

 private:
  void Wake() {
    uint64_t one = 1;
    (void)!write(wake_, &one, sizeof(one));
  }

  Status AllocateDevices() {
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

  LaunchContext Context() const {
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
    return ctx;
  }

  // Starts `c`; false (with the container terminated) when it cannot.
  bool StartContainer(Container& c) {
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

  // Blocks until some running container exits or the worker is woken; reaps what exited.
  void WaitForExits(int timeout_ms) {
    std::vector<pollfd> fds;
    std::vector<Container*> who;
    {
      MutexLock l(mu_);
      for (Container& c : containers_) {
        if (c.state == Container::State::kRunning && c.pidfd >= 0) {
          fds.push_back({c.pidfd, POLLIN, 0});
          who.push_back(&c);
        }
      }
    }
    fds.push_back({wake_, POLLIN, 0});
    if (poll(fds.data(), fds.size(), timeout_ms) < 0) return;
    if (fds.back().revents & POLLIN) {
      uint64_t v;
      (void)!read(wake_, &v, sizeof(v));
    }
    for (size_t i = 0; i + 1 < fds.size(); ++i) {
      if (!(fds[i].revents & POLLIN)) continue;
      Container& c = *who[i];
      int status = 0;
      if (waitpid(c.pid, &status, WNOHANG) != c.pid) continue;
      MutexLock l(mu_);
      close(c.pidfd);
      c.pidfd = -1;
      c.state = Container::State::kTerminated;
      c.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
      c.finished_at = Now();
      HAMI_LOG(Info) << "kubelet " << k_.options_.node_name << ": pod " << Key() << " container "
                     << c.spec.name << " exited with code " << c.exit_code;
    }
  }

  bool ShouldRestart(const Container& c) {
    if (IsDeleting() || c.init) return false;
    if (restart_policy_ == "Always") return true;
    return restart_policy_ == "OnFailure" && c.exit_code != 0;
  }

  std::chrono::milliseconds Backoff(int restarts) const {
    auto d = k_.options_.restart_backoff * (1 << std::min(restarts, 4));
    return std::min<std::chrono::milliseconds>(d, std::chrono::seconds(10));
  }

  void Run() {
    // Init containers, one after another.
    for (Container& c : containers_) {
      if (!c.init) continue;
      for (;;) {
        if (IsDeleting()) return Finish();
        Started(c, StartContainer(c));
        ReportStatus();
        while (IsRunning(c) && !IsDeleting()) WaitForExits(-1);
        if (IsDeleting()) return Terminate();
        if (c.exit_code == 0) {
          c.done = true;
          break;
        }
        if (restart_policy_ == "Never") {
          c.done = true;
          for (Container& o : containers_) o.done = true;
          ReportStatus();
          return Finish();
        }
        ++c.restarts;
        ReportStatus();
        if (!Sleep(Backoff(c.restarts))) return Finish();
      }
    }
    for (Container& c : containers_) {
      if (!c.init) Started(c, StartContainer(c));
    }
    ReportStatus();
    for (;;) {
      auto now = std::chrono::steady_clock::now();
      if (IsDeleting()) return Terminate();
      bool any_running = false;
      SteadyTime next_restart = SteadyTime::max();
      bool changed = false;
      for (Container& c : containers_) {
        if (c.init) continue;
        if (c.state == Container::State::kRunning) any_running = true;
        if (c.state != Container::State::kTerminated || c.done) continue;
        if (!ShouldRestart(c)) {
          c.done = true;
          changed = true;
          continue;
        }
        if (c.restart_at == SteadyTime{}) {
          c.restart_at = now + Backoff(c.restarts);
          changed = true;
        }
        if (now >= c.restart_at) {
          ++c.restarts;
          c.restart_at = SteadyTime{};
          Started(c, StartContainer(c));
          any_running = any_running || c.state == Container::State::kRunning;
          changed = true;
        } else {
          next_restart = std::min(next_restart, c.restart_at);
        }
      }
      if (changed || status_dirty_) ReportStatus();
      if (!any_running && next_restart == SteadyTime::max()) return Finish();
      int timeout = -1;
      if (next_restart != SteadyTime::max()) {
        timeout = static_cast<int>(std::max<int64_t>(
            1, std::chrono::duration_cast<std::chrono::milliseconds>(next_restart - now).count()));
      }
      if (status_dirty_ && (timeout < 0 || timeout > 1000)) timeout = 1000;
      WaitForExits(timeout);
    }
  }

  void Started(Container& c, bool ok) {
    if (ok) {
      HAMI_LOG(Info) << "kubelet " << k_.options_.node_name << ": pod " << Key() << " container "
                     << c.spec.name << " started (pid " << c.pid << ")"
                     << (c.launch.stand_in ? " as the stand-in GPU workload" : "");
      k_.Event(pod_, "Normal", "Started", "Started container " + c.spec.name);
    } else {
      k_.Event(pod_, "Warning", "Failed", "Error: cannot start container " + c.spec.name);
    }
  }

  bool IsDeleting() {
    MutexLock l(mu_);
    return deleting_;
  }
  bool IsRunning(const Container& c) {
    MutexLock l(mu_);
    return c.state == Container::State::kRunning;
  }
  // Sleeps `d` unless woken for deletion; false when deleting.
  bool Sleep(std::chrono::milliseconds d) {
    auto until = std::chrono::steady_clock::now() + d;
    while (!IsDeleting() && std::chrono::steady_clock::now() < until) {
      pollfd p{wake_, POLLIN, 0};
      int ms = static_cast<int>(std::chrono::duration_cast<std::chrono::milliseconds>(
                                    until - std::chrono::steady_clock::now())
                                    .count());
      if (poll(&p, 1, std::max(ms, 0)) > 0) {
        uint64_t v;
        (void)!read(wake_, &v, sizeof(v));
      }
    }
    return !IsDeleting();
  }

  // Deleted: wait for the containers within the grace period, then kill what is left.
  void Terminate() {
    k_.Event(pod_, "Normal", "Killing", "Stopping the pod's containers");
    for (;;) {
      bool running = false;
      SteadyTime deadline;
      {
        MutexLock l(mu_);
        deadline = kill_deadline_;
        for (Container& c : containers_) running = running || c.state == Container::State::kRunning;
      }
      if (!running) break;
      auto now = std::chrono::steady_clock::now();
      if (now >= deadline) {
        MutexLock l(mu_);
        for (Container& c : containers_) {
          if (c.state == Container::State::kRunning) ::kill(-c.pid, SIGKILL);
        }
        kill_deadline_ = SteadyTime::max();
      }
      int ms =
          deadline == SteadyTime::max()
              ? -1
              : static_cast<int>(std::max<int64_t>(
                    1,
                    std::chrono::duration_cast<std::chrono::milliseconds>(deadline - now).count()));
      WaitForExits(ms);
    }
    k_.devices_->FreePod(uid_);
    MutexLock l(mu_);
    finished_ = true;
  }

  void Finish() {
    if (IsDeleting()) return Terminate();
    ReportStatus();
    while (status_dirty_ && Sleep(std::chrono::seconds(1))) ReportStatus();
    k_.devices_->FreePod(uid_);  // a finished pod holds no devices
    MutexLock l(mu_);
    finished_ = true;
  }

  void ReportStatus() {
    Json init = Json::array(), main = Json::array();
    std::string phase = "Pending";
    bool any_running = false, all_done = true, all_ok = true, init_done = true;
    {
      MutexLock l(mu_);
      if (deleting_) return;
      for (const Container& c : containers_) {
        Json s;
        s["name"] = c.spec.name;
        s["image"] = c.spec.image;
        s["imageID"] = "";
        s["restartCount"] = c.restarts;
        s["ready"] = c.state == Container::State::kRunning && !c.init;
        s["started"] = c.state == Container::State::kRunning;
        if (c.pid > 0) s["containerID"] = "hami-sim://" + std::to_string(c.pid);
        if (c.state == Container::State::kRunning) {
          s["state"]["running"]["startedAt"] = c.started_at;
        } else if (c.state == Container::State::kTerminated) {
          Json term = {{"exitCode", c.exit_code},
                       {"reason", c.exit_code == 0 ? "Completed" : "Error"},
                       {"startedAt", c.started_at},
                       {"finishedAt", c.finished_at}};
          if (c.done) {
            s["state"]["terminated"] = term;
          } else {  // waiting for its restart
            s["state"]["waiting"]["reason"] = "CrashLoopBackOff";
            s["lastState"]["terminated"] = term;
          }
        } else {
          s["state"]["waiting"]["reason"] = c.init ? "PodInitializing" : c.waiting_reason;
        }
        (c.init ? init : main).push_back(s);
        if (c.init) {
          init_done = init_done && c.done && c.exit_code == 0;
          if (c.done && c.exit_code != 0) all_ok = false;
          continue;
        }
        // A container between restarts keeps the pod Running, as kubelet reports it.
        any_running = any_running || c.state == Container::State::kRunning ||
                      (c.state == Container::State::kTerminated && !c.done);
        all_done = all_done && c.done;
        all_ok = all_ok && c.exit_code == 0 && c.state == Container::State::kTerminated;
      }
      bool init_failed =
          std::any_of(containers_.begin(), containers_.end(),
                      [](const Container& c) { return c.init && c.done && c.exit_code != 0; });
      if (init_failed) {
        phase = "Failed";
      } else if (all_done && !main.empty() && init_done) {
        phase = all_ok ? "Succeeded" : "Failed";
      } else if (any_running) {
        phase = "Running";
      }
    }
    bool ready = phase == "Running" && std::all_of(main.begin(), main.end(), [](const Json& s) {
                   return s["ready"].get<bool>();
                 });
    Json st;
    Json& s = st["status"];
    s["phase"] = phase;
    s["hostIP"] = k_.options_.address;
    s["podIP"] = k_.options_.address;
    s["startTime"] = start_time_;
    s["conditions"] = Json::array({
        {{"type", "Initialized"}, {"status", init_done ? "True" : "False"}},
        {{"type", "Ready"}, {"status", ready ? "True" : "False"}},
        {{"type", "ContainersReady"}, {"status", ready ? "True" : "False"}},
        {{"type", "PodScheduled"}, {"status", "True"}},
    });
    if (!init.empty()) s["initContainerStatuses"] = init;
    s["containerStatuses"] = main;
    status_dirty_ = !PatchStatus(st);
  }

  // False when the API server did not take it (a gone pod counts as written).
  bool PatchStatus(const Json& body) {
    Result<k8s::WriteAck> r =
        client().PatchAck(k8s::kPods, ns_, name_, k8s::PatchType::kMerge, body.dump(), "status");
    if (!r.ok() && !k8s::IsNotFound(r.status())) {
      HAMI_LOG(Warning) << "kubelet " << k_.options_.node_name << ": pod " << Key()
                        << ": status not written (" << r.status().message() << "); will retry";
      return false;
    }
    return true;
  }
  // Retries a status the API server refused, once a second, until it is written or the pod is
  // deleted (as kubelet's status manager does).
  void WriteStatusUntilDone(const Json& body) {
    while (!PatchStatus(body)) {
      if (!Sleep(std::chrono::seconds(1))) return;
    }
  }
  k8s::RestClient& client() { return k_.client_; }

  Kubelet::Impl& k_;
  k8s::ObjectPtr pod_;
  std::string ns_, name_, uid_, dir_, restart_policy_;
  std::string start_time_ = Now();
  int64_t grace_ = 30;
  int wake_ = -1;
  bool status_dirty_ = false;  // worker thread only: the last status was not written
  std::map<std::string, std::vector<ContainerDevices>> answers_;  // by container name
  std::thread thread_;

  Mutex mu_;
  std::vector<Container> containers_;  // states guarded by mu_ (the vector is fixed at Admit)
  bool deleting_ GUARDED_BY(mu_) = false;
  bool finished_ GUARDED_BY(mu_) = false;
  SteadyTime kill_deadline_ GUARDED_BY(mu_) = SteadyTime::max();
};

Status Kubelet::Impl::Start() {
  std::error_code ec;
  std::filesystem::create_directories(options_.root_dir + "/pods", ec);
  if (ec) return Status(StatusCode::kInternal, "cannot create " + options_.root_dir);
  HAMI_ASSIGN_OR_RETURN(devices_, DeviceManager::Start(options_.root_dir + "/device-plugins"));
  if (!options_.nvidia_smi.empty()) {
    // A link named nvidia-smi: the program chooses what to do by the name it is called by.
    std::string link = tools_dir() + "/nvidia-smi";
    std::filesystem::create_directories(tools_dir(), ec);
    std::filesystem::remove(link, ec);
    std::filesystem::create_symlink(std::filesystem::absolute(options_.nvidia_smi), link, ec);
    if (ec) {
      return Status(StatusCode::kInternal, "cannot link " + link + " to " + options_.nvidia_smi +
                                               ": " + ec.message());
    }
  }
  devices_->SetOnChange([this] {
    MutexLock l(mu_);
    status_dirty_ = true;
    cv_.notify_all();
  });
  net::HttpServerOptions ho;
  ho.host = options_.address;
  ho.worker_threads = 64;  // an exec session holds one for as long as it lasts
  // HTTPS with a self-signed certificate, as a kubelet serves when it is given none: API servers
  // reach it without verifying it (kube-apiserver without --kubelet-certificate-authority).
  HAMI_ASSIGN_OR_RETURN(net::CertificatePem pem,
                        net::GenerateSelfSignedCertificate(options_.node_name, {options_.node_name},
                                                           {options_.address}));
  HAMI_ASSIGN_OR_RETURN(ho.certificate, net::CertificateSource::FromPem(pem));
  HAMI_ASSIGN_OR_RETURN(http_, net::HttpServer::Create(ho));
  http_->HandlePrefix(
      "GET", "/containerLogs/",
      [this](const net::HttpRequest& req, net::HttpResponse& res) { ServeLogs(req, res); });
  for (const char* method : {"GET", "POST"}) {
    http_->HandlePrefix(
        method, "/exec/",
        [this](const net::HttpRequest& req, net::HttpResponse& res) { ServeExec(req, res); });
  }
  HAMI_ASSIGN_OR_RETURN(port_, http_->Start());
  HAMI_RETURN_IF_ERROR(RegisterNode());
  if (Status s = RenewLease(); !s.ok()) {
    HAMI_LOG(Warning) << "kubelet " << options_.node_name << ": lease: " << s.message();
  }
  pods_ = std::make_unique<k8s::Informer>(
      client_, k8s::kPods,
      k8s::InformerOptions{.field_selector = "spec.nodeName=" + options_.node_name});
  pods_->AddEventHandler(
      {.on_add = [this](const k8s::ObjectPtr& p) { OnPod(p); },
       .on_update = [this](const k8s::ObjectPtr&, const k8s::ObjectPtr& p) { OnPod(p); },
       .on_delete = [this](const k8s::ObjectPtr& p) { OnDelete(p); }});
  pods_->Start();
  heartbeat_ = std::thread([this] {
    SetCurrentThreadName("kubelet-hb");
    HeartbeatLoop();
  });
  admitter_ = std::thread([this] {
    SetCurrentThreadName("kubelet-admit");
    AdmitLoop();
  });
  HAMI_LOG(Info) << "kubelet " << options_.node_name << ": node registered, logs on port " << port_
                 << ", device plugins in " << options_.root_dir << "/device-plugins";
  return OkStatus();
}

void Kubelet::Impl::Stop() {
  {
    MutexLock l(mu_);
    if (stopping_) return;
    stopping_ = true;
  }
  cv_.notify_all();
  if (pods_) pods_->Stop();
  if (admitter_.joinable()) admitter_.join();
  if (heartbeat_.joinable()) heartbeat_.join();
  std::map<std::string, std::shared_ptr<PodWorker>> workers;
  {
    MutexLock l(mu_);
    workers.swap(workers_);
  }
  for (auto& [uid, w] : workers) w->KillNow();
  for (auto& [uid, w] : workers) w->Join();
  std::vector<std::thread> reapers;
  {
    MutexLock l(mu_);
    reapers.swap(reapers_);
  }
  for (std::thread& t : reapers) t.join();
  if (http_) http_->Stop();
  if (devices_) devices_->Stop();
}

Status Kubelet::Impl::RegisterNode() {
  Json labels = {{"kubernetes.io/hostname", options_.node_name},
                 {"kubernetes.io/os", "linux"},
                 {"kubernetes.io/arch", "amd64"}};
  for (const auto& [k, v] : options_.labels) labels[k] = v;
  Json node = {{"apiVersion", "v1"},
               {"kind", "Node"},
               {"metadata", {{"name", options_.node_name}, {"labels", labels}}}};
  Result<Json> created = client_.Create(k8s::kNodes, "", node);
  if (!created.ok() && created.status().code() != StatusCode::kAlreadyExists) {
    return Status(created.status().code(),
                  "registering node " + options_.node_name + ": " + created.status().message());
  }
  if (!created.ok()) {
    Json patch = {{"metadata", {{"labels", labels}}}};
    Result<k8s::WriteAck> r =
        client_.PatchAck(k8s::kNodes, "", options_.node_name, k8s::PatchType::kMerge, patch.dump());
    if (!r.ok()) return r.status();
    // Device plugin resources an earlier run reported count 0 until their plugin registers
    // with this run, as kubelet does after a restart: no pod is admitted against them meanwhile.
    Result<Json> existing = k8s::GetNode(client_, options_.node_name);
    if (existing.ok() && existing->contains("status") &&
        (*existing)["status"].contains("capacity")) {
      for (const auto& [res, q] : (*existing)["status"]["capacity"].items()) {
        if (res.find('/') != std::string::npos && !options_.capacity.count(res)) {
          plugin_resources_.insert(res);
        }
      }
    }
  }
  return UpdateNodeStatus();
}

Status Kubelet::Impl::UpdateNodeStatus() {
  Json capacity = Json::object(), allocatable = Json::object();
  for (const auto& [k, v] : options_.capacity) capacity[k] = allocatable[k] = v;
  for (const std::string& res : plugin_resources_) capacity[res] = allocatable[res] = "0";
  for (const auto& [res, st] : devices_->Resources()) {
    capacity[res] = std::to_string(st.Capacity());
    allocatable[res] = std::to_string(st.Allocatable());
  }
  std::string now = Now();
  Json st;
  Json& s = st["status"];
  s["capacity"] = capacity;
  s["allocatable"] = allocatable;
  s["conditions"] = Json::array({{{"type", "Ready"},
                                  {"status", "True"},
                                  {"reason", "KubeletReady"},
                                  {"message", "hami-sim-kubelet is posting ready status"},
                                  {"lastHeartbeatTime", now},
                                  {"lastTransitionTime", start_time_}}});
  s["addresses"] = Json::array({{{"type", "InternalIP"}, {"address", options_.address}},
                                {{"type", "Hostname"}, {"address", options_.node_name}}});
  s["daemonEndpoints"]["kubeletEndpoint"]["Port"] = port_;
  s["nodeInfo"] = {{"kubeletVersion", "v1.32.0-hami-sim"},
                   {"operatingSystem", "linux"},
                   {"architecture", "amd64"},
                   {"containerRuntimeVersion", "hami-sim://1"}};
  Result<k8s::WriteAck> r = client_.PatchAck(k8s::kNodes, "", options_.node_name,
                                             k8s::PatchType::kMerge, st.dump(), "status");
  return r.status();
}

Status Kubelet::Impl::RenewLease() {
  const std::string ns = "kube-node-lease";
  Json lease = {{"apiVersion", "coordination.k8s.io/v1"},
                {"kind", "Lease"},
                {"metadata", {{"name", options_.node_name}, {"namespace", ns}}},
                {"spec",
                 {{"holderIdentity", options_.node_name},
                  {"leaseDurationSeconds", options_.lease_seconds},
                  {"renewTime", k8s::FormatMicroTime(std::chrono::system_clock::now())}}}};
  Result<Json> current = k8s::GetLease(client_, ns, options_.node_name);
  if (current.ok()) {
    (*current)["spec"] = lease["spec"];
    return k8s::UpdateLease(client_, ns, *current).status();
  }
  if (!k8s::IsNotFound(current.status())) return current.status();
  Json nsobj = {{"apiVersion", "v1"}, {"kind", "Namespace"}, {"metadata", {{"name", ns}}}};
  (void)client_.Create(k8s::kNamespaces, "", nsobj);
  return k8s::CreateLease(client_, ns, lease).status();
}

void Kubelet::Impl::HeartbeatLoop() {
  auto next = std::chrono::steady_clock::now() + options_.heartbeat;
  UniqueLock l(mu_);
  while (!stopping_) {
    cv_.wait_until(l.native(), next, [&]() REQUIRES(mu_) { return stopping_ || status_dirty_; });
    if (stopping_) break;
    bool beat = std::chrono::steady_clock::now() >= next;
    status_dirty_ = false;
    l.Unlock();
    if (Status s = UpdateNodeStatus(); !s.ok()) {
      HAMI_LOG(Warning) << "kubelet " << options_.node_name << ": node status: " << s.message();
      MutexLock g(mu_);
      status_dirty_ = true;  // try again at the next beat
    }
    if (beat) {
      if (Status s = RenewLease(); !s.ok()) {
        HAMI_LOG(Warning) << "kubelet " << options_.node_name << ": lease: " << s.message();
      }
    }
    l.Lock();
    if (beat) next = std::chrono::steady_clock::now() + options_.heartbeat;
    if (status_dirty_ && !beat) {
      // A failed write: wait for the beat instead of spinning.
      cv_.wait_until(l.native(), next, [&]() REQUIRES(mu_) { return stopping_; });
    }
  }
}

void Kubelet::Impl::OnPod(const k8s::ObjectPtr& pod) {
  std::string phase = k8s::GetString(*pod, "/status/phase");
  std::string uid = k8s::Uid(*pod);
  if (!k8s::GetString(*pod, "/metadata/deletionTimestamp").empty()) return OnTerminating(pod);
  {
    MutexLock l(mu_);
    if (workers_.count(uid) || phase == "Succeeded" || phase == "Failed") return;
  }
  if (phase == "Running") {
    // Admitted by an earlier run of this kubelet, whose containers ended with it: a simulated
    // node keeps no container state across its own restarts.
    Json st;
    st["status"] = {{"phase", "Failed"},
                    {"reason", "NodeRestarted"},
                    {"message", "the simulated kubelet restarted and its containers stopped"}};
    (void)client_.PatchAck(k8s::kPods, k8s::Namespace(*pod), k8s::Name(*pod),
                           k8s::PatchType::kMerge, st.dump(), "status");
    return;
  }
  MutexLock l(mu_);
  if (stopping_ || workers_.count(uid)) return;
  auto w = std::make_shared<PodWorker>(*this, pod);
  workers_[uid] = w;
  uid_of_[k8s::ObjectKey(*pod)] = uid;
  admit_queue_.push_back(pod);
  cv_.notify_all();
}

void Kubelet::Impl::OnTerminating(const k8s::ObjectPtr& pod) {
  // Graceful deletion, as the API server does it: the pod stays, with a deletionTimestamp, until
  // its node says its containers are gone by deleting it with no grace period. Until then its
  // devices stay its own.
  std::string uid = k8s::Uid(*pod);
  std::shared_ptr<PodWorker> w;
  {
    MutexLock l(mu_);
    if (stopping_ || terminating_.count(uid)) return;
    terminating_.insert(uid);
    auto it = workers_.find(uid);
    if (it != workers_.end()) {
      w = it->second;
      workers_.erase(it);
      uid_of_.erase(k8s::ObjectKey(*pod));
    }
  }
  std::string ns = k8s::Namespace(*pod), name = k8s::Name(*pod);
  int64_t grace = k8s::GetInt(*pod, "/metadata/deletionGracePeriodSeconds", -1);
  HAMI_LOG(Info) << "kubelet " << options_.node_name << ": pod " << ns << "/" << name
                 << " is terminating: stopping its containers"
                 << (grace >= 0 ? " (grace " + std::to_string(grace) + " s)" : "");
  if (w) w->Kill(grace);
  MutexLock l(mu_);
  reapers_.emplace_back([this, w, uid, ns, name, dir = options_.root_dir + "/pods/" + uid] {
    if (w) w->Join();
    std::error_code ec;
    std::filesystem::remove_all(dir, ec);
    k8s::DeleteOptions gone;
    gone.grace_period_seconds = 0;
    gone.precondition_uid = uid;
    Status s = client_.Delete(k8s::kPods, ns, name, gone);
    if (!s.ok() && s.code() != StatusCode::kNotFound && !k8s::IsConflict(s)) {
      HAMI_LOG(Warning) << "kubelet " << options_.node_name << ": removing terminated pod " << ns
                        << "/" << name << ": " << s.message();
    } else {
      HAMI_LOG(Info) << "kubelet " << options_.node_name << ": pod " << ns << "/" << name
                     << " terminated: its containers are gone";
    }
  });
}

void Kubelet::Impl::OnDelete(const k8s::ObjectPtr& pod) {
  std::shared_ptr<PodWorker> w;
  {
    MutexLock l(mu_);
    terminating_.erase(k8s::Uid(*pod));
    auto it = workers_.find(k8s::Uid(*pod));
    if (it == workers_.end()) return;
    w = it->second;
    workers_.erase(it);
    uid_of_.erase(k8s::ObjectKey(*pod));
  }
  HAMI_LOG(Info) << "kubelet " << options_.node_name << ": pod " << w->Key()
                 << " deleted: stopping its containers";
  w->Kill();
  // The worker finishes on its own thread; a reaper joins it so the informer is not held.
  MutexLock l(mu_);
  reapers_.emplace_back([w, dir = options_.root_dir + "/pods/" + w->uid()] {
    w->Join();
    std::error_code ec;
    std::filesystem::remove_all(dir, ec);
  });
}

void Kubelet::Impl::AdmitLoop() {
  for (;;) {
    k8s::ObjectPtr pod;
    std::shared_ptr<PodWorker> w;
    {
      UniqueLock l(mu_);
      cv_.wait(l.native(), [&]() REQUIRES(mu_) { return stopping_ || !admit_queue_.empty(); });
      if (stopping_) return;
      pod = admit_queue_.front();
      admit_queue_.pop_front();
      auto it = workers_.find(k8s::Uid(*pod));
      if (it == workers_.end()) continue;  // deleted before admission
      w = it->second;
    }
    w->Admit();
  }
}

namespace {

// <ns>/<pod>/<container> after `prefix` in the path; empty when it is not that shape.
std::vector<std::string> PodContainerPath(const std::string& path, const std::string& prefix) {
  std::string rest = path.substr(prefix.size());
  std::vector<std::string> parts;
  size_t start = 0;
  while (start <= rest.size()) {
    size_t slash = rest.find('/', start);
    if (slash == std::string::npos) slash = rest.size();
    parts.push_back(rest.substr(start, slash - start));
    start = slash + 1;
  }
  if (parts.size() != 3 || parts[0].empty() || parts[1].empty() || parts[2].empty()) return {};
  return parts;
}

}  // namespace

std::shared_ptr<PodWorker> Kubelet::Impl::WorkerOf(const std::string& ns,
                                                   const std::string& name) {
  MutexLock l(mu_);
  auto uid = uid_of_.find(ns + "/" + name);
  if (uid == uid_of_.end()) return nullptr;
  auto it = workers_.find(uid->second);
  return it == workers_.end() ? nullptr : it->second;
}

void Kubelet::Impl::ServeExec(const net::HttpRequest& req, net::HttpResponse& res) {
  // /exec/<ns>/<pod>/<container>?command=...&input=1&output=1&error=1&tty=1
  std::vector<std::string> parts = PodContainerPath(req.path, "/exec/");
  if (parts.empty()) return res.SetText(400, "expected /exec/<namespace>/<pod>/<container>\n");
  Result<ExecRequest> exec = ParseExecRequest(req);
  if (!exec.ok()) return res.SetText(400, exec.status().message() + "\n");
  std::shared_ptr<PodWorker> w = WorkerOf(parts[0], parts[1]);
  if (!w) return res.SetText(404, "pod " + parts[0] + "/" + parts[1] + " is not on this node\n");
  Result<ExecProcess> process = w->ExecInto(parts[2], exec->command);
  if (!process.ok()) {
    return res.SetText(process.status().code() == StatusCode::kNotFound ? 404 : 400,
                       process.status().message() + "\n");
  }
  std::string why;
  if (!net::ws::IsUpgradeRequest(req, &why)) {
    std::string upgrade = req.Header("Upgrade");
    if (upgrade.rfind("SPDY", 0) == 0 || upgrade.rfind("spdy", 0) == 0) {
      return res.SetText(400, "the simulated kubelet streams exec over WebSocket only "
                              "(v5.channel.k8s.io, kubectl 1.30 or newer), not " + upgrade + "\n");
    }
    return res.SetText(400, "exec needs a WebSocket upgrade: " + why + "\n");
  }
  std::string protocol = ChooseExecProtocol(net::ws::OfferedProtocols(req));
  if (protocol.empty()) {
    return res.SetText(400, std::string("none of the offered subprotocols is spoken here; ") +
                                "this kubelet speaks " + kExecProtocolV5 + " and " +
                                kExecProtocolV4 + "\n");
  }
  HAMI_LOG(Info) << "kubelet " << options_.node_name << ": exec in " << parts[0] << "/"
                 << parts[1] << "/" << parts[2] << ": " << exec->command[0]
                 << (exec->tty ? " (tty)" : "");
  res.status = 101;
  res.headers = {{"Upgrade", "websocket"},
                 {"Sec-WebSocket-Accept", net::ws::AcceptKey(req.Header("Sec-WebSocket-Key"))},
                 {"Sec-WebSocket-Protocol", protocol}};
  res.upgrade = [exec = *exec, process = *process, protocol](net::UpgradedConnection& conn) {
    RunExecSession(conn, protocol, exec, process);
  };
}

void Kubelet::Impl::ServeLogs(const net::HttpRequest& req, net::HttpResponse& res) {
  // /containerLogs/<ns>/<pod>/<container>
  std::vector<std::string> parts = PodContainerPath(req.path, "/containerLogs/");
  if (parts.empty()) {
    return res.SetText(400, "expected /containerLogs/<namespace>/<pod>/<container>\n");
  }
  std::shared_ptr<PodWorker> w = WorkerOf(parts[0], parts[1]);
  if (!w) return res.SetText(404, "pod " + parts[0] + "/" + parts[1] + " is not on this node\n");
  std::string path = w->LogPath(parts[2]);
  if (path.empty()) {
    return res.SetText(404, "container " + parts[2] + " is not in pod " + parts[1] + "\n");
  }
  std::string text = ReadFile(path).value_or("");
  if (req.HasParam("tailLines")) {
    long n = std::strtol(req.Param("tailLines").c_str(), nullptr, 10);  // NOLINT(runtime/int)
    if (n >= 0) {
      size_t pos = text.size();
      if (pos > 0 && text[pos - 1] == '\n') --pos;
      for (long i = 0; i < n && pos != std::string::npos; ++i) {  // NOLINT(runtime/int)
        pos = pos == 0 ? std::string::npos : text.rfind('\n', pos - 1);
      }
      text = pos == std::string::npos ? text : text.substr(pos + 1);
    }
  }
  res.SetText(200, std::move(text));
}

Result<std::unique_ptr<Kubelet>> Kubelet::Start(k8s::RestClient& client, KubeletOptions options) {
  auto impl = std::make_unique<Impl>(client, std::move(options));
  HAMI_RETURN_IF_ERROR(impl->Start());
  return std::unique_ptr<Kubelet>(new Kubelet(std::move(impl)));
}

Kubelet::Kubelet(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Kubelet::~Kubelet() { Stop(); }
void Kubelet::Stop() { impl_->Stop(); }
int Kubelet::port() const { return impl_->port_; }
DeviceManager& Kubelet::devices() { return *impl_->devices_; }

}  // namespace hami::sim
