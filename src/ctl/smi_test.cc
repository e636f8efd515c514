#include "ctl/smi.h"

#include <gtest/gtest.h>

#include "ctl/json.h"

namespace hami::ctl {
namespace {

SmiView Sample() {
  SmiView v;
  v.driver_version = "550.54.15";
  v.cuda_version = 12040;
  SmiDevice d0;
  d0.index = 0;
  d0.name = "NVIDIA A100-SXM4-80GB";
  d0.uuid = "GPU-00000000-0000-0000-0000-000000000000";
  d0.memory_known = true;
  d0.memory_total = 4ULL << 30;
  d0.memory_used = 1ULL << 30;
  d0.gpu_util = 37;
  d0.processes = {{1234, true, 1ULL << 30, "vgpu_probe"}, {99, false, 0, ""}};
  SmiDevice d1;
  d1.index = 1;
  v.devices = {d0, d1};
  return v;
}

TEST(RenderSmiText, ShowsDevicesAndProcesses) {
  std::string t = RenderSmiText(Sample());
  EXPECT_NE(t.find("driver 550.54.15   CUDA 12.4"), std::string::npos) << t;
  EXPECT_NE(t.find("1024MiB / 4096MiB"), std::string::npos) << t;
  EXPECT_NE(t.find("37%"), std::string::npos) << t;
  EXPECT_NE(t.find("1234  vgpu_probe  1024MiB"), std::string::npos) << t;
  EXPECT_NE(t.find("99    -           N/A"), std::string::npos) << t;
  // Device 1 knows nothing: every field says so.
  EXPECT_NE(t.find("1    N/A"), std::string::npos) << t;
}

TEST(RenderSmiText, SaysWhenThereIsNothing) {
  SmiView v;
  EXPECT_NE(RenderSmiText(v).find("no devices found"), std::string::npos);
  SmiView one = Sample();
  one.devices[0].processes.clear();
  EXPECT_NE(RenderSmiText(one).find("no running compute processes"), std::string::npos);
}

TEST(RenderSmiJson, CarriesTheNumbersAndNullsForUnknowns) {
  std::string j = RenderSmiJson(Sample());
  EXPECT_EQ(JsonScalars(j, "memory_total_mib"), (std::vector<std::string>{"4096", "null"}));
  EXPECT_EQ(JsonScalars(j, "memory_used_bytes"),
            (std::vector<std::string>{std::to_string(1ULL << 30), "null"}));
  EXPECT_EQ(JsonScalars(j, "gpu_util_percent"), (std::vector<std::string>{"37", "null"}));
  EXPECT_EQ(JsonScalars(j, "pid"), (std::vector<std::string>{"1234", "99"}));
  EXPECT_EQ(JsonScalars(j, "cuda_version"), (std::vector<std::string>{"12040"}));
}

}  // namespace
}  // namespace hami::ctl
