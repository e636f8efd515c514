// mig_allocate_bench: time from the device plugin's Allocate to a MIG instance a container can
// use, on the simulated driver (issue 34).
//
//   build/bin/mig_allocate_bench [--iterations N] [--warmup N] [--gpu a100,h100]
//                                [--profiles 1g.10gb,3g.40gb,7g.80gb] [--state-dir DIR] [--cdi]
//
// A temporary simulated node holds an A100-SXM4-80GB and an H100 80GB with MIG enabled through
// the plugin's own NvmlDriver. Per iteration and profile (interleaved, so load on the machine
// spreads over all of them), for a fresh pod:
//   1. Allocate: the plugin's dynamic-MIG path in mig mode, PlanAllocation then
//      RealiseMigReservations over MigInstances and NvmlDriver (GPU instance at the reserved
//      placement, a compute instance spanning it, the state file written). The API round trips
//      of a real Allocate (pod lookup, node lock, the annotation patch) are left out:
//      deviceplugin_bench measures those.
//   2. Container: vgpu_probe `info` started with the response's environment
//      (NVIDIA_VISIBLE_DEVICES=MIG-<uuid>) and the simulated libcuda; timed from the spawn to
//      its exit with the report of cuInit, cuDeviceTotalMem and cuMemGetInfo, which must name
//      the instance and show exactly the profile's memory.
//   3. Destroy: MigInstances::Reconcile once the pod is gone, as the plugin's reclaim does.
// The NVML calls of steps 1 and 3 are also timed on their own, through a MigDriver that
// forwards to NvmlDriver. Each GPU's first Allocate reads its profile table and is reported
// apart; `--warmup` cycles per profile are run and not counted. The plugin's state file
// (written and fsynced at every create and destroy) goes to a temporary directory, or to
// `--state-dir` (a tmpfs there shows what the disk's fsync costs). With `--cdi` the plugin also
// keeps a CDI spec per MIG device (MigCdiSpecs on the instances' changes, as a node with a CDI
// device list strategy does): its write is then part of Allocate and its removal of destroy.
// The simulated node's own files go to a temporary directory under $TMPDIR.
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "common/go_flags.h"
#include "common/log.h"
#include "common/subprocess.h"
#include "device/mig_allocation.h"
#include "device/pod_devices.h"
#include "deviceplugin/allocation.h"
#include "deviceplugin/device_ids.h"
#include "deviceplugin/mig_allocate.h"
#include "deviceplugin/mig_cdi.h"
#include "deviceplugin/mig_instances.h"
#include "deviceplugin/nvml_driver.h"

namespace {

using namespace hami;                // NOLINT(build/namespaces): a benchmark driver
using namespace hami::deviceplugin;  // NOLINT(build/namespaces)
using SteadyClock = std::chrono::steady_clock;

constexpr uint64_t kMiB = 1ull << 20;

double Ms(SteadyClock::duration d) { return std::chrono::duration<double, std::milli>(d).count(); }

// Nearest-rank percentile of `v` (not empty).
double Percentile(std::vector<double> v, double p) {
  std::sort(v.begin(), v.end());
  size_t rank = static_cast<size_t>(std::ceil(p * static_cast<double>(v.size())));
  return v[std::clamp<size_t>(rank, 1, v.size()) - 1];
}

// Forwards to the plugin's MigDriver and remembers how long the last create and destroy took.
// Single-threaded, as this benchmark is.
class TimedMigDriver final : public MigDriver {
 public:
  explicit TimedMigDriver(MigDriver& inner) : inner_(inner) {}

  Result<MigModeState> GetMigMode(const std::string& gpu) override {
    return inner_.GetMigMode(gpu);
  }
  Status EnableMig(const std::string& gpu) override { return inner_.EnableMig(gpu); }
  Result<std::vector<MigProfileSpec>> MigProfiles(const std::string& gpu) override {
    return inner_.MigProfiles(gpu);
  }
  Result<CreatedMigDevice> CreateMigDevice(const std::string& gpu, uint32_t profile_id,
                                           device::MigPlacement placement) override {
    SteadyClock::time_point t0 = SteadyClock::now();
    Result<CreatedMigDevice> r = inner_.CreateMigDevice(gpu, profile_id, placement);
    last_create = SteadyClock::now() - t0;
    return r;
  }
  Status DestroyMigDevice(const std::string& gpu, uint32_t gi_id, uint32_t ci_id) override {
    SteadyClock::time_point t0 = SteadyClock::now();
    Status s = inner_.DestroyMigDevice(gpu, gi_id, ci_id);
    last_destroy = SteadyClock::now() - t0;
    return s;
  }

  SteadyClock::duration last_create{}, last_destroy{};

