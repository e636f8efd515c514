#include "deviceplugin/kubelet_plugins.h"

#include "deviceplugin/mig_resources.h"
#include "deviceplugin/volcano_backend.h"

namespace hami::deviceplugin {

std::string VolcanoSocketName(const std::string& resource) {
  const size_t slash = resource.rfind('/');
  return "nvidia-" + (slash == std::string::npos ? resource : resource.substr(slash + 1)) +
         ".sock";
}

KubeletPlugins::KubeletPlugins(PluginService& service, KubeletPluginsOptions options)
    : service_(service), options_(std::move(options)) {}

KubeletPlugins::~KubeletPlugins() { Stop(); }

void KubeletPlugins::Add(DevicePluginBackend& backend, const std::string& socket, bool preferred,
                         std::unique_ptr<DevicePluginBackend> owned) {
  auto s = std::make_unique<Served>();
  s->owned = std::move(owned);
  s->plugin = std::make_unique<GrpcPlugin>(backend, GrpcPluginOptions{
                                                        .plugin_dir = options_.plugin_dir,
                                                        .socket_name = socket,
                                                        .preferred_allocation = preferred});
  Served* raw = s.get();
  s->runner = std::make_unique<PluginRunner>(*s->plugin, options_.retry,
                                             [this, raw](uint64_t) { Registered(*raw); });
  served_.push_back(std::move(s));
}

void KubeletPlugins::AddWholeDevices(const std::string& resource, const std::string& socket) {
  auto whole = std::make_unique<WholeDeviceBackend>(
      resource, service_.options().allocation,
      [this, resource](uint64_t known, std::chrono::milliseconds timeout,
                       std::vector<PluginDevice>* out) {
        return service_.ResourceDevices(resource, known, timeout, out);
      });
  DevicePluginBackend& backend = *whole;
  Add(backend, socket, true, std::move(whole));
}

Status KubeletPlugins::Start() {
  const PluginOptions& o = service_.options();
  if (o.volcano && o.volcano->whole) {
    // Whole GPUs for Volcano's Jobs, chosen by kubelet, on the socket NVIDIA's plugin uses.
    AddWholeDevices(o.resource_name, "nvidia-gpu.sock");
    return served_.front()->runner->Start();
  }
  if (o.volcano && o.volcano->share) {
    // Volcano's GPU sharing or GPU number resource, on the socket Volcano's own agent uses.
    Add(service_, "volcano.sock", false, nullptr);
    return served_.front()->runner->Start();
  }
  if (o.volcano) {
    // Volcano's three resources, on the sockets Volcano's own agent uses.
    Add(service_, VolcanoSocketName(o.volcano->count_resource), false, nullptr);
    for (const std::string& resource : {o.volcano->memory_resource, o.volcano->cores_resource}) {
      auto units = std::make_unique<VolcanoUnitsBackend>(
          resource, [this, resource](uint64_t known, std::chrono::milliseconds timeout,
                                     std::vector<PluginDevice>* out) {
            return service_.ResourceDevices(resource, known, timeout, out);
          });
      DevicePluginBackend& backend = *units;
      Add(backend, VolcanoSocketName(resource), false, std::move(units));
    }
    for (const std::unique_ptr<Served>& s : served_) HAMI_RETURN_IF_ERROR(s->runner->Start());
    return OkStatus();
  }
  Add(service_, "nvidia-gpu.sock", o.settings.enable_get_preferred_allocation, nullptr);
  for (const std::string& resource : service_.MigResourceNames()) {
    AddWholeDevices(resource, MigSocketName(resource));
  }
  for (const std::unique_ptr<Served>& s : served_) HAMI_RETURN_IF_ERROR(s->runner->Start());
  return OkStatus();
}

void KubeletPlugins::Registered(Served& s) {
  if (s.registered.exchange(true)) return;
  if (++ready_ == served_.size() && options_.on_ready) options_.on_ready(sockets());
}

void KubeletPlugins::RequestRestart() {
  for (const std::unique_ptr<Served>& s : served_) s->runner->RequestRestart();
}

void KubeletPlugins::Stop() {
  for (const std::unique_ptr<Served>& s : served_) s->runner->Stop();
}

std::vector<std::string> KubeletPlugins::sockets() const {
  std::vector<std::string> out;
  for (const std::unique_ptr<Served>& s : served_) out.push_back(s->plugin->socket_path());
  return out;
}

}  // namespace hami::deviceplugin
