#include "deviceplugin/runner.h"

#include <poll.h>
#include <sys/eventfd.h>
#include <sys/inotify.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <string>

#include "common/log.h"
#include "common/thread_name.h"

namespace hami::deviceplugin {

PluginRunner::PluginRunner(GrpcPlugin& plugin, std::chrono::milliseconds retry,
                           std::function<void(uint64_t)> on_registered)
    : plugin_(plugin), retry_(retry), on_registered_(std::move(on_registered)) {}

PluginRunner::~PluginRunner() { Stop(); }

Status PluginRunner::Start() {
  const std::string& dir = plugin_.options().plugin_dir;
  inotify_fd_ = inotify_init1(IN_CLOEXEC | IN_NONBLOCK);
  if (inotify_fd_ < 0) return Status(StatusCode::kInternal, "inotify_init1 failed");
  if (inotify_add_watch(inotify_fd_, dir.c_str(), IN_CREATE | IN_DELETE | IN_MOVED_TO) < 0) {
    std::string why = std::strerror(errno);
    close(inotify_fd_);
    inotify_fd_ = -1;
    return Status(StatusCode::kFailedPrecondition,
                  "cannot watch the device plugin directory " + dir + ": " + why);
  }
  wake_fd_ = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
  thread_ = std::thread([this] {
    SetCurrentThreadName("kubelet-reg");
    Run();
  });
  return OkStatus();
}

void PluginRunner::Wake() {
  uint64_t one = 1;
  if (wake_fd_ >= 0) (void)!write(wake_fd_, &one, sizeof(one));
}

void PluginRunner::RequestRestart() {
  reserve_ = true;
  restart_ = true;
  Wake();
}

void PluginRunner::Stop() {
  stop_ = true;
  Wake();
  if (thread_.joinable()) thread_.join();
  plugin_.Stop();
  if (inotify_fd_ >= 0) close(inotify_fd_);
  if (wake_fd_ >= 0) close(wake_fd_);
  inotify_fd_ = wake_fd_ = -1;
}

bool PluginRunner::SocketExists() const {
  struct stat st;
  return stat(plugin_.socket_path().c_str(), &st) == 0;
}

void PluginRunner::Run() {
  const std::string kubelet_name = plugin_.options().kubelet_socket;
  const std::string own_name = plugin_.options().socket_name;
  bool registered = false;
  auto next_try = std::chrono::steady_clock::now();
  while (!stop_) {
    auto now = std::chrono::steady_clock::now();
    if (restart_ && now >= next_try) {
      restart_ = false;
      // Re-serve only when the socket is gone (kubelet removes it when it starts) or on
      // request: replacing a live socket would cut the connection kubelet just made to it.
      Status s = OkStatus();
      if (reserve_.exchange(false) || !SocketExists()) s = plugin_.Serve();
      if (s.ok()) s = plugin_.Register();
      registered = s.ok();
      if (registered) {
        uint64_t n = ++registrations_;
        if (on_registered_) on_registered_(n);
      } else {
        HAMI_LOG(Warning) << s.message() << "; retrying in " << retry_.count() << " ms";
        restart_ = true;
        reserve_ = true;
        next_try = now + retry_;
      }
    }
    int timeout_ms = -1;
    if (restart_) {
      timeout_ms = static_cast<int>(std::max<int64_t>(
          0, std::chrono::duration_cast<std::chrono::milliseconds>(next_try -
                                                                   std::chrono::steady_clock::now())
                 .count()));
    }
    pollfd fds[2] = {{inotify_fd_, POLLIN, 0}, {wake_fd_, POLLIN, 0}};
    if (poll(fds, 2, timeout_ms) < 0 && errno != EINTR) break;
    if (fds[1].revents & POLLIN) {
      uint64_t v;
      (void)!read(wake_fd_, &v, sizeof(v));
      next_try = std::chrono::steady_clock::now();
    }
    if (fds[0].revents & POLLIN) {
      alignas(inotify_event) char buf[4096];
      ssize_t n;
      while ((n = read(inotify_fd_, buf, sizeof(buf))) > 0) {
        for (char* p = buf; p < buf + n;) {
          auto* ev = reinterpret_cast<inotify_event*>(p);
          std::string name = ev->len ? ev->name : "";
          if ((ev->mask & (IN_CREATE | IN_MOVED_TO)) && name == kubelet_name) {
            HAMI_LOG(Info) << "kubelet restarted (" << kubelet_name
                           << " re-created): registering again";
            restart_ = true;
            next_try = std::chrono::steady_clock::now();
          } else if ((ev->mask & IN_DELETE) && name == own_name && registered &&
                     !SocketExists()) {  // our own re-serve also deletes it first
            HAMI_LOG(Info) << "plugin socket " << own_name << " removed: serving it again";
            restart_ = true;
            registered = false;
            next_try = std::chrono::steady_clock::now();
          }
          p += sizeof(inotify_event) + ev->len;
        }
      }
    }
  }
}

}  // namespace hami::deviceplugin