 private:
  MigDriver& inner_;
};

// The phases of one cycle, in ms.
struct Cycle {
  double allocate = 0, nvml_create = 0, container = 0, total = 0, destroy = 0, nvml_destroy = 0;
};

// What the benchmark needs around the plugin's code: the simulated node and the probe's
// environment.
struct Bench {
  std::string dir;
  std::vector<std::string> probe_env;  // the container's environment before the response's
  AllocationSettings settings;
  int pods = 0;  // pods made so far, for unique names and UIDs
};

// One cycle of `profile` at `placement` on `gpu`: Allocate, the container's first CUDA calls,
// the pod's instance reclaimed. `memory_mib`: the profile's memory as the driver gives it.
Result<Cycle> RunCycle(Bench& b, MigInstances& instances, TimedMigDriver& timed,
                       const std::string& gpu, const std::string& profile,
                       device::MigPlacement placement, uint64_t memory_mib) {
  const int n = b.pods++;
  PodView pod;
  pod.ns = "bench";
  pod.name = "mig-" + std::to_string(n);
  pod.uid = "00000000-0000-4000-8000-" + std::to_string(100000000000 + n);
  pod.containers = {{"main", {}}};
  device::ContainerDevice reserved;
  reserved.uuid = gpu;
  reserved.type = "NVIDIA";
  reserved.mem_mib = static_cast<int32_t>(memory_mib);
  reserved.cores = 100;
  pod.annotations[b.settings.to_allocate_key] =
      device::EncodePodSingleDevice(device::PodSingleDevice{device::ContainerDevices{reserved}});
  device::MigAllocation mig;
  mig.gpu_uuid = gpu;
  mig.profile = profile;
  mig.placement = placement;
  pod.annotations[std::string(device::kMigAllocationsAnnotation)] =
      device::EncodeMigAllocations({mig});
  const ReplicaMap replicas = {{ReplicaId(gpu, 0), gpu}};

  Cycle c;
  SteadyClock::time_point t0 = SteadyClock::now();
  Result<AllocationPlan> plan = PlanAllocation(pod, {{ReplicaId(gpu, 0)}}, replicas, b.settings,
                                               [] { return std::string("unused.cache"); });
  if (!plan.ok()) return plan.status();
  Result<std::string> annotation =
      RealiseMigReservations(pod, &plan->containers, b.settings, instances);
  if (!annotation.ok()) return annotation.status();
  SteadyClock::time_point allocated = SteadyClock::now();
  c.allocate = Ms(allocated - t0);
  c.nvml_create = Ms(timed.last_create);

  const ContainerAllocation& a = plan->containers.at(0);
  std::vector<std::string> env = b.probe_env;
  std::string response;  // the response's environment, for an error message
  for (const auto& [k, v] : a.envs) {
    SetEnv(env, k + "=" + v);
    response += " " + k + "=" + v;
  }
  ProcessResult probe = RunProcess({HAMI_PROBE, "info"}, env);
  SteadyClock::time_point seen = SteadyClock::now();
  c.container = Ms(seen - allocated);
  c.total = Ms(seen - t0);

  // The container saw exactly the instance: one device, its UUID, the profile's memory.
  const std::string mig_uuid = instances.Snapshot().at(0).device.uuid;
  std::map<std::string, std::string> kv = KeyValues(probe.out, "device");
  const std::string want = std::to_string(memory_mib * kMiB);
  const bool one_device = probe.out.find("device=1 ") == std::string::npos;
  if (probe.exit_code != 0 || !one_device || kv["device"] != "0" ||
      kv["uuid"].substr(std::min<size_t>(4, kv["uuid"].size())) != mig_uuid.substr(4) ||
      kv["total"] != want || kv["visible_total"] != want) {
    return InternalError("the container did not see " + mig_uuid + " with " + want +
                         " bytes (response:" + response + "); vgpu_probe exited " +
                         std::to_string(probe.exit_code) + ": " + probe.out + probe.err);
  }

  // The pod finished: the plugin's reclaim destroys its instance.
  SteadyClock::time_point d0 = SteadyClock::now();
  MigInstances::ReconcileResult r = instances.Reconcile({}, instances.Generation());
  c.destroy = Ms(SteadyClock::now() - d0);
  c.nvml_destroy = Ms(timed.last_destroy);
  if (r.destroyed != 1 || !instances.Snapshot().empty()) {
    return InternalError("reclaiming " + mig_uuid + " destroyed " +
                         std::to_string(r.destroyed) + " instance(s)");
  }
  return c;
}

const char* const kPhases[] = {
    "Allocate (plan + MIG device + state file)",
    "  of which NVML create (GI + CI)",
    "container: spawn to cuMemGetInfo report",
    "total: Allocate to a usable instance",
    "destroy (reclaim of the finished pod)",
    "  of which NVML destroy (CI + GI)",
};

std::vector<double> Column(const std::vector<Cycle>& cycles, int phase) {
  std::vector<double> out;
  for (const Cycle& c : cycles) {
    const double v[] = {c.allocate, c.nvml_create, c.container, c.total, c.destroy,
                        c.nvml_destroy};
    out.push_back(v[phase]);
  }
  return out;
}

// The GPU instance profile named `name` on `gpu`, as the driver lists it.
std::optional<MigProfileSpec> FindProfile(const std::vector<MigProfileSpec>& specs,
                                          const std::string& name) {
  for (const MigProfileSpec& p : specs) {
    if (p.name == name) return p;
  }
  return std::nullopt;
}

std::vector<std::string> SplitComma(const std::string& s) {
  std::vector<std::string> out;
  size_t from = 0;
  while (from <= s.size()) {
    size_t comma = std::min(s.find(',', from), s.size());
    if (comma > from) out.push_back(s.substr(from, comma - from));
    from = comma + 1;
  }
  return out;
}

}  // namespace

