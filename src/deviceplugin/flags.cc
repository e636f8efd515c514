#include "deviceplugin/flags.h"

#include <limits.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <cstdlib>
#include <filesystem>
#include <tuple>

#include "common/duration.h"
#include "common/file_util.h"
#include "common/go_flags.h"
#include "common/env_limits.h"
#include "device/config.h"
#include "device/node_config.h"
#include "device/vendor.h"

namespace hami::deviceplugin {

namespace {

std::optional<std::string> EnvIfSet(const char* name) {
  const char* v = std::getenv(name);
  return v != nullptr ? std::optional<std::string>(v) : std::nullopt;
}

}  // namespace

std::string DefaultLibvgpuPath() {
  char self[PATH_MAX] = {};
  ssize_t n = readlink("/proc/self/exe", self, sizeof(self) - 1);
  if (n > 0) {
    std::filesystem::path p = std::filesystem::path(std::string(self, static_cast<size_t>(n)))
                                  .parent_path()
                                  .parent_path() /
                              "lib" / "libvgpu.so";
    if (std::filesystem::exists(p)) return p.string();
  }
  return "/k8s-vgpu/lib/nvidia/libvgpu.so";
}

PluginFlags DefaultPluginFlags() {
  PluginFlags f;
  f.node_name = EnvOr("NODE_NAME");
  f.device_list_strategy = EnvOr("DEVICE_LIST_STRATEGY", f.device_list_strategy);
  f.cdi_spec_dir = EnvOr("CDI_SPEC_DIR", f.cdi_spec_dir);
  f.mig_strategy = EnvOr("MIG_STRATEGY", f.mig_strategy);
  f.kubeconfig = EnvOr("KUBECONFIG");
  f.hook_path = EnvOr("HOOK_PATH", f.hook_path);
  f.libvgpu = DefaultLibvgpuPath();
  f.gdrcopy = EnvOr("GDRCOPY_ENABLED", f.gdrcopy);
  f.gds = EnvOr("GDS_ENABLED", f.gds);
  f.mofed = EnvOr("MOFED_ENABLED", f.mofed);
  f.volcano = EnvOr("VOLCANO_MODE");
  f.volcano_enforce_memory = EnvOr("VOLCANO_ENFORCE_MEMORY", f.volcano_enforce_memory);
  f.topology_score = EnvOr("ENABLE_TOPOLOGY_SCORE");
  f.disable_healthchecks = EnvIfSet("DP_DISABLE_HEALTHCHECKS");
  f.enable_healthchecks = EnvIfSet("DP_ENABLE_HEALTHCHECKS");
  return f;
}

void AddPluginFlags(CLI::App& app, PluginFlags* f) {
  app.add_option("--config-file", f->config_file,
                 "device-config.yaml (default: the chart's built-in NVIDIA settings)");
  app.add_option("--node-config-file", f->node_config_file,
                 "per-node overrides (config.json); ignored when missing")
      ->capture_default_str();
  app.add_option("--node-name", f->node_name, "this node (default $NODE_NAME)");
  app.add_option("--device-plugin-path", f->plugin_dir, "kubelet's device plugin directory")
      ->capture_default_str();
  app.add_option("--hook-path", f->hook_path, "HOOK_PATH: libvgpu lives in <hook-path>/vgpu")
      ->capture_default_str();
  app.add_option("--libvgpu", f->libvgpu, "the libvgpu.so to install")->capture_default_str();
  app.add_option("--nvml-library", f->nvml_library, "NVML to load")->capture_default_str();
  app.add_option("--mps-pipe-directory", f->mps_pipe, "MPS daemon pipe directory (mode mps)")
      ->capture_default_str();
  app.add_option("--ready-file", f->ready_file,
                 "once registered with kubelet, write the plugin socket and the PID to this file "
                 "as JSON");
  app.add_option("--register-interval", f->register_interval,
                 "how often the node registration is refreshed")
      ->capture_default_str();
  app.add_option("--kubeconfig", f->kubeconfig,
                 "kubeconfig file (default $KUBECONFIG, in-cluster)");
  app.add_option("--context", f->context, "kubeconfig context");
  app.add_option("--kube-qps", f->kube_qps, "API requests per second (<= 0: unlimited)")
      ->capture_default_str();
  app.add_option("--kube-burst", f->kube_burst, "API request burst")->capture_default_str();
  app.add_option("--volcano", f->volcano,
                 "serve Volcano's deviceshare plugin instead of hami-scheduler: vgpu "
                 "(volcano.sh/vgpu-number, -memory, -cores), share (volcano.sh/gpu-memory) or "
                 "number (volcano.sh/gpu-number), or whole (whole GPUs as nvidia.com/gpu for "
                 "Jobs that ask for them); default $VOLCANO_MODE");
  app.add_option("--volcano-enforce-memory", f->volcano_enforce_memory,
                 "with --volcano=share: hold each container to its volcano.sh/gpu-memory with "
                 "libvgpu.so (default $VOLCANO_ENFORCE_MEMORY)")
      ->capture_default_str();
  app.add_option("--disable-core-limit", f->disable_core_limit,
                 "turn SM limits off (also disableCoreLimit in device-config.yaml)")
      ->capture_default_str();
  app.add_option("--fail-on-init-error", f->fail_on_init_error,
                 "exit when the GPUs cannot be read (false: wait and retry)")
      ->capture_default_str();
  // GDRCopy, GPUDirect Storage, MOFED: asked of the NVIDIA container runtime for every container.
  app.add_option("--gdrcopy-enabled", f->gdrcopy,
                 "containers get NVIDIA_GDRCOPY=enabled (default $GDRCOPY_ENABLED, else false)");
  app.add_option("--gds-enabled", f->gds,
                 "containers get NVIDIA_GDS=enabled (default $GDS_ENABLED, else false)");
  app.add_option("--mofed-enabled", f->mofed,
                 "containers get NVIDIA_MOFED=enabled (default $MOFED_ENABLED, else false)");
  app.add_option("--mig-strategy", f->mig_strategy,
                 "existing MIG devices: none, single (as nvidia.com/gpu) or mixed "
                 "(nvidia.com/mig-<profile>); a node's config.json migstrategy overrides it "
                 "(default $MIG_STRATEGY, else none)")
      ->capture_default_str();
  app.add_option("--device-list-strategy", f->device_list_strategy,
                 "how containers learn their GPUs: envvar, volume-mounts, cdi-annotations, "
                 "cdi-cri, comma-separated (default $DEVICE_LIST_STRATEGY, else envvar)")
      ->capture_default_str();
  app.add_option("--cdi-spec-dir", f->cdi_spec_dir,
                 "operating mode mig with a CDI device list strategy: where each MIG device's "
                 "CDI spec is written (default $CDI_SPEC_DIR, else /var/run/cdi)")
      ->capture_default_str();
  app.add_option("--device-id-strategy", f->device_id_strategy, "only uuid is supported")
      ->capture_default_str();
  app.add_option("--pass-device-specs", f->pass_device_specs,
                 "accepted; device nodes come from the NVIDIA container runtime");
  app.add_option("--device-split-count", f->split, "accepted; use deviceSplitCount");
  app.add_option("--device-memory-scaling", f->memory_scaling, "accepted; use deviceMemoryScaling");
  app.add_option("--device-cores-scaling", f->core_scaling, "accepted; use deviceCoreScaling");
  app.add_option("--resource-name", f->resource_name, "accepted; use resourceCountName");
  app.add_flag("--print-registration", f->print_registration,
               "discover the GPUs, print the node registration (and pair scores) and exit");
  app.add_option("-v,--v", f->verbosity, "log verbosity")->capture_default_str();
}

namespace {

// The flags that change nothing, each named in a warning.
void NoteIgnoredFlags(const PluginFlags& f, std::vector<std::string>* warnings) {
  if (f.device_id_strategy != "uuid") {
    warnings->push_back("--device-id-strategy=" + f.device_id_strategy +
                        ": only uuid is supported; using it");
  }
  if (f.split != 0 || f.memory_scaling != 0 || f.core_scaling != 0 || !f.resource_name.empty()) {
    warnings->push_back(
        "--device-split-count/--device-*-scaling/--resource-name are ignored, as upstream "
        "ignores them: set them in device-config.yaml or config.json");
  }
}

// device-config.yaml (its nvidia: section is required) and config.json (optional).
Status LoadConfigFiles(const PluginFlags& f, device::DeviceConfig* device_config,
                       device::NodeConfigFile* node_config, std::vector<std::string>* warnings) {
  *device_config = device::DefaultDeviceConfig();
  if (!f.config_file.empty()) {
    Result<std::string> text = ReadFileToString(f.config_file);
    if (!text.ok()) return InvalidArgumentError("--config-file: " + text.status().ToString());
    Result<device::DeviceConfig> parsed = device::ParseDeviceConfigYaml(*text);
    if (!parsed.ok()) return InvalidArgumentError(f.config_file + ": " + parsed.status().message());
    *device_config = std::move(*parsed);
    for (const std::string& w : device_config->warnings) {
      warnings->push_back(f.config_file + ": " + w);
    }
  }
  if (!device_config->nvidia) {
    return InvalidArgumentError(f.config_file + ": no nvidia: section, nothing to serve");
  }
  if (!std::filesystem::exists(f.node_config_file)) return OkStatus();
  Result<std::string> text = ReadFileToString(f.node_config_file);
  if (!text.ok()) return InvalidArgumentError("--node-config-file: " + text.status().ToString());
  Result<device::NodeConfigFile> parsed = device::ParseNodeConfigJson(*text);
  if (!parsed.ok()) {
    return InvalidArgumentError(f.node_config_file + ": " + parsed.status().message());
  }
  *node_config = std::move(*parsed);
  return OkStatus();
}

// How containers get their GPUs and what the runtime adds: AllocationSettings from the flags.
Status ApplyAllocationFlags(const PluginFlags& f, AllocationSettings* alloc) {
  Result<DeviceListStrategies> device_list = ParseDeviceListStrategies(f.device_list_strategy);
  if (!device_list.ok()) {
    return InvalidArgumentError("--device-list-strategy: " + device_list.status().message());
  }
  alloc->device_list = *device_list;
  for (auto [flag, text, on] : {std::tuple{"--gdrcopy-enabled", &f.gdrcopy, &alloc->gdrcopy},
                                std::tuple{"--gds-enabled", &f.gds, &alloc->gds},
                                std::tuple{"--mofed-enabled", &f.mofed, &alloc->mofed}}) {
    if (const char* bad = ParseBool(text->c_str(), on)) {
      return InvalidArgumentError(std::string(flag) + " \"" + *text + "\": " + bad);
    }
  }
  alloc->hook_path = f.hook_path;
  alloc->mps_pipe_directory = f.mps_pipe;
  return OkStatus();
}

// The annotation NVIDIA's allocation consumes, and the other vendors' (whose GPUs another
// plugin hands out).
void ApplyVendorKeys(const device::DeviceConfig& config, AllocationSettings* alloc) {
  Result<device::VendorRegistry> reg = device::VendorRegistry::FromConfig(config);
  if (!reg.ok()) return;
  for (const auto& v : reg->vendors()) {
    if (v->Key() == "NVIDIA") {
      alloc->to_allocate_key = v->annotation_keys().to_allocate;
    } else if (!v->annotation_keys().to_allocate.empty()) {
      alloc->other_to_allocate_keys.push_back(v->annotation_keys().to_allocate);
    }
  }
}

// The MIG strategy: the flag, or this node's config.json entry when it names one.
Result<MigStrategy> ResolveMigStrategy(const PluginFlags& f, const device::NodeConfigFile& nodes,
                                       std::vector<std::string>* warnings) {
  Result<MigStrategy> flag = ParseMigStrategy(f.mig_strategy);
  if (!flag.ok()) return InvalidArgumentError("--mig-strategy: " + flag.status().message());
  for (const device::NodeConfigEntry& e : nodes.nodes) {
    if (e.name != f.node_name || !e.mig_strategy) continue;
    Result<MigStrategy> node = ParseMigStrategy(*e.mig_strategy);
    if (!node.ok()) {
      return InvalidArgumentError(f.node_config_file + ": node " + e.name + ": " +
                                  node.status().message());
    }
    if (*node != *flag) {
      warnings->push_back(f.node_config_file + ": node " + e.name + " sets migstrategy \"" +
                          *e.mig_strategy + "\", which overrides --mig-strategy=" +
                          f.mig_strategy);
    }
    return node;
  }
  return flag;
}

// --volcano: Volcano's resource names come from the device config's, unless those are still
// HAMi's defaults (a HAMi config file, or none), which Volcano's defaults then replace.
Status ApplyVolcano(const PluginFlags& f, const device::NvidiaConfig& nvidia,
                    PluginOptions* o) {
  if (f.volcano.empty()) return OkStatus();
  if (f.volcano != "vgpu" && f.volcano != "share" && f.volcano != "number" &&
      f.volcano != "whole") {
    return InvalidArgumentError("--volcano (VOLCANO_MODE) \"" + f.volcano +
                                "\": want vgpu, share, number or whole");
  }
  const bool enforce = f.volcano_enforce_memory == "true";
  if (!enforce && f.volcano_enforce_memory != "false") {
    return InvalidArgumentError("--volcano-enforce-memory (VOLCANO_ENFORCE_MEMORY) \"" +
                                f.volcano_enforce_memory + "\": want true or false");
  }
  if (enforce && f.volcano != "share") {
    return InvalidArgumentError(
        "--volcano-enforce-memory applies to --volcano=share only (" +
        std::string(f.volcano == "vgpu" ? "vgpu memory is always enforced"
                                        : "the other modes hand out whole GPUs") +
        ")");
  }
  if (o->mig_strategy != MigStrategy::kNone) {
    return InvalidArgumentError(
        "--volcano=" + f.volcano + " on node " + f.node_name +
        ": Volcano does not schedule MIG devices made beforehand (a MIG strategy); for MIG "
        "under Volcano use operating mode mig with --volcano=vgpu (Volcano's dynamic MIG)");
  }
  if (o->settings.operating_mode == device::OperatingMode::kMig && f.volcano != "vgpu") {
    return InvalidArgumentError("--volcano=" + f.volcano + " on node " + f.node_name +
                                ": operating mode mig is served under Volcano only in vGPU "
                                "mode (--volcano=vgpu, Volcano's dynamic MIG)");
  }
  if (f.volcano == "whole") {  // no Volcano protocol: none of its names or factors apply
    VolcanoSettings whole;
    whole.whole = true;
    whole.handshake = false;
    o->resource_name = nvidia.resource_count_name;
    o->volcano = std::move(whole);
    return OkStatus();
  }
  const device::NvidiaConfig hami;
  VolcanoSettings v;
  auto pick = [](const std::string& configured, const std::string& hami_default,
                 std::string* out) {
    if (configured != hami_default) *out = configured;
  };
  pick(nvidia.resource_count_name, hami.resource_count_name, &v.count_resource);
  pick(nvidia.resource_memory_name, hami.resource_memory_name, &v.memory_resource);
  pick(nvidia.resource_core_name, hami.resource_core_name, &v.cores_resource);
  v.memory_factor = nvidia.gpu_memory_factor;
  v.mig_geometries = nvidia.known_mig_geometries;
  v.core_scaling = o->settings.device_core_scaling;
  o->resource_name = v.count_resource;
  if (f.volcano != "vgpu") {
    v.share = f.volcano == "share" ? device::VolcanoShareMode::kMemory
                                   : device::VolcanoShareMode::kNumber;
    v.enforce_memory = enforce;
    v.handshake = false;
    o->resource_name = std::string(device::VolcanoShareResource(*v.share));
  }
  o->volcano = std::move(v);
  return OkStatus();
}

}  // namespace

Result<PluginConfig> PluginConfigFromFlags(const PluginFlags& f) {
  PluginConfig c;
  if (f.node_name.empty()) {
    return InvalidArgumentError("the node name is unknown: set NODE_NAME or --node-name");
  }
  NoteIgnoredFlags(f, &c.warnings);
  PluginOptions& o = c.options;
  HAMI_RETURN_IF_ERROR(ApplyAllocationFlags(f, &o.allocation));
  device::DeviceConfig device_config;
  device::NodeConfigFile node_config;
  HAMI_RETURN_IF_ERROR(LoadConfigFiles(f, &device_config, &node_config, &c.warnings));
  Result<std::chrono::milliseconds> interval = ParseGoDuration(f.register_interval);
  if (!interval.ok() || interval->count() <= 0) {
    return InvalidArgumentError("--register-interval \"" + f.register_interval +
                                "\": expected a duration like 30s");
  }
  const device::NvidiaConfig& nvidia = *device_config.nvidia;
  o.node_name = f.node_name;
  o.resource_name = nvidia.resource_count_name;
  o.settings = device::ResolveNodeSettings(nvidia, node_config, f.node_name);
  Result<MigStrategy> mig = ResolveMigStrategy(f, node_config, &c.warnings);
  if (!mig.ok()) return mig.status();
  o.mig_strategy = *mig;
  if (o.settings.operating_mode == device::OperatingMode::kMig &&
      o.mig_strategy != MigStrategy::kNone) {
    c.warnings.push_back("node " + f.node_name +
                         " is in operating mode mig: its plugin makes the MIG devices itself, "
                         "so the MIG strategy (--mig-strategy or migstrategy) does not apply "
                         "there");
    o.mig_strategy = MigStrategy::kNone;
  }
  if (o.settings.operating_mode == device::OperatingMode::kMig &&
      o.allocation.device_list.AnyCdi()) {
    // Upstream's B8: the MIG devices are made at Allocate, after the toolkit generated its spec;
    // each gets its own spec file there.
    MigCdiOptions cdi;
    cdi.spec_dir = f.cdi_spec_dir;
    cdi.toolkit_specs = {f.cdi_spec_dir + "/nvidia.yaml", f.cdi_spec_dir + "/nvidia.json",
                         "/etc/cdi/nvidia.yaml", "/etc/cdi/nvidia.json"};
    o.mig_cdi = std::move(cdi);
  }
  o.mig_allowlist = nvidia.mig_profile_allowlist;
  o.mig_state_file = f.hook_path + "/vgpu/mig-instances.json";
  if (o.mig_strategy == MigStrategy::kSingle &&
      o.settings.operating_mode == device::OperatingMode::kMps) {
    return InvalidArgumentError(
        "mig strategy single with operating mode mps: MIG devices cannot be shared through "
        "MPS here; use mixed, or operating mode hami-core");
  }
  HAMI_RETURN_IF_ERROR(ApplyVolcano(f, nvidia, &o));
  if (o.volcano && o.settings.operating_mode == device::OperatingMode::kMig &&
      o.volcano->mig_geometries.empty()) {
    c.warnings.push_back("node " + f.node_name +
                         " is in operating mode mig under Volcano, but the device config has no "
                         "knownMigGeometries: Volcano's scheduler, reading the same config, "
                         "places no MIG pod on it");
  }
  o.register_interval = *interval;
  o.topology_score = f.topology_score == "true";
  o.xid_policy = ParseXidPolicy(f.disable_healthchecks ? f.disable_healthchecks->c_str() : nullptr,
                                f.enable_healthchecks ? f.enable_healthchecks->c_str() : nullptr,
                                &c.warnings);
  AllocationSettings& alloc = o.allocation;
  alloc.operating_mode = o.settings.operating_mode;
  alloc.device_memory_scaling = o.settings.device_memory_scaling;
  alloc.lib_cuda_log_level = o.settings.lib_cuda_log_level;
  alloc.disable_core_limit = f.disable_core_limit || nvidia.disable_core_limit;
  ApplyVendorKeys(device_config, &alloc);
  c.plugin_dir = f.plugin_dir;
  c.kubeconfig = f.kubeconfig;
  c.context = f.context;
  c.ready_file = f.ready_file;
  c.libvgpu = f.libvgpu;
  c.nvml_library = f.nvml_library;
  c.fail_on_init_error = f.fail_on_init_error;
  c.print_registration = f.print_registration;
  c.kube_qps = f.kube_qps;
  c.kube_burst = f.kube_burst;
  return c;
}

}  // namespace hami::deviceplugin
