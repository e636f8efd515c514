#include "device/volcano_mig.h"

#include <gtest/gtest.h>

#include "device/config.h"

namespace hami::device {
namespace {

MigProfile Profile(const std::string& name, uint32_t size, std::vector<uint32_t> starts) {
  MigProfile p;
  p.name = name;
  p.slice_count = size;
  for (uint32_t s : starts) p.placements.push_back({s, size});
  return p;
}

// An A100-SXM4-80GB's profiles as its driver lists them (placements in memory slices).
std::vector<MigProfile> A100_80() {
  return {Profile("1g.10gb", 1, {0, 1, 2, 3, 4, 5, 6}), Profile("1g.20gb", 2, {0, 2, 4, 6}),
          Profile("2g.20gb", 2, {0, 2, 4}),             Profile("3g.40gb", 4, {0, 4}),
          Profile("4g.40gb", 4, {0}),                   Profile("7g.80gb", 8, {0})};
}

// Volcano's shipped geometries for the A100-80GB.
KnownMigGeometry A100_80Geometry() {
  return {.models = {"A100-SXM4-80GB", "A100-80GB-PCIe", "A100-PCIE-80GB"},
          .groups = {{"group1", {{"1g.10gb", 9728, 7}}},
                     {"group2", {{"2g.20gb", 19968, 3}, {"1g.10gb", 9728, 1}}},
                     {"group3", {{"3g.40gb", 40192, 2}}},
                     {"group4", {{"7g.80gb", 80896, 1}}}}};
}

TEST(VolcanoMigId, ReadsAndWritesTheSchedulersForm) {
  Result<VolcanoMigId> id = ParseVolcanoMigId("GPU-0fc3a1b2-0000-4000-8000-000000000001[group2-3]");
  ASSERT_TRUE(id.ok()) << id.status().ToString();
  EXPECT_EQ(id->gpu_uuid, "GPU-0fc3a1b2-0000-4000-8000-000000000001");
  EXPECT_EQ(id->group, "group2");
  EXPECT_EQ(id->position, 3u);
  EXPECT_EQ(FormatVolcanoMigId(*id), "GPU-0fc3a1b2-0000-4000-8000-000000000001[group2-3]");
  EXPECT_TRUE(IsVolcanoMigId("GPU-a[g-0]"));
  EXPECT_FALSE(IsVolcanoMigId("GPU-a"));
}

TEST(VolcanoMigId, RefusesWhatIsNotOneWithTheReason) {
  for (auto [text, why] : std::vector<std::pair<const char*, const char*>>{
           {"[group1-0]", "no GPU UUID"},
           {"GPU-a[group1-0]x", "must end at its ']'"},
           {"GPU-a[group1-0", "must end at its ']'"},
           {"GPU-a[group1-0]]", "must end at its ']'"},
           {"GPU-a[group1]", "no group before '-'"},
           {"GPU-a[-1]", "no group before '-'"},
           {"GPU-a[group1-]", "is not a non-negative integer"},
           {"GPU-a[group1--1]", "is not a non-negative integer"},
           {"GPU-a[group1-1x]", "is not a non-negative integer"},
           {"GPU-a[group1-99999999999]", "is not a non-negative integer"},
       }) {
    Result<VolcanoMigId> id = ParseVolcanoMigId(text);
    ASSERT_FALSE(id.ok()) << text;
    EXPECT_EQ(id.status().code(), StatusCode::kInvalidArgument);
    EXPECT_NE(id.status().message().find(why), std::string::npos) << id.status().message();
  }
}

TEST(VolcanoMigGeometry, TheFirstEntryWithAModelInTheNameWins) {
  std::vector<KnownMigGeometry> known = {
      {.models = {"A30"}, .groups = {{"group1", {{"1g.6gb", 6144, 4}}}}}, A100_80Geometry(),
      {.models = {"A100"}, .groups = {{"any", {{"7g.80gb", 80896, 1}}}}}};
  EXPECT_EQ(FindMigGeometry(known, "NVIDIA A100-SXM4-80GB"), &known[1]);
  EXPECT_EQ(FindMigGeometry(known, "NVIDIA A100-SXM4-40GB"), &known[2]);
  EXPECT_EQ(FindMigGeometry(known, "NVIDIA A30"), &known[0]);
  EXPECT_EQ(FindMigGeometry(known, "Tesla T4"), nullptr);
  EXPECT_EQ(FindMigGeometry({}, "NVIDIA A30"), nullptr);
}

// Positions follow the listed order; larger instances are placed first, each at the lowest free
// start: group2's three 2g.20gb slots take 0, 2, 4 and its 1g.10gb slot (position 3) takes 6.
TEST(VolcanoMigLayout, ShippedA100GroupsLayOutWithoutOverlap) {
  KnownMigGeometry g = A100_80Geometry();
  Result<std::vector<MigSlot>> group2 = LayoutMigGroup(g.groups[1], A100_80());
  ASSERT_TRUE(group2.ok()) << group2.status().ToString();
  ASSERT_EQ(group2->size(), 4u);
  EXPECT_EQ((*group2)[0], (MigSlot{"2g.20gb", 19968, {0, 2}}));
  EXPECT_EQ((*group2)[1], (MigSlot{"2g.20gb", 19968, {2, 2}}));
  EXPECT_EQ((*group2)[2], (MigSlot{"2g.20gb", 19968, {4, 2}}));
  EXPECT_EQ((*group2)[3], (MigSlot{"1g.10gb", 9728, {6, 1}}));
  for (const MigGeometryGroup& group : g.groups) {
    Result<std::vector<MigSlot>> slots = LayoutMigGroup(group, A100_80());
    ASSERT_TRUE(slots.ok()) << group.group << ": " << slots.status().ToString();
    size_t want = 0;
    for (const MigGeometryInstance& i : group.instances) want += static_cast<size_t>(i.count);
    ASSERT_EQ(slots->size(), want) << group.group;
    for (size_t a = 0; a < slots->size(); ++a) {
      for (size_t b = a + 1; b < slots->size(); ++b) {
        EXPECT_FALSE((*slots)[a].placement.Overlaps((*slots)[b].placement))
            << group.group << " slots " << a << " and " << b;
      }
    }
    EXPECT_EQ(*slots, *LayoutMigGroup(group, A100_80())) << "the same layout every time";
  }
  EXPECT_EQ((*LayoutMigGroup(g.groups[2], A100_80()))[1].placement, (MigPlacement{4, 4}));
}

// A 3g.40gb listed before a 4g.40gb: the greedy choice (3g at 0) leaves the 4g, which can only
// start at 0, no room; the search moves the 3g to 4.
TEST(VolcanoMigLayout, SearchesWhenTheGreedyChoiceBlocksALaterSlot) {
  MigGeometryGroup g{"mixed", {{"3g.40gb", 40192, 1}, {"4g.40gb", 40192, 1}}};
  Result<std::vector<MigSlot>> slots = LayoutMigGroup(g, A100_80());
  ASSERT_TRUE(slots.ok()) << slots.status().ToString();
  EXPECT_EQ((*slots)[0].placement, (MigPlacement{4, 4}));
  EXPECT_EQ((*slots)[1].placement, (MigPlacement{0, 4}));
}

TEST(VolcanoMigLayout, AGroupThatCannotBeCutIsRefusedWithTheReason) {
  Result<std::vector<MigSlot>> too_many =
      LayoutMigGroup({"big", {{"1g.10gb", 9728, 8}}}, A100_80());
  ASSERT_FALSE(too_many.ok());
  EXPECT_EQ(too_many.status().code(), StatusCode::kFailedPrecondition);
  EXPECT_NE(too_many.status().message().find("\"big\" (8 instances) does not fit"),
            std::string::npos)
      << too_many.status().message();
  // Seven slices' worth, but two 4-slice instances cannot share the GPU with a 3g one.
  Result<std::vector<MigSlot>> crowded =
      LayoutMigGroup({"crowded", {{"3g.40gb", 40192, 1}, {"4g.40gb", 40192, 1},
                                  {"1g.10gb", 9728, 1}}},
                     A100_80());
  EXPECT_FALSE(crowded.ok());
  Result<std::vector<MigSlot>> unknown =
      LayoutMigGroup({"group1", {{"1g.5gb", 4864, 7}}}, A100_80());
  ASSERT_FALSE(unknown.ok());
  EXPECT_NE(unknown.status().message().find("\"1g.5gb\" is not a profile of this GPU (it has "
                                            "1g.10gb, 1g.20gb, 2g.20gb"),
            std::string::npos)
      << unknown.status().message();
  EXPECT_FALSE(LayoutMigGroup({"group1", {{"1g.10gb", 9728, 1}}}, {}).ok());
}

TEST(VolcanoMigConfig, ReadsVolcanosFormAndRefusesBrokenGroups) {
  Result<DeviceConfig> r = ParseDeviceConfigYaml(R"(nvidia:
  knownMigGeometries:
  - models: ["A100-SXM4-80GB", "A100-PCIE-80GB"]
    allowedGeometries:
    - group: group1
      geometries:
      - {name: 1g.10gb, memory: 9728, count: 7}
    - group: group2
      geometries:
      - {name: 2g.20gb, memory: 19968, count: 3}
      - {name: 1g.10gb, memory: 9728, count: 1}
)");
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  ASSERT_EQ(r->nvidia->known_mig_geometries.size(), 1u);
  const KnownMigGeometry& k = r->nvidia->known_mig_geometries[0];
  EXPECT_EQ(k.models, (std::vector<std::string>{"A100-SXM4-80GB", "A100-PCIE-80GB"}));
  ASSERT_EQ(k.groups.size(), 2u);
  EXPECT_EQ(k.groups[1],
            (MigGeometryGroup{"group2", {{"2g.20gb", 19968, 3}, {"1g.10gb", 9728, 1}}}));
  EXPECT_TRUE(r->warnings.empty());

  for (auto [yaml, why] : std::vector<std::pair<std::string, std::string>>{
           {"- models: [A30]\n    allowedGeometries:\n    - group: my-group\n      geometries:\n"
            "      - {name: 1g.6gb, memory: 6144, count: 4}\n",
            "without '-'"},
           {"- models: [A30]\n    allowedGeometries:\n    - group: g\n      geometries:\n"
            "      - {name: 1g.6gb, memory: 6144, count: 4}\n    - group: g\n      geometries:\n"
            "      - {name: 1g.6gb, memory: 6144, count: 4}\n",
            "given twice"},
           {"- models: [A30]\n    allowedGeometries:\n    - group: g\n      geometries:\n"
            "      - {name: big, memory: 6144, count: 4}\n",
            "is not a MIG profile"},
           {"- models: [A30]\n    allowedGeometries:\n    - group: g\n      geometries:\n"
            "      - {name: 1g.6gb, memory: 6144, count: 0}\n",
            "out of range"},
           {"- models: [A30]\n    allowedGeometries:\n    - group: g\n      geometries:\n"
            "      - {name: 1g.6gb, count: 4}\n",
            "memory and count are required"},
           {"- allowedGeometries:\n    - group: g\n      geometries:\n"
            "      - {name: 1g.6gb, memory: 6144, count: 4}\n",
            "models: required"},
           {"- models: [A30]\n    allowedGeometries: []\n", "non-empty list"},
       }) {
    Result<DeviceConfig> bad = ParseDeviceConfigYaml("nvidia:\n  knownMigGeometries:\n  " + yaml);
    ASSERT_FALSE(bad.ok()) << yaml;
    EXPECT_NE(bad.status().message().find(why), std::string::npos) << bad.status().message();
    EXPECT_NE(bad.status().message().find("nvidia.knownMigGeometries[0]"), std::string::npos)
        << bad.status().message();
  }
}

TEST(VolcanoMigConfig, HamisOlderFormIsLeftUnreadWithAWarning) {
  Result<DeviceConfig> r = ParseDeviceConfigYaml(R"(nvidia:
  knownMigGeometries:
  - models: ["A30"]
    allowedGeometries:
    - - {name: 1g.6gb, memory: 6144, count: 4}
    - - {name: 2g.12gb, memory: 12288, count: 2}
)");
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_TRUE(r->nvidia->known_mig_geometries.empty());
  ASSERT_EQ(r->warnings.size(), 1u);
  EXPECT_NE(r->warnings[0].find("HAMi's older form"), std::string::npos) << r->warnings[0];
}

}  // namespace
}  // namespace hami::device
