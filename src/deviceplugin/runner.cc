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

namespace {
constexpr const char* kRegisterKey = "register";
}  // namespace

PluginRunner::PluginRunner(GrpcPlugin& plugin, std::chrono::milliseconds retry,
                           std::function<void(uint64_t)> on_registered, const Clock* clock)
    : plugin_(plugin),
      retry_(retry),
      on_registered_(std::move(on_registered)),
      queue_(clock != nullptr ? *clock : real_clock_) {}

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
  queue_.Add(kRegisterKey);
  worker_ = std::thread([this] {
    SetCurrentThreadName("kubelet-reg");
    std::string key;
    while (queue_.Get(&key)) Attempt(key);
  });
  watcher_ = std::thread([this] {
    SetCurrentThreadName("kubelet-watch");
    Watch();
  });
  return OkStatus();
}

void PluginRunner::Want(bool reserve) {
  if (reserve) reserve_ = true;
  wanted_ = true;  // before Add: the attempt the key causes must see it
  queue_.Add(kRegisterKey);
}

void PluginRunner::RequestRestart() { Want(true); }

void PluginRunner::Stop() {
  stop_ = true;
  if (wake_fd_ >= 0) {
    uint64_t one = 1;
    (void)!write(wake_fd_, &one, sizeof(one));
  }
  if (watcher_.joinable()) watcher_.join();
  queue_.ShutDown();
  if (worker_.joinable()) worker_.join();
  plugin_.Stop();
  if (inotify_fd_ >= 0) close(inotify_fd_);
  if (wake_fd_ >= 0) close(wake_fd_);
  inotify_fd_ = wake_fd_ = -1;
}

bool PluginRunner::SocketExists() const {
  struct stat st;
  return stat(plugin_.socket_path().c_str(), &st) == 0;
}

void PluginRunner::Attempt(const std::string& key) {
  if (!wanted_.exchange(false)) {  // a retry an earlier attempt made unnecessary
    queue_.Done(key);
    return;
  }
  // Re-serve only when the socket is gone (kubelet removes it when it starts) or on request:
  // replacing a live socket would cut the connection kubelet just made to it. The watcher
  // ignores the socket's deletion while an attempt runs (the re-serve deletes it first).
  registered_ = false;
  Status s = OkStatus();
  if (reserve_.exchange(false) || !SocketExists()) s = plugin_.Serve();
  if (s.ok()) s = plugin_.Register();
  registered_ = s.ok();
  queue_.Done(key);
  if (s.ok()) {
    uint64_t n = ++registrations_;
    if (on_registered_) on_registered_(n);
    return;
  }
  HAMI_LOG(Warning) << s.message() << "; retrying in " << retry_.count() << " ms";
  reserve_ = true;
  wanted_ = true;
  queue_.AddAfter(key, retry_);
}

void PluginRunner::Watch() {
  while (!stop_) {
    pollfd fds[2] = {{inotify_fd_, POLLIN, 0}, {wake_fd_, POLLIN, 0}};
    if (poll(fds, 2, -1) < 0 && errno != EINTR) {
      HAMI_LOG(Error) << "watching " << plugin_.options().plugin_dir
                      << " failed: " << std::strerror(errno) << "; kubelet restarts go unnoticed";
      return;
    }
    if ((fds[0].revents & POLLIN) && ReadEvents()) Want(false);
  }
}

bool PluginRunner::ReadEvents() {
  const std::string& kubelet_name = plugin_.options().kubelet_socket;
  const std::string& own_name = plugin_.options().socket_name;
  bool want = false;
  alignas(inotify_event) char buf[4096];
  ssize_t n;
  while ((n = read(inotify_fd_, buf, sizeof(buf))) > 0) {
    for (char* p = buf; p < buf + n;) {
      auto* ev = reinterpret_cast<inotify_event*>(p);
      std::string name = ev->len ? ev->name : "";
      if ((ev->mask & (IN_CREATE | IN_MOVED_TO)) && name == kubelet_name) {
        HAMI_LOG(Info) << "kubelet restarted (" << kubelet_name
                       << " re-created): registering again";
        want = true;
      } else if ((ev->mask & IN_DELETE) && name == own_name && registered_ &&
                 !SocketExists()) {  // our own re-serve also deletes it first
        HAMI_LOG(Info) << "plugin socket " << own_name << " removed: serving it again";
        registered_ = false;
        want = true;
      }
      p += sizeof(inotify_event) + ev->len;
    }
  }
  return want;
}

}  // namespace hami::deviceplugin
