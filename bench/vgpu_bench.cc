// vgpu_bench: measures what libvgpu.so adds on top of the same program on the simulated driver,
// in one run, as differences and ratios against the baseline without the library:
//   1. cost per cuLaunchKernel: no SM limit; a limit engaged but not throttling;
//   2. cost per cuMemAlloc + cuMemFree pair under a memory limit;
//   3. start-up latency of the first CUDA call with 1, 16 and 64 processes starting together on
//      one region;
//   4. SM-limit accuracy for limits 10/30/50/70/90 on a saturating workload.
// Configurations are interleaved and repeated; medians are reported. Prints a Markdown report.
//
// Usage: vgpu_bench [--quick] [--only launch,alloc,startup,accuracy]
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "common/go_flags.h"
#include "common/subprocess.h"
#include "vgpu/region.h"

namespace {

using hami::KeyValues;
using hami::ProcessResult;
using hami::RunProcess;
using hami::Subprocess;

std::string g_dir;
bool g_quick = false;

double Median(std::vector<double> v) {
  if (v.empty()) return -1;
  std::sort(v.begin(), v.end());
  size_t n = v.size();
  return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

double Percentile(std::vector<double> v, double p) {
  if (v.empty()) return -1;
  std::sort(v.begin(), v.end());
  size_t i = static_cast<size_t>(p * (v.size() - 1) + 0.5);
  return v[std::min(i, v.size() - 1)];
}

std::vector<std::string> Env(bool preload, const std::string& region,
                             const std::vector<std::string>& extra = {}) {
  std::vector<std::string> env = {
      "PATH=/usr/bin:/bin",
      std::string("LD_LIBRARY_PATH=") + HAMI_SIM_DIR,
      "HAMI_SIM_STATE=" + g_dir + "/sim-state",
      "CUDA_DEVICE_MEMORY_SHARED_CACHE=" + g_dir + "/" + region,
      "LIBCUDA_LOG_LEVEL=0",
  };
  if (preload) env.push_back(std::string("LD_PRELOAD=") + HAMI_LIBVGPU);
  env.insert(env.end(), extra.begin(), extra.end());
  return env;
}

double RunValue(const std::vector<std::string>& args, const std::vector<std::string>& env,
                const char* key) {
  std::vector<std::string> argv = {HAMI_PROBE};
  argv.insert(argv.end(), args.begin(), args.end());
  ProcessResult r = RunProcess(argv, env);
  auto kv = KeyValues(r.out, key);
  if (r.exit_code != 0 || kv.count(key) == 0) {
    fprintf(stderr, "probe %s failed (exit %d): %s%s\n", args[0].c_str(), r.exit_code,
            r.out.c_str(), r.err.c_str());
    exit(1);
  }
  return strtod(kv[key].c_str(), nullptr);
}

// Creates a region whose device 0 has an SM limit and a calibrated but negligible cost, so the
// launch gate runs its whole path (device lookup, counters, GCRA) without ever waiting.
void PrepareEngagedRegion(const std::string& name) {
  hami::vgpu::RegionInit init;
  for (int i = 0; i < hami::vgpu::kMaxDevices; ++i) init.sm_limit[i] = 50;
  char err[256] = {};
  std::string path = g_dir + "/" + name;
  hami::vgpu::Region* r = hami::vgpu::Region::Open(path.c_str(), init, err, sizeof(err));
  if (r == nullptr) {
    fprintf(stderr, "cannot create %s: %s\n", path.c_str(), err);
    exit(1);
  }
  r->header()->devices[0].ns_per_unit_q16.store(1);
  hami::vgpu::Region::Free(r);
}

void BenchLaunch() {
  const std::string count = g_quick ? "300000" : "2000000";
  const int reps = g_quick ? 3 : 7;
  PrepareEngagedRegion("engaged");
  std::vector<double> base, lib, engaged;
  for (int i = 0; i < reps; ++i) {
    base.push_back(
        RunValue({"launch-loop", "--count", count}, Env(false, "base"), "ns_per_launch"));
    lib.push_back(
        RunValue({"launch-loop", "--count", count}, Env(true, "nolimit"), "ns_per_launch"));
    engaged.push_back(RunValue({"launch-loop", "--count", count},
                               Env(true, "engaged", {"GPU_CORE_UTILIZATION_POLICY=force"}),
                               "ns_per_launch"));
  }
  double b = Median(base), l = Median(lib), e = Median(engaged);
  printf("## cuLaunchKernel (zero-time kernel, %s launches x %d runs, medians)\n\n", count.c_str(),
         reps);
  printf("| configuration | ns per launch | added ns | ratio | goal |\n|---|---|---|---|---|\n");
  printf("| simulated driver alone | %.1f | - | 1.00 | |\n", b);
  printf("| + libvgpu, no SM limit | %.1f | %.1f | %.2f | added <= 25 ns |\n", l, l - b, l / b);
  printf(
      "| + libvgpu, SM limit engaged, not throttling | %.1f | %.1f | %.2f | added <= 80 ns |\n\n",
      e, e - b, e / b);
}

void BenchAlloc() {
  const std::string count = g_quick ? "50000" : "300000";
  const int reps = g_quick ? 3 : 7;
  std::vector<double> base, lib;
  for (int i = 0; i < reps; ++i) {
    base.push_back(RunValue({"alloc-loop", "--count", count, "--bytes", "1Mi"}, Env(false, "abase"),
                            "ns_per_pair"));
    lib.push_back(RunValue({"alloc-loop", "--count", count, "--bytes", "1Mi"},
                           Env(true, "alib", {"CUDA_DEVICE_MEMORY_LIMIT=70Gi"}), "ns_per_pair"));
  }
  double b = Median(base), l = Median(lib);
  printf("## cuMemAlloc + cuMemFree pair (1 MiB, under a 70 GiB limit, %s pairs x %d runs)\n\n",
         count.c_str(), reps);
  printf("| configuration | ns per pair | added ns | ratio | goal |\n|---|---|---|---|---|\n");
  printf("| simulated driver alone | %.1f | - | 1.00 | |\n", b);
  printf("| + libvgpu | %.1f | %.1f | %.2f | added <= 300 ns |\n\n", l, l - b, l / b);
}

// Starts `n` probes that wait on a shared barrier and then time their first driver call.
std::vector<double> StartTogether(int n, bool preload, const std::string& region) {
  std::string sync = g_dir + "/sync-" + region;
  FILE* f = fopen(sync.c_str(), "w");
  if (f == nullptr || ftruncate(fileno(f), 4096) != 0) exit(1);
  fclose(f);
  std::vector<std::unique_ptr<Subprocess>> procs;
  for (int i = 0; i < n; ++i) {
    procs.push_back(
        std::make_unique<Subprocess>(std::vector<std::string>{HAMI_PROBE, "startup", "--sync", sync,
                                                              "--procs", std::to_string(n)},
                                     Env(preload, region, {"CUDA_DEVICE_MEMORY_LIMIT=8Gi"})));
  }
  std::vector<double> ms;
  for (auto& p : procs) {
    ProcessResult r = p->Wait();
    auto kv = KeyValues(r.out, "first_call_ns");
    if (r.exit_code != 0 || kv.empty()) {
      fprintf(stderr, "startup probe failed: %s%s\n", r.out.c_str(), r.err.c_str());
      exit(1);
    }
    ms.push_back(strtod(kv["first_call_ns"].c_str(), nullptr) / 1e6);
  }
  unlink(sync.c_str());
  return ms;
}

void BenchStartup() {
  printf(
      "## Start-up: first CUDA call (cuInit) with N processes starting together on one "
      "region\n\n");
  printf(
      "| N | driver alone: median / p90 / max ms | + libvgpu: median / p90 / max ms | added "
      "median ms | goal |\n|---|---|---|---|---|\n");
  const int reps = g_quick ? 1 : 3;
  for (int n : {1, 16, 64}) {
    std::vector<double> base, lib;
    for (int rep = 0; rep < reps; ++rep) {
      std::string tag = std::to_string(n) + "-" + std::to_string(rep);
      auto b = StartTogether(n, false, "sbase-" + tag);
      auto l = StartTogether(n, true, "slib-" + tag);
      base.insert(base.end(), b.begin(), b.end());
      lib.insert(lib.end(), l.begin(), l.end());
    }
    printf("| %d | %.3f / %.3f / %.3f | %.3f / %.3f / %.3f | %.3f | %s |\n", n, Median(base),
           Percentile(base, 0.9), Percentile(base, 1.0), Median(lib), Percentile(lib, 0.9),
           Percentile(lib, 1.0), Median(lib) - Median(base), n == 64 ? "median <= 1 ms at 64" : "");
  }
  printf("\n");
}

void BenchAccuracy() {
  const std::string warm = g_quick ? "1500" : "2500", dur = g_quick ? "1500" : "4000";
  printf(
      "## SM-limit accuracy (108 blocks x 1 ms per launch, saturating; warm-up %s ms, "
      "measured %s ms through NVML)\n\n",
      warm.c_str(), dur.c_str());
  printf("| limit %% | measured %% | error (points) | goal |\n|---|---|---|---|\n");
  double unlimited =
      RunValue({"spin", "--blocks", "108", "--block-ns", "1000000", "--warmup-ms", "500",
                "--duration-ms", "1000"},
               Env(true, "acc-none", {"GPU_CORE_UTILIZATION_POLICY=force"}), "sm_util");
  printf("| none | %.1f | - | |\n", unlimited);
  for (int limit : {10, 30, 50, 70, 90}) {
    double util = RunValue(
        {"spin", "--blocks", "108", "--block-ns", "1000000", "--warmup-ms", warm, "--duration-ms",
         dur},
        Env(true, "acc-" + std::to_string(limit),
            {"CUDA_DEVICE_SM_LIMIT=" + std::to_string(limit), "GPU_CORE_UTILIZATION_POLICY=force"}),
        "sm_util");
    printf("| %d | %.1f | %+.1f | within 3 |\n", limit, util, util - limit);
  }
  printf("\n");
}

}  // namespace

int main(int argc, char** argv) {
  std::string only = "launch,alloc,startup,accuracy";
  CLI::App app{
      "vgpu_bench: libvgpu's costs on the simulated GPU (launch and allocation overhead, "
      "start-up time, SM limit accuracy)"};
  app.name("vgpu_bench");
  app.add_flag("--quick", g_quick, "fewer rounds (a smoke run)");
  app.add_option("--only", only, "comma-separated parts to run: launch, alloc, startup, accuracy")
      ->capture_default_str();
  if (std::optional<int> exit = hami::ParseGoStyleFlags(app, argc, argv)) return *exit;
  char tmpl[] = "/tmp/hami-vgpu-bench-XXXXXX";
  if (mkdtemp(tmpl) == nullptr) return 1;
  g_dir = tmpl;
  printf("# libvgpu benchmarks (simulated GPU, %ld CPUs)\n\n", sysconf(_SC_NPROCESSORS_ONLN));
  if (only.find("launch") != std::string::npos) BenchLaunch();
  if (only.find("alloc") != std::string::npos) BenchAlloc();
  if (only.find("startup") != std::string::npos) BenchStartup();
  if (only.find("accuracy") != std::string::npos) BenchAccuracy();
  std::string cmd = "rm -rf '" + g_dir + "'";
  return system(cmd.c_str()) == 0 ? 0 : 1;
}
