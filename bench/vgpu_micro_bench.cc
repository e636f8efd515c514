// Microbenchmarks of libvgpu's in-process building blocks (Google Benchmark): the region's
// charge/uncharge critical section, the allocation table, and the launch gate's GCRA step.
#include <benchmark/benchmark.h>
#include <stdlib.h>
#include <unistd.h>

#include <string>

#include "vgpu/alloc_table.h"
#include "vgpu/limiter.h"
#include "vgpu/region.h"

namespace {

using namespace hami::vgpu;  // NOLINT

void BM_RegionReserveUnreserve(benchmark::State& state) {
  char tmpl[] = "/tmp/hami-micro-XXXXXX";
  std::string dir = mkdtemp(tmpl);
  std::string path = dir + "/region";
  RegionInit init;
  init.mem_limit[0] = 1ULL << 40;
  char err[256];
  Region* r = Region::Open(path.c_str(), init, err, sizeof(err));
  int slot = r->RegisterSelf();
  for (auto _ : state) {
    benchmark::DoNotOptimize(r->Reserve(slot, 0, 1 << 20, MemKind::kData));
    r->Unreserve(slot, 0, 1 << 20, MemKind::kData);
  }
  r->ReleaseSlot(slot);
  Region::Free(r);
  unlink(path.c_str());
  rmdir(dir.c_str());
}
BENCHMARK(BM_RegionReserveUnreserve);

void BM_AllocTableInsertRemove(benchmark::State& state) {
  static AllocTable table;
  // A realistic population: a few thousand live allocations.
  for (uint64_t i = 0; i < 4096; ++i) {
    table.Insert(KeySpace::kPointer, (i + 1) << 21, 0, MemKind::kData, 1);
  }
  uint64_t key = 1ULL << 40;
  for (auto _ : state) {
    table.Insert(KeySpace::kPointer, key, 0, MemKind::kData, 1 << 20);
    AllocRecord rec;
    benchmark::DoNotOptimize(table.Remove(KeySpace::kPointer, key, &rec));
    key += 1 << 21;
  }
}
BENCHMARK(BM_AllocTableInsertRemove);

void BM_GcraAdmitNotThrottling(benchmark::State& state) {
  std::atomic<int64_t> tat{0};
  int64_t now = 1'000'000'000;
  for (auto _ : state) {
    benchmark::DoNotOptimize(GcraAdmit(tat, now, 1, 10'000'000));
    ++now;
  }
}
BENCHMARK(BM_GcraAdmitNotThrottling);

}  // namespace

BENCHMARK_MAIN();
