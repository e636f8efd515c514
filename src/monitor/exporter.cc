#include "monitor/exporter.h"

#include <algorithm>

#include "common/prom_text.h"

namespace hami::monitor {
namespace {

struct Row {
  const ContainerUsage* c;
  const ContainerDeviceUsage* d;
};

std::string DeviceType(const HostGpu& g) { return "NVIDIA-" + g.name; }

// NVML UUIDs are 40 characters; upstream's labels cut the region's 96-byte field there.
std::string_view Uuid(const std::string& uuid) { return std::string_view(uuid).substr(0, 40); }

void ContainerLabels(PromPage& p, const Row& r) {
  p.Label("namespace", r.c->pod->ns);
  p.Label("pod", r.c->pod->name);
  p.Label("container", r.c->container);
  p.IntLabel("vdevice_index", r.d->index);
  p.Label("device_uuid", Uuid(r.d->uuid));
}
void LegacyContainerLabels(PromPage& p, const Row& r) {
  p.Label("podnamespace", r.c->pod->ns);
  p.Label("podname", r.c->pod->name);
  p.Label("ctrname", r.c->container);
  p.IntLabel("vdeviceid", r.d->index);
  p.Label("deviceuuid", Uuid(r.d->uuid));
}

// A per-GPU family: one series per host GPU.
struct HostFamily {
  const char* name;
  const char* help;
  double (*value)(const HostGpu&);
};

// A per-container family: one series per (container, vGPU) row.
struct Family {
  const char* name;
  const char* help;
  double (*value)(const Row&);
};

using RowLabels = void (*)(PromPage&, const Row&);

constexpr HostFamily kHost[] = {
    {"hami_host_gpu_memory_used_bytes", "GPU device memory used on the node, in bytes",
     [](const HostGpu& g) { return static_cast<double>(g.memory_used); }},
    {"hami_host_gpu_utilization_ratio", "GPU utilisation on the node, in percent",
     [](const HostGpu& g) { return static_cast<double>(g.utilization); }},
    {"hami_host_gpu_memory_controller_utilization_ratio",
     "GPU memory controller utilisation, in percent",
     [](const HostGpu& g) { return static_cast<double>(g.memory_utilization); }},
};

constexpr Family kFamilies[] = {
    {"hami_vgpu_memory_used_bytes", "Device memory a container uses on a vGPU, in bytes",
     [](const Row& r) { return static_cast<double>(r.d->used); }},
    {"hami_vgpu_memory_limit_bytes", "Device memory limit of a container's vGPU, in bytes",
     [](const Row& r) { return static_cast<double>(r.d->limit); }},
    {"hami_container_device_memory_bytes", "Device memory a container uses, in bytes",
     [](const Row& r) { return static_cast<double>(r.d->used); }},
    {"hami_container_device_utilization_ratio",
     "SM utilisation of a container's processes on a GPU, in percent",
     [](const Row& r) { return r.d->sm_util; }},
    {"hami_vgpu_memory_context_bytes", "Device memory of a container's CUDA contexts, in bytes",
     [](const Row& r) { return static_cast<double>(r.d->context); }},
    {"hami_vgpu_memory_module_bytes", "Device memory of a container's loaded modules, in bytes",
     [](const Row& r) { return static_cast<double>(r.d->module); }},
    {"hami_vgpu_memory_buffer_bytes", "Device memory of a container's allocations, in bytes",
     [](const Row& r) { return static_cast<double>(r.d->buffer); }},
};

// A per-MIG-device family: one series per MIG device of each host GPU.
struct MigFamily {
  const char* name;
  const char* help;
  double (*value)(const MigDevice&);
};

constexpr MigFamily kMig[] = {
    {"hami_mig_device_memory_used_bytes",
     "Device memory used in a MIG device's GPU instance on the node, in bytes",
     [](const MigDevice& m) { return static_cast<double>(m.memory_used); }},
    {"hami_mig_device_memory_total_bytes",
     "Device memory of a MIG device's GPU instance on the node, in bytes",
     [](const MigDevice& m) { return static_cast<double>(m.memory_total); }},
};

constexpr HostFamily kLegacyHost[] = {
    {"HostGPUMemoryUsage", "GPU device memory used on the node, in bytes (legacy name)",
     kHost[0].value},
    {"HostCoreUtilization", "GPU utilisation on the node, in percent (legacy name)",
     kHost[1].value},
};

constexpr Family kLegacy[] = {
    {"vGPU_device_memory_usage_in_bytes", "Device memory a container uses (legacy name)",
     [](const Row& r) { return static_cast<double>(r.d->used); }},
    {"vGPU_device_memory_limit_in_bytes", "Device memory limit of a container (legacy name)",
     [](const Row& r) { return static_cast<double>(r.d->limit); }},
    {"Device_utilization_desc_of_container",
     "SM utilisation of a container, in percent (legacy name)",
     [](const Row& r) { return r.d->sm_util; }},
};

// One row per device of each container that its pod still declares; usage left behind by a
// container the pod no longer has is not exported.
std::vector<Row> CollectRows(const MonitorSnapshot& snap) {
  std::vector<Row> rows;
  for (const ContainerUsage& c : snap.containers) {
    if (!c.pod) continue;
    const auto& names = c.pod->containers;
    if (std::find(names.begin(), names.end(), c.container) == names.end()) continue;
    for (const ContainerDeviceUsage& d : c.devices) rows.push_back({&c, &d});
  }
  return rows;
}

// Per GPU, each series with its node (upstream leaves `node` off the memory-controller family,
// which made it impossible to tell two nodes' GPU 0 apart; an added label breaks no query that
// matches on the others).
void RenderHostFamilies(PromPage& p, const MonitorSnapshot& snap, const ExporterOptions& o) {
  for (const HostFamily& f : kHost) {
    p.Family(f.name, f.help);
    for (const HostGpu& g : snap.gpus) {
      p.Begin();
      p.Label("node", o.node);
      p.IntLabel("device_index", g.index);
      p.Label("device_uuid", g.uuid);
      p.Label("device_type", DeviceType(g));
      p.End(f.value(g));
    }
  }
}

// Per MIG device, labelled with its GPU; GPUs without MIG have none.
void RenderMigFamilies(PromPage& p, const MonitorSnapshot& snap, const ExporterOptions& o) {
  for (const MigFamily& f : kMig) {
    p.Family(f.name, f.help);
    for (const HostGpu& g : snap.gpus) {
      for (const MigDevice& m : g.migs) {
        p.Begin();
        p.Label("node", o.node);
        p.IntLabel("device_index", g.index);
        p.Label("device_uuid", g.uuid);
        p.Label("mig_uuid", m.uuid);
        p.Label("profile", m.profile);
        p.IntLabel("gpu_instance_id", m.gpu_instance_id);
        p.IntLabel("compute_instance_id", m.compute_instance_id);
        p.End(f.value(m));
      }
    }
  }
}

void RenderMigInfo(PromPage& p, const MonitorSnapshot& snap) {
  p.Family("hami_mig_device_info", "MIG device a container holds (always 1)");
  for (const MigReservation& r : snap.mig_reservations) {
    p.Begin();
    p.Label("namespace", r.ns);
    p.Label("pod", r.pod);
    p.Label("container", r.container);
    p.IntLabel("vdevice_index", r.vdevice_index);
    p.Label("device_uuid", r.gpu_uuid);
    p.Label("mig_uuid", r.mig_uuid);
    p.Label("profile", r.profile);
    p.IntLabel("gpu_instance_id", r.gpu_instance_id);
    p.IntLabel("compute_instance_id", r.compute_instance_id);
    p.End(1);
  }
}

void RenderLegacyHostFamilies(PromPage& p, const MonitorSnapshot& snap,
                              const ExporterOptions& o) {
  for (const HostFamily& f : kLegacyHost) {
    p.Family(f.name, f.help);
    for (const HostGpu& g : snap.gpus) {
      p.Begin();
      p.Label("nodeid", o.node);
      p.IntLabel("deviceidx", g.index);
      p.Label("deviceuuid", g.uuid);
      p.Label("devicetype", DeviceType(g));
      p.End(f.value(g));
    }
  }
}

template <size_t N>
void RenderRowFamilies(PromPage& p, const Family (&families)[N], const std::vector<Row>& rows,
                       RowLabels labels) {
  for (const Family& f : families) {
    p.Family(f.name, f.help);
    for (const Row& r : rows) {
      p.Begin();
      labels(p, r);
      p.End(f.value(r));
    }
  }
}

// Containers that never launched a kernel (time 0) have no series; a clock behind the recorded
// launch time reads as 0 seconds rather than a negative age.
void RenderLastKernel(PromPage& p, const std::vector<Row>& rows, const ExporterOptions& o,
                      RowLabels labels) {
  for (const Row& r : rows) {
    if (r.c->last_kernel_time == 0) continue;
    p.Begin();
    labels(p, r);
    p.End(o.now_s > r.c->last_kernel_time ? static_cast<double>(o.now_s - r.c->last_kernel_time)
                                          : 0.0);
  }
}

void RenderBuildInfo(PromPage& p, const ExporterOptions& o) {
  p.Family("hami_build_info", "Build of the running hami-monitor (always 1)");
  p.Begin();
  p.Label("version", o.version);
  p.Label("revision", o.revision);
  p.Label("build_date", o.build_date);
  p.Label("compiler", o.compiler);
  p.Label("platform", o.platform);
  p.End(1);
}

// The pre-rename families that upstream dashboards still query, after the current ones.
void RenderLegacyFamilies(PromPage& p, const MonitorSnapshot& snap, const std::vector<Row>& rows,
                          const ExporterOptions& o) {
  RenderLegacyHostFamilies(p, snap, o);
  RenderRowFamilies(p, kLegacy, rows, LegacyContainerLabels);
  p.Family("Device_last_kernel_of_container",
           "Seconds since a container last launched a kernel (legacy name)");
  RenderLastKernel(p, rows, o, LegacyContainerLabels);
  p.Family("Device_memory_desc_of_container",
           "Device memory a container uses, with its breakdown as labels (legacy name)");
  for (const Row& r : rows) {
    p.Begin();
    LegacyContainerLabels(p, r);
    p.IntLabel("context", r.d->context);
    p.IntLabel("module", r.d->module);
    p.IntLabel("data", r.d->buffer);
    p.IntLabel("offset", 0);
    p.End(static_cast<double>(r.d->used));
  }
}

}  // namespace

std::string RenderMonitorMetrics(const MonitorSnapshot& snap, const ExporterOptions& o) {
  std::vector<Row> rows = CollectRows(snap);
  size_t series = (snap.gpus.size() * 3 + rows.size() * 9) * (o.legacy ? 2 : 1) +
                  snap.mig_reservations.size();
  for (const HostGpu& g : snap.gpus) series += g.migs.size() * 2;
  PromPage p(series * 200 + 2048);
  RenderHostFamilies(p, snap, o);
  RenderRowFamilies(p, kFamilies, rows, ContainerLabels);
  p.Family("hami_container_last_kernel_elapsed_seconds",
           "Seconds since a container last launched a kernel");
  RenderLastKernel(p, rows, o, ContainerLabels);
  RenderMigFamilies(p, snap, o);
  RenderMigInfo(p, snap);
  RenderBuildInfo(p, o);
  if (o.legacy) RenderLegacyFamilies(p, snap, rows, o);
  return p.Take();
}

}  // namespace hami::monitor
