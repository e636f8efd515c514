// PodWorker's thread: init containers in order, then the containers with their restarts and
// backoff, the pod's termination after a deletion, and the pod status written to the API.
#include "sim/kubelet/kubelet_internal.h"

#include <poll.h>
#include <signal.h>
#include <sys/wait.h>

#include <algorithm>

#include "k8s/api_error.h"

namespace hami::sim {

using kubelet_internal::Json;
using kubelet_internal::Now;

void PodWorker::WaitForExits(int timeout_ms) {
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

bool PodWorker::ShouldRestart(const Container& c) {
  if (IsDeleting() || c.init) return false;
  if (restart_policy_ == "Always") return true;
  return restart_policy_ == "OnFailure" && c.exit_code != 0;
}

std::chrono::milliseconds PodWorker::Backoff(int restarts) const {
  auto d = k_.options_.restart_backoff * (1 << std::min(restarts, 4));
  return std::min<std::chrono::milliseconds>(d, std::chrono::seconds(10));
}

void PodWorker::Run() {
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

void PodWorker::Started(Container& c, bool ok) {
  if (ok) {
    HAMI_LOG(Info) << "kubelet " << k_.options_.node_name << ": pod " << Key() << " container "
                   << c.spec.name << " started (pid " << c.pid << ")"
                   << (c.launch.stand_in ? " as the stand-in GPU workload" : "");
    k_.Event(pod_, "Normal", "Started", "Started container " + c.spec.name);
  } else {
    k_.Event(pod_, "Warning", "Failed", "Error: cannot start container " + c.spec.name);
  }
}

bool PodWorker::IsDeleting() {
  MutexLock l(mu_);
  return deleting_;
}

bool PodWorker::IsRunning(const Container& c) {
  MutexLock l(mu_);
  return c.state == Container::State::kRunning;
}

bool PodWorker::Sleep(std::chrono::milliseconds d) {
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

void PodWorker::Terminate() {
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

void PodWorker::Finish() {
  if (IsDeleting()) return Terminate();
  ReportStatus();
  while (status_dirty_ && Sleep(std::chrono::seconds(1))) ReportStatus();
  k_.devices_->FreePod(uid_);  // a finished pod holds no devices
  MutexLock l(mu_);
  finished_ = true;
}

void PodWorker::ReportStatus() {
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

bool PodWorker::PatchStatus(const Json& body) {
  Result<k8s::WriteAck> r =
      client().PatchAck(k8s::kPods, ns_, name_, k8s::PatchType::kMerge, body.dump(), "status");
  if (!r.ok() && !k8s::IsNotFound(r.status())) {
    HAMI_LOG(Warning) << "kubelet " << k_.options_.node_name << ": pod " << Key()
                      << ": status not written (" << r.status().message() << "); will retry";
    return false;
  }
  return true;
}

void PodWorker::WriteStatusUntilDone(const Json& body) {
  while (!PatchStatus(body)) {
    if (!Sleep(std::chrono::seconds(1))) return;
  }
}

}  // namespace hami::sim
