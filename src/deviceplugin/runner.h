// PluginRunner: keeps the plugin served and registered with kubelet for the life of the process.
//
// Kubelet forgets every plugin when it restarts: it removes the sockets in its device-plugins
// directory and creates kubelet.sock anew. The runner watches that directory (inotify) and, when
// kubelet.sock appears or the plugin's own socket disappears, registers again, serving a fresh
// socket first when its own is gone (one restart usually brings both events; a live socket is
// never replaced, since kubelet may already be talking to it). A failed attempt is retried,
// with a fresh socket, after `retry`. RequestRestart() re-serves and registers on demand
// (SIGHUP). While it waits for kubelet the rest of the plugin (registration annotation, health)
// carries on.
//
// Two threads: a watcher turns directory events into a "register" key on a WorkQueue, and a
// worker takes the key and makes one attempt (a failed one queues the key again after `retry`
// on the injected clock). A key that finds nothing wanted (a retry overtaken by an event that
// already registered) does nothing.
//
// Thread safety: Start/Stop from the owning thread; RequestRestart from any thread (signal
// handler threads included, not async-signal context).
#pragma once

#include <atomic>
#include <chrono>
#include <functional>
#include <thread>

#include "common/clock.h"
#include "common/status.h"
#include "deviceplugin/grpc_plugin.h"
#include "k8s/work_queue.h"

namespace hami::deviceplugin {

class PluginRunner {
 public:
  // `on_registered` (may be empty) runs on the runner's thread after each successful
  // registration, with the count so far. `clock` (null: the real one) times the retries and must
  // outlive the runner.
  PluginRunner(GrpcPlugin& plugin, std::chrono::milliseconds retry = std::chrono::seconds(5),
               std::function<void(uint64_t)> on_registered = {}, const Clock* clock = nullptr);
  ~PluginRunner();
  PluginRunner(const PluginRunner&) = delete;
  PluginRunner& operator=(const PluginRunner&) = delete;

  // Starts watching and the first serve/register attempt (in the background).
  Status Start();
  void RequestRestart();
  void Stop();

  // Successful registrations so far (for tests and logs).
  uint64_t registrations() const { return registrations_; }

 private:
  void Watch();
  // Reads the pending directory events; true when one asks for a new registration.
  bool ReadEvents();
  void Attempt(const std::string& key);
  void Want(bool reserve);
  bool SocketExists() const;

  GrpcPlugin& plugin_;
  const std::chrono::milliseconds retry_;
  const std::function<void(uint64_t)> on_registered_;
  RealClock real_clock_;
  k8s::WorkQueue queue_;
  int inotify_fd_ = -1;
  int wake_fd_ = -1;  // eventfd: Stop
  std::atomic<bool> stop_{false};
  std::atomic<bool> wanted_{true};      // register (again) at the next attempt
  std::atomic<bool> reserve_{true};     // and serve a fresh socket first
  std::atomic<bool> registered_{false};  // the last attempt succeeded
  std::atomic<uint64_t> registrations_{0};
  std::thread watcher_;
  std::thread worker_;
};

}  // namespace hami::deviceplugin
