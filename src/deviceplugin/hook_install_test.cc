#include "deviceplugin/hook_install.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>

namespace hami::deviceplugin {
namespace {

std::string Read(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

void Write(const std::string& path, const std::string& content) {
  std::ofstream(path, std::ios::binary) << content;
}

class HookInstallTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/hook-test-XXXXXX";
    ASSERT_NE(mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }
  std::string dir_;
};

TEST_F(HookInstallTest, InstallsOnceAndReplacesAtomically) {
  const std::string lib = dir_ + "/build-libvgpu.so";
  const std::string v1 = std::string(
                             "\x7f"
                             "ELF") +
                         "version one";
  Write(lib, v1);
  const std::string hook = dir_ + "/hook";
  Result<InstalledHook> r = InstallHook(hook, lib, "0.1.0");
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->libvgpu_file, "libvgpu.so.0.1.0");
  EXPECT_TRUE(r->changed);
  EXPECT_EQ(Read(hook + "/vgpu/libvgpu.so.0.1.0"), v1);
  EXPECT_EQ(Read(hook + "/vgpu/libvgpu.so"), v1);
  EXPECT_EQ(Read(hook + "/vgpu/ld.so.preload"), hook + "/vgpu/libvgpu.so\n");
  EXPECT_TRUE(std::filesystem::is_directory(hook + "/vgpu/containers"));
  struct stat st;
  ASSERT_EQ(stat((hook + "/vgpu/libvgpu.so.0.1.0").c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0755u);

  // Same bytes again: nothing is written.
  r = InstallHook(hook, lib, "0.1.0");
  ASSERT_TRUE(r.ok());
  EXPECT_FALSE(r->changed);

  // A running container holds the old file open (as its bind mount does); a new build replaces
  // the name, never the bytes under it.
  int held = open((hook + "/vgpu/libvgpu.so.0.1.0").c_str(), O_RDONLY);
  ASSERT_GE(held, 0);
  const std::string v2 = std::string(
                             "\x7f"
                             "ELF") +
                         "version two, longer";
  Write(lib, v2);
  r = InstallHook(hook, lib, "0.1.0");
  ASSERT_TRUE(r.ok());
  EXPECT_TRUE(r->changed);
  EXPECT_EQ(Read(hook + "/vgpu/libvgpu.so.0.1.0"), v2);
  char buf[64] = {};
  ssize_t n = pread(held, buf, sizeof(buf), 0);
  close(held);
  EXPECT_EQ(std::string(buf, static_cast<size_t>(n)), v1);
  // No temporary files are left behind.
  size_t files = 0;
  for (const auto& e : std::filesystem::directory_iterator(hook + "/vgpu")) {
    (void)e;
    ++files;
  }
  EXPECT_EQ(files, 4u);
}

// Modes without libvgpu.so still get the containers folder hami-monitor reads, and no library.
TEST_F(HookInstallTest, PreparesTheFolderAloneForModesWithoutTheLibrary) {
  ASSERT_TRUE(PrepareHookDirectory(dir_ + "/hook").ok());
  struct stat st {};
  ASSERT_EQ(stat((dir_ + "/hook/vgpu/containers").c_str(), &st), 0);
  EXPECT_TRUE(S_ISDIR(st.st_mode));
  EXPECT_EQ(st.st_mode & 0777, 0755u);
  EXPECT_FALSE(std::filesystem::exists(dir_ + "/hook/vgpu/libvgpu.so"));
  EXPECT_FALSE(std::filesystem::exists(dir_ + "/hook/vgpu/ld.so.preload"));
  // Idempotent, and a file where the folder should be is an error that names it.
  EXPECT_TRUE(PrepareHookDirectory(dir_ + "/hook").ok());
  Write(dir_ + "/blocked", "x");
  Status s = PrepareHookDirectory(dir_ + "/blocked");
  EXPECT_FALSE(s.ok());
  EXPECT_NE(s.message().find(dir_ + "/blocked/vgpu/containers"), std::string::npos) << s.message();
}

TEST_F(HookInstallTest, RefusesWhatIsNotALibrary) {
  Result<InstalledHook> r = InstallHook(dir_ + "/hook", dir_ + "/missing.so", "1");
  EXPECT_EQ(r.status().code(), StatusCode::kFailedPrecondition);
  EXPECT_NE(r.status().message().find("missing.so"), std::string::npos);
  Write(dir_ + "/text.so", "#!/bin/sh\n");
  r = InstallHook(dir_ + "/hook", dir_ + "/text.so", "1");
  EXPECT_NE(r.status().message().find("not a shared library"), std::string::npos);
}

}  // namespace
}  // namespace hami::deviceplugin
