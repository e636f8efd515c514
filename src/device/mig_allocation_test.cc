#include "device/mig_allocation.h"

#include <gtest/gtest.h>

namespace hami::device {
namespace {

TEST(MigAllocation, RoundTripsSchedulerAndPluginForms) {
  constexpr char kScheduler[] =
      R"([{"containerIndex":0,"deviceIndex":0,"gpuUUID":"GPU-a","profile":"2g.10gb","placement":{"start":0,"size":2}},)"
      R"({"containerIndex":1,"deviceIndex":0,"gpuUUID":"GPU-a","profile":"1g.5gb","placement":{"start":6,"size":1}}])";
  Result<std::vector<MigAllocation>> r = DecodeMigAllocations(kScheduler);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  ASSERT_EQ(r->size(), 2u);
  EXPECT_EQ((*r)[1].placement, (MigPlacement{6, 1}));
  EXPECT_FALSE((*r)[0].runtime.has_value());
  EXPECT_EQ(EncodeMigAllocations(*r), kScheduler);

  (*r)[0].runtime = MigRuntimeIdentity{"MIG-1234", 0, 0};  // ids of 0 are real ids
  std::string with_runtime = EncodeMigAllocations(*r);
  EXPECT_NE(with_runtime.find(R"("migUUID":"MIG-1234","gpuInstanceID":0,"computeInstanceID":0})"),
            std::string::npos);
  EXPECT_EQ(*DecodeMigAllocations(with_runtime), *r);
}

TEST(MigAllocation, EmptyValueIsEmptyList) {
  EXPECT_TRUE(DecodeMigAllocations("")->empty());
  EXPECT_TRUE(DecodeMigAllocations("[]")->empty());
  EXPECT_EQ(EncodeMigAllocations({}), "[]");
}

TEST(MigAllocation, RejectsInvalidReservations) {
  const char* cases[][2] = {
      {R"([{"containerIndex":0,"deviceIndex":0,"gpuUUID":"GPU-a","profile":"1g.5gb","placement":{"start":0,"size":0}}])",
       "incomplete"},
      {R"([{"containerIndex":-1,"deviceIndex":0,"gpuUUID":"GPU-a","profile":"1g.5gb","placement":{"start":0,"size":1}}])",
       "incomplete"},
      {R"([{"containerIndex":0,"deviceIndex":0,"profile":"1g.5gb","placement":{"start":0,"size":1}}])",
       "incomplete"},
      {R"([{"containerIndex":0,"deviceIndex":0,"gpuUUID":"GPU-a","profile":"1g.5gb","placement":{"start":0,"size":1},"migUUID":"MIG-1"}])",
       "partial runtime identity"},
      {R"([{"containerIndex":0,"deviceIndex":0,"gpuUUID":"GPU-a","profile":"1g.5gb","placement":{"start":0,"size":1},"gpuInstanceID":1,"computeInstanceID":1}])",
       "partial runtime identity"},
      {R"([{"containerIndex":0,"deviceIndex":0,"gpuUUID":"GPU-a","profile":"1g.5gb","placement":{"start":0,"size":1}},)"
       R"({"containerIndex":0,"deviceIndex":0,"gpuUUID":"GPU-b","profile":"1g.5gb","placement":{"start":1,"size":1}}])",
       "duplicate entry for container 0 device 0"},
      {R"([{"containerIndex":"0"}])", "containerIndex: expected an integer"},
      {R"({"a":1})", "expected a JSON array"},
      {"[", "not valid JSON"},
  };
  for (const auto& c : cases) {
    Result<std::vector<MigAllocation>> r = DecodeMigAllocations(c[0]);
    ASSERT_FALSE(r.ok()) << c[0];
    EXPECT_NE(r.status().message().find(c[1]), std::string::npos)
        << c[0] << " -> " << r.status().message();
  }
}

}  // namespace
}  // namespace hami::device
