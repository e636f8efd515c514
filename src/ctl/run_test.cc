#include "ctl/run.h"

#include <gtest/gtest.h>
#include <stdlib.h>
#include <sys/stat.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "ctl/exit_codes.h"

namespace hami::ctl {
namespace {

class ResolveCommandTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/hamictl-resolve-XXXXXX";
    ASSERT_NE(mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
    std::ofstream(dir_ + "/plain") << "data";
    std::ofstream(dir_ + "/tool") << "#!/bin/sh\n";
    chmod((dir_ + "/tool").c_str(), 0755);
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }
  std::string dir_;
};

TEST_F(ResolveCommandTest, SearchesPathInOrder) {
  std::string resolved, err;
  EXPECT_EQ(ResolveCommand("tool", "/nonexistent:" + dir_, &resolved, &err), kExitOk) << err;
  EXPECT_EQ(resolved, dir_ + "/tool");
}

TEST_F(ResolveCommandTest, ExplicitPathsAreNotSearched) {
  std::string resolved, err;
  EXPECT_EQ(ResolveCommand(dir_ + "/tool", "", &resolved, &err), kExitOk) << err;
  EXPECT_EQ(ResolveCommand(dir_ + "/missing", "", &resolved, &err), kExitNotFound);
  EXPECT_NE(err.find("no such file"), std::string::npos) << err;
  EXPECT_EQ(ResolveCommand(dir_ + "/plain", "", &resolved, &err), kExitCannotExec);
}

TEST_F(ResolveCommandTest, ReportsNotFoundAndNotExecutable) {
  std::string resolved, err;
  EXPECT_EQ(ResolveCommand("no-such-tool", dir_, &resolved, &err), kExitNotFound);
  EXPECT_NE(err.find("command not found"), std::string::npos) << err;
  EXPECT_EQ(ResolveCommand("plain", dir_, &resolved, &err), kExitCannotExec);
  EXPECT_NE(err.find("not executable"), std::string::npos) << err;
}

TEST(RunCommand, MissingLibraryIsAClearErrorBeforeAnythingRuns) {
  RunSpec spec;
  spec.command = {"/bin/true"};
  spec.lib = "/nonexistent/libvgpu.so";
  std::ostringstream err;
  EXPECT_EQ(RunCommand(spec, LayoutAt("/nonexistent", "/nonexistent/bin/hamictl"), err),
            kExitUsage);
  EXPECT_NE(err.str().find("--lib /nonexistent/libvgpu.so"), std::string::npos) << err.str();

  spec.lib.clear();
  err.str("");
  EXPECT_EQ(RunCommand(spec, LayoutAt("/nonexistent", "/nonexistent/bin/hamictl"), err),
            kExitRunFailed);
  EXPECT_NE(err.str().find("libvgpu.so not found"), std::string::npos) << err.str();
}

TEST(Layout, FollowsTheBuildTree) {
  Layout l = LayoutAt("/b", "/b/bin/hamictl");
  EXPECT_EQ(l.lib, "/b/lib/libvgpu.so");
  EXPECT_EQ(l.sim_dir, "/b/sim");
  EXPECT_EQ(l.probe, "/b/bin/vgpu_probe");
  Layout self;
  std::string err;
  ASSERT_TRUE(SelfLayout(&self, &err)) << err;
  EXPECT_EQ(self.probe, self.bin_dir + "/vgpu_probe");
}

}  // namespace
}  // namespace hami::ctl
