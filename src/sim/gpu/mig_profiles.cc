#include "sim/gpu/mig_profiles.h"

#include "nvml/abi.h"

namespace hami::sim {
namespace {

constexpr uint32_t kStarts0To6 = 0x7F;  // {0,1,...,6}
constexpr uint32_t kStartsEven4 = 0x55;  // {0,2,4,6}
constexpr uint32_t kStartsEven3 = 0x15;  // {0,2,4}
constexpr uint32_t kStarts0And4 = 0x11;  // {0,4}
constexpr uint32_t kStart0 = 0x01;

// Columns: enum, id, name, compute slices, memory slices, instances, SMs, MiB,
// copy engines, decoders, encoders, JPEG, OFA, placement starts.
constexpr MigGiProfile kA100_40[] = {
    {NVML_GPU_INSTANCE_PROFILE_1_SLICE, 19, "1g.5gb", 1, 1, 7, 14, 4864, 1, 0, 0, 0, 0,
     kStarts0To6},
    {NVML_GPU_INSTANCE_PROFILE_1_SLICE_REV1, 20, "1g.5gb+me", 1, 1, 1, 14, 4864, 1, 1, 0, 1, 1,
     kStarts0To6},
    {NVML_GPU_INSTANCE_PROFILE_1_SLICE_REV2, 15, "1g.10gb", 1, 2, 4, 14, 9984, 1, 1, 0, 0, 0,
     kStartsEven4},
    {NVML_GPU_INSTANCE_PROFILE_2_SLICE, 14, "2g.10gb", 2, 2, 3, 28, 9984, 2, 1, 0, 0, 0,
     kStartsEven3},
    {NVML_GPU_INSTANCE_PROFILE_3_SLICE, 9, "3g.20gb", 3, 4, 2, 42, 20096, 3, 2, 0, 0, 0,
     kStarts0And4},
    {NVML_GPU_INSTANCE_PROFILE_4_SLICE, 5, "4g.20gb", 4, 4, 1, 56, 20096, 4, 2, 0, 0, 0, kStart0},
    {NVML_GPU_INSTANCE_PROFILE_7_SLICE, 0, "7g.40gb", 7, 8, 1, 98, 40448, 7, 5, 0, 1, 1, kStart0},
};

constexpr MigGiProfile kA100_80[] = {
    {NVML_GPU_INSTANCE_PROFILE_1_SLICE, 19, "1g.10gb", 1, 1, 7, 14, 9728, 1, 0, 0, 0, 0,
     kStarts0To6},
    {NVML_GPU_INSTANCE_PROFILE_1_SLICE_REV1, 20, "1g.10gb+me", 1, 1, 1, 14, 9728, 1, 1, 0, 1, 1,
     kStarts0To6},
    {NVML_GPU_INSTANCE_PROFILE_1_SLICE_REV2, 15, "1g.20gb", 1, 2, 4, 14, 19968, 1, 1, 0, 0, 0,
     kStartsEven4},
    {NVML_GPU_INSTANCE_PROFILE_2_SLICE, 14, "2g.20gb", 2, 2, 3, 28, 19968, 2, 1, 0, 0, 0,
     kStartsEven3},
    {NVML_GPU_INSTANCE_PROFILE_3_SLICE, 9, "3g.40gb", 3, 4, 2, 42, 40192, 3, 2, 0, 0, 0,
     kStarts0And4},
    {NVML_GPU_INSTANCE_PROFILE_4_SLICE, 5, "4g.40gb", 4, 4, 1, 56, 40192, 4, 2, 0, 0, 0, kStart0},
    {NVML_GPU_INSTANCE_PROFILE_7_SLICE, 0, "7g.80gb", 7, 8, 1, 98, 80384, 7, 5, 0, 1, 1, kStart0},
};

constexpr MigGiProfile kH100_80[] = {
    {NVML_GPU_INSTANCE_PROFILE_1_SLICE, 19, "1g.10gb", 1, 1, 7, 16, 9984, 1, 1, 0, 1, 0,
     kStarts0To6},
    {NVML_GPU_INSTANCE_PROFILE_1_SLICE_REV1, 20, "1g.10gb+me", 1, 1, 1, 16, 9984, 1, 1, 0, 1, 1,
     kStarts0To6},
    {NVML_GPU_INSTANCE_PROFILE_1_SLICE_REV2, 15, "1g.20gb", 1, 2, 4, 26, 20096, 1, 1, 0, 1, 0,
     kStartsEven4},
    {NVML_GPU_INSTANCE_PROFILE_2_SLICE, 14, "2g.20gb", 2, 2, 3, 32, 20096, 2, 2, 0, 2, 0,
     kStartsEven3},
    {NVML_GPU_INSTANCE_PROFILE_3_SLICE, 9, "3g.40gb", 3, 4, 2, 60, 40448, 3, 3, 0, 3, 0,
     kStarts0And4},
    {NVML_GPU_INSTANCE_PROFILE_4_SLICE, 5, "4g.40gb", 4, 4, 1, 64, 40448, 4, 4, 0, 4, 0, kStart0},
    {NVML_GPU_INSTANCE_PROFILE_7_SLICE, 0, "7g.80gb", 7, 8, 1, 132, 81152, 8, 7, 0, 7, 1, kStart0},
};

constexpr MigModel kModels[] = {
    {"A100-40GB", kA100_40, sizeof(kA100_40) / sizeof(kA100_40[0])},
    {"A100-80GB", kA100_80, sizeof(kA100_80) / sizeof(kA100_80[0])},
    {"H100-80GB", kH100_80, sizeof(kH100_80) / sizeof(kH100_80[0])},
};

constexpr uint64_t kGiB = 1ull << 30;

// Slice count of each NVML_COMPUTE_INSTANCE_PROFILE_* enum; 0 = not offered by the sim
// (REV1 and the 6/8-slice profiles belong to other GPU families).
constexpr uint32_t kCiEnumSlices[kMigCiProfileEnumCount] = {1, 2, 3, 4, 7, 0, 0, 0};

uint32_t RoundUpPow2(uint32_t v) {
  uint32_t p = 1;
  while (p < v) p <<= 1;
  return p;
}

bool GiOffersCiSlices(uint32_t gi_slices, uint32_t ci_slices) {
  if (ci_slices == gi_slices) return true;
  if (ci_slices > gi_slices) return false;
  if (ci_slices <= 2) return true;
  return gi_slices == kMigComputeSlices;  // 3 and 4 slices inside a full-GPU GI
}

}  // namespace

const MigModel* MigModelFor(const std::string& device_name, uint64_t memory_bytes) {
  if (device_name.find("A100") != std::string::npos) {
    return memory_bytes <= 48 * kGiB ? &kModels[0] : &kModels[1];
  }
  if (device_name.find("H100") != std::string::npos && memory_bytes <= 88 * kGiB) {
    return &kModels[2];
  }
  return nullptr;
}

const MigGiProfile* MigGiProfileByEnum(const MigModel& model, uint32_t profile_enum) {
  for (int i = 0; i < model.profile_count; ++i) {
    if (model.profiles[i].profile_enum == profile_enum) return &model.profiles[i];
  }
  return nullptr;
}

const MigGiProfile* MigGiProfileById(const MigModel& model, uint32_t id) {
  for (int i = 0; i < model.profile_count; ++i) {
    if (model.profiles[i].id == id) return &model.profiles[i];
  }
  return nullptr;
}

std::vector<uint32_t> MigGiPlacementStarts(const MigGiProfile& profile) {
  std::vector<uint32_t> starts;
  for (uint32_t s = 0; s < kMigMemorySlices; ++s) {
    if (profile.placement_starts & (1u << s)) starts.push_back(s);
  }
  return starts;
}

uint32_t MigGiId(uint32_t start, uint32_t size) {
  return (kMigMemorySlices / size - 1) + start / size;
}

bool MigCiProfileFor(const MigModel& model, const MigGiProfile& gi, uint32_t ci_enum,
                     MigCiProfile* out) {
  if (ci_enum >= kMigCiProfileEnumCount) return false;
  const uint32_t k = kCiEnumSlices[ci_enum];
  if (k == 0 || !GiOffersCiSlices(gi.compute_slices, k)) return false;
  MigCiProfile p;
  p.id = ci_enum;
  p.slices = k;
  if (k == gi.compute_slices) {
    p.sm_count = gi.sm_count;
    p.name = gi.name;
  } else {
    // A partial CI has the SMs of the base GI profile of the same slice count.
    p.sm_count = 0;
    for (int i = 0; i < model.profile_count; ++i) {
      const MigGiProfile& base = model.profiles[i];
      if (base.compute_slices == k && base.profile_enum <= NVML_GPU_INSTANCE_PROFILE_7_SLICE) {
        p.sm_count = base.sm_count;
      }
    }
    p.name = std::to_string(k) + "c." + gi.name;
  }
  const uint32_t align = RoundUpPow2(k);
  for (uint32_t s = 0; s + k <= gi.compute_slices; s += align) p.starts.push_back(s);
  p.instance_count = static_cast<uint32_t>(p.starts.size());
  *out = p;
  return true;
}

}  // namespace hami::sim
