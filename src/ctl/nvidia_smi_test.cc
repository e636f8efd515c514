#include "ctl/nvidia_smi.h"

#include <gtest/gtest.h>

#include <sstream>

namespace hami::ctl {
namespace {

SmiView Sample() {
  SmiView v;
  v.driver_version = "550.54.15";
  v.cuda_version = 12040;
  SmiDevice d0;
  d0.index = 0;
  d0.name = "NVIDIA A100-SXM4-80GB";
  d0.uuid = "GPU-0a1b2c3d-0000-0000-0000-000000000001";
  d0.memory_known = true;
  d0.memory_total = 8192ULL << 20;
  d0.memory_used = 1024ULL << 20;
  d0.gpu_util = 50;
  d0.processes = {{4321, true, 1024ULL << 20, "python3"}};
  SmiDevice d1;
  d1.index = 1;
  d1.name = "Tesla T4";
  d1.uuid = "GPU-0a1b2c3d-0000-0000-0000-000000000002";
  v.devices = {d0, d1};
  return v;
}

NvidiaSmiArgs Parse(const std::vector<std::string>& args) {
  NvidiaSmiArgs a;
  std::string why;
  EXPECT_TRUE(ParseNvidiaSmiArgs(args, &a, &why)) << why;
  return a;
}

std::string Refusal(const std::vector<std::string>& args) {
  NvidiaSmiArgs a;
  std::string why;
  EXPECT_FALSE(ParseNvidiaSmiArgs(args, &a, &why));
  return why;
}

TEST(NvidiaSmiArgs, UnderstandsTheCommonForms) {
  EXPECT_EQ(Parse({}).mode, NvidiaSmiArgs::Mode::kTable);
  EXPECT_EQ(Parse({"-L"}).mode, NvidiaSmiArgs::Mode::kList);
  EXPECT_EQ(Parse({"--list-gpus"}).mode, NvidiaSmiArgs::Mode::kList);
  EXPECT_EQ(Parse({"--help"}).mode, NvidiaSmiArgs::Mode::kHelp);
  NvidiaSmiArgs q = Parse({"--query-gpu=name, memory.total", "--format=csv,noheader,nounits"});
  EXPECT_EQ(q.mode, NvidiaSmiArgs::Mode::kQuery);
  EXPECT_EQ(q.fields, (std::vector<std::string>{"name", "memory.total"}));
  EXPECT_FALSE(q.header);
  EXPECT_FALSE(q.units);
  NvidiaSmiArgs spaced = Parse({"--query-gpu", "uuid", "--format", "csv"});
  EXPECT_EQ(spaced.fields, (std::vector<std::string>{"uuid"}));
  EXPECT_TRUE(spaced.header);
}

TEST(NvidiaSmiArgs, RefusesWhatItDoesNotDoWithAReason) {
  EXPECT_NE(Refusal({"topo", "-m"}).find("'topo' is not supported"), std::string::npos);
  EXPECT_NE(Refusal({"--query-gpu=name"}).find("--format=csv"), std::string::npos);
  EXPECT_NE(Refusal({"--query-gpu=name", "--format=json"}).find("csv"), std::string::npos);
  EXPECT_NE(Refusal({"--query-gpu=name", "--format=csv,bogus"}).find("bogus"),
            std::string::npos);
  EXPECT_NE(Refusal({"--format=csv"}).find("--query-gpu"), std::string::npos);
}

TEST(RenderNvidiaSmi, TableShowsTheQuotaAsTheTotal) {
  std::string t = RenderNvidiaSmiTable(Sample());
  EXPECT_NE(t.find("Driver Version: 550.54.15"), std::string::npos) << t;
  EXPECT_NE(t.find("CUDA Version: 12.4"), std::string::npos) << t;
  EXPECT_NE(t.find("1024MiB / 8192MiB"), std::string::npos) << t;
  EXPECT_NE(t.find("NVIDIA A100-SXM4-80GB"), std::string::npos) << t;
  EXPECT_NE(t.find("GPU-0a1b2c3d-0000-0000-0000-000000000002"), std::string::npos) << t;
  EXPECT_NE(t.find("4321"), std::string::npos) << t;
  EXPECT_NE(t.find("python3"), std::string::npos) << t;
  // Every line of the boxes has the same width.
  std::istringstream lines(t);
  std::string line;
  while (std::getline(lines, line)) {
    if (!line.empty()) {
      EXPECT_EQ(line.size(), 91u) << "[" << line << "]";
    }
  }
  // A device that reports nothing says N/A rather than 0.
  EXPECT_NE(t.find("N/A"), std::string::npos);
  SmiView empty;
  EXPECT_NE(RenderNvidiaSmiTable(empty).find("No devices were found"), std::string::npos);
  EXPECT_NE(RenderNvidiaSmiTable(empty).find("No running processes found"), std::string::npos);
}

TEST(RenderNvidiaSmi, ListHasOneLinePerGpu) {
  EXPECT_EQ(RenderNvidiaSmiList(Sample()),
            "GPU 0: NVIDIA A100-SXM4-80GB (UUID: GPU-0a1b2c3d-0000-0000-0000-000000000001)\n"
            "GPU 1: Tesla T4 (UUID: GPU-0a1b2c3d-0000-0000-0000-000000000002)\n");
}

TEST(RenderNvidiaSmi, QueryWritesCsv) {
  std::string out, why;
  ASSERT_TRUE(RenderNvidiaSmiQuery(
      Sample(), Parse({"--query-gpu=index,memory.total,memory.used,memory.free,utilization.gpu",
                       "--format=csv"}),
      &out, &why))
      << why;
  EXPECT_EQ(out,
            "index, memory.total [MiB], memory.used [MiB], memory.free [MiB], "
            "utilization.gpu [%]\n"
            "0, 8192 MiB, 1024 MiB, 7168 MiB, 50 %\n"
            "1, [N/A], [N/A], [N/A], [N/A]\n");
  ASSERT_TRUE(RenderNvidiaSmiQuery(
      Sample(), Parse({"--query-gpu=name,memory.total", "--format=csv,noheader,nounits"}), &out,
      &why));
  EXPECT_EQ(out, "NVIDIA A100-SXM4-80GB, 8192\nTesla T4, [N/A]\n");
  EXPECT_FALSE(RenderNvidiaSmiQuery(
      Sample(), Parse({"--query-gpu=temperature.gpu", "--format=csv"}), &out, &why));
  EXPECT_NE(why.find("temperature.gpu"), std::string::npos);
}

TEST(NvidiaSmiMain, BadArgumentsExitTwoWithoutTouchingNvml) {
  std::ostringstream out, err;
  EXPECT_EQ(NvidiaSmiMain({"-q", "-d", "MEMORY"}, out, err), 2);
  EXPECT_NE(err.str().find("'-q' is not supported"), std::string::npos) << err.str();
  EXPECT_TRUE(out.str().empty());
  std::ostringstream help, none;
  EXPECT_EQ(NvidiaSmiMain({"-h"}, help, none), 0);
  EXPECT_NE(help.str().find("--query-gpu"), std::string::npos);
}

}  // namespace
}  // namespace hami::ctl