int main(int argc, char** argv) {
  int iterations = 50;
  int warmup = 3;
  std::string gpus = "a100,h100";
  std::string profiles = "1g.10gb,3g.40gb,7g.80gb";
  std::string state_dir;
  bool cdi = false;
  CLI::App app{"mig_allocate_bench: time from Allocate to a usable MIG instance (simulated)"};
  app.name("mig_allocate_bench");
  app.add_option("--iterations", iterations, "counted cycles per profile")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  app.add_option("--warmup", warmup, "uncounted cycles per profile first")
      ->check(CLI::NonNegativeNumber)
      ->capture_default_str();
  app.add_option("--gpu", gpus, "GPUs to run on: a100, h100 (comma-separated)")
      ->capture_default_str();
  app.add_option("--profiles", profiles, "MIG profiles, by the driver's names")
      ->capture_default_str();
  app.add_option("--state-dir", state_dir,
                 "directory of the plugin's MIG state file (default: the temporary one)")
      ->check(CLI::ExistingDirectory);
  app.add_flag("--cdi", cdi, "also write a CDI spec per MIG device, as a CDI node does");
  if (std::optional<int> exit = ParseGoStyleFlags(app, argc, argv)) return *exit;
  log::SetSink([](log::Level l, std::string_view line) {
    if (l != log::Level::kInfo) std::fprintf(stderr, "%.*s\n", int(line.size()), line.data());
  });

  // The simulated node's files: under $TMPDIR (default /tmp).
  std::string tmpl = (std::filesystem::temp_directory_path() / "mig-bench-XXXXXX").string();
  Bench b;
  if (mkdtemp(tmpl.data()) == nullptr) {
    std::perror(("mkdtemp " + tmpl).c_str());
    return 1;
  }
  b.dir = tmpl;
  const std::string config = b.dir + "/gpu.conf", state = b.dir + "/gpu-state";
  std::ofstream(config) << "[device]\nname = NVIDIA A100-SXM4-80GB\nmemory = 80Gi\n"
                           "sm_count = 108\ncompute_capability = 8.0\n"
                           "[device]\nname = NVIDIA H100 80GB HBM3\nmemory = 80Gi\n"
                           "sm_count = 132\ncompute_capability = 9.0\n";
  // The plugin sees every GPU; the variables of a container around this process must not limit
  // it.
  setenv("HAMI_SIM_CONFIG", config.c_str(), 1);
  setenv("HAMI_SIM_STATE", state.c_str(), 1);
  unsetenv("NVIDIA_VISIBLE_DEVICES");
  unsetenv("CUDA_VISIBLE_DEVICES");
  b.probe_env = {"PATH=/usr/bin:/bin", std::string("LD_LIBRARY_PATH=") + HAMI_SIM_DIR,
                 "HAMI_SIM_CONFIG=" + config, "HAMI_SIM_STATE=" + state};
  b.settings.operating_mode = device::OperatingMode::kMig;
  b.settings.hook_path = b.dir + "/hook";

  NvmlDriverOptions nvml;
  nvml.library = std::string(HAMI_SIM_DIR) + "/libnvidia-ml.so.1";
  Result<std::unique_ptr<NvmlDriver>> driver = NvmlDriver::Open(nvml);
  Result<Inventory> inventory = driver.ok() ? (*driver)->Discover() : driver.status();
  if (!inventory.ok()) {
    std::fprintf(stderr, "simulated NVML: %s\n", inventory.status().ToString().c_str());
    return 1;
  }
  TimedMigDriver timed(**driver);

  // The process start under the container phase: vgpu_probe that loads no driver.
  std::vector<double> floor;
  for (int i = 0; i < iterations; ++i) {
    SteadyClock::time_point t0 = SteadyClock::now();
    ProcessResult r = RunProcess({HAMI_PROBE, "help"}, b.probe_env);
    floor.push_back(Ms(SteadyClock::now() - t0));
    if (r.exit_code != 0) {
      std::fprintf(stderr, "vgpu_probe help exited %d: %s\n", r.exit_code, r.err.c_str());
      return 1;
    }
  }
  std::printf("process start floor (vgpu_probe help, no driver loaded): n=%d  median %.2f ms  "
              "p95 %.2f ms\n\n",
              iterations, Percentile(floor, 0.5), Percentile(floor, 0.95));

  const std::vector<std::string> wanted = SplitComma(profiles);
  for (const std::string& which : SplitComma(gpus)) {
    const std::string model = which == "a100" ? "A100" : which == "h100" ? "H100" : "";
    const GpuInfo* gpu = nullptr;
    for (const GpuInfo& g : inventory->gpus) {
      if (!model.empty() && g.name.find(model) != std::string::npos) gpu = &g;
    }
    if (gpu == nullptr) {
      std::fprintf(stderr, "--gpu %s: expected a100 or h100\n", which.c_str());
      return 1;
    }
    if (Status s = timed.EnableMig(gpu->uuid); !s.ok()) {
      std::fprintf(stderr, "%s\n", s.ToString().c_str());
      return 1;
    }
    Result<std::vector<MigProfileSpec>> specs = timed.MigProfiles(gpu->uuid);
    if (!specs.ok()) {
      std::fprintf(stderr, "%s\n", specs.status().ToString().c_str());
      return 1;
    }
    std::vector<MigProfileSpec> run;
    for (const std::string& name : wanted) {
      std::optional<MigProfileSpec> p = FindProfile(*specs, name);
      if (!p || p->placements.empty()) {
        std::fprintf(stderr, "%s has no MIG profile %s\n", gpu->name.c_str(), name.c_str());
        return 1;
      }
      run.push_back(*p);
    }
    // One MigInstances per GPU, as a fresh plugin: its first Allocate reads the profile table.
    const std::string state_file =
        (state_dir.empty() ? b.dir : state_dir) + "/mig-bench-instances-" + which + ".json";
    MigInstances instances(timed, state_file);
    std::unique_ptr<MigCdiSpecs> specs_of_devices;
    if (cdi) {
      MigCdiOptions o;
      o.spec_dir = b.dir + "/cdi-" + which;
      o.toolkit_specs = {};
      o.mig_minors = b.dir + "/no-mig-minors";
      specs_of_devices = std::make_unique<MigCdiSpecs>(**driver, o);
      instances.SetChangeListener([&specs_of_devices](const std::vector<MigInstance>& held) {
        (void)specs_of_devices->Sync(held);
      });
    }
    std::vector<std::vector<Cycle>> cycles(run.size());
    std::optional<Cycle> first;
    for (int i = -warmup; i < iterations; ++i) {
      for (size_t k = 0; k < run.size(); ++k) {
        // The first placement the driver lists: 0 for every profile here.
        Result<Cycle> c = RunCycle(b, instances, timed, gpu->uuid, run[k].name,
                                   run[k].placements.front(), run[k].memory_mib);
        if (!c.ok()) {
          std::fprintf(stderr, "%s %s: %s\n", gpu->name.c_str(), run[k].name.c_str(),
                       c.status().ToString().c_str());
          return 1;
        }
        if (!first) first = *c;
        if (i >= 0) cycles[k].push_back(*c);
      }
    }
    std::printf("%s: %d cycles per profile (after %d uncounted), median / p95 in ms\n",
                gpu->name.c_str(), iterations, warmup);
    std::printf("| phase |");
    for (const MigProfileSpec& p : run) std::printf(" %s |", p.name.c_str());
    std::printf("\n|---|");
    for (size_t k = 0; k < run.size(); ++k) std::printf("---|");
    std::printf("\n");
    for (int phase = 0; phase < 6; ++phase) {
      std::printf("| %s |", kPhases[phase]);
      for (const std::vector<Cycle>& col : cycles) {
        std::vector<double> v = Column(col, phase);
        std::printf(" %.2f / %.2f |", Percentile(v, 0.5), Percentile(v, 0.95));
      }
      std::printf("\n");
    }
    std::printf("first Allocate on the GPU (%s, reads the profile table): %.2f ms, NVML create "
                "%.2f ms\n\n",
                run.front().name.c_str(), first->allocate, first->nvml_create);
    std::filesystem::remove(state_file);
  }
  std::filesystem::remove_all(b.dir);
  return 0;
}
