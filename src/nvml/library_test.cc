// nvml::Library against the simulated driver (build/sim on LD_LIBRARY_PATH, set by CTest), and
// against libraries that are absent or are not NVML at all.
#include "nvml/library.h"

#include <dlfcn.h>
#include <stdlib.h>

#include <filesystem>
#include <fstream>

#include <gtest/gtest.h>

namespace hami::nvml {
namespace {

constexpr const char* kConfig = R"(
driver_version = 550.54.15
[device]
name = Tesla T4
uuid = GPU-22222222-0000-4000-8000-000000000000
memory = 16Gi
)";

// The simulated driver reads its node from files named by the environment; each run gets its own.
class LibraryTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    char tmpl[] = "/tmp/nvml-library-test-XXXXXX";
    ASSERT_NE(mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
    std::ofstream(dir_ + "/sim.conf") << kConfig;
    setenv("HAMI_SIM_CONFIG", (dir_ + "/sim.conf").c_str(), 1);
    setenv("HAMI_SIM_STATE", (dir_ + "/state").c_str(), 1);
  }
  static void TearDownTestSuite() { std::filesystem::remove_all(dir_); }
  static std::string dir_;
};
std::string LibraryTest::dir_;

TEST_F(LibraryTest, LoadsAndResolvesTheSimulatedDriver) {
  Result<const Library*> lib = Library::Load("libnvidia-ml.so.1");
  ASSERT_TRUE(lib.ok()) << lib.status().ToString();
  EXPECT_EQ((*lib)->path(), "libnvidia-ml.so.1");
  Status required = (*lib)->Require({"nvmlInit_v2", "nvmlShutdown", "nvmlErrorString",
                                     "nvmlDeviceGetCount_v2", "nvmlDeviceGetHandleByIndex_v2",
                                     "nvmlDeviceGetUUID", "nvmlEventSetWait_v2"},
                                    "the test");
  ASSERT_TRUE(required.ok()) << required.ToString();
  const Api& a = (*lib)->api();
  ASSERT_EQ(a.init(), NVML_SUCCESS);
  unsigned count = 0;
  EXPECT_EQ(a.count(&count), NVML_SUCCESS);
  EXPECT_EQ(count, 1u);
  nvmlDevice_t dev = nullptr;
  ASSERT_EQ(a.by_index(0, &dev), NVML_SUCCESS);
  char uuid[NVML_DEVICE_UUID_V2_BUFFER_SIZE] = {};
  ASSERT_EQ(a.uuid(dev, uuid, sizeof(uuid)), NVML_SUCCESS);
  EXPECT_STREQ(uuid, "GPU-22222222-0000-4000-8000-000000000000");
  EXPECT_EQ(a.ErrorText(NVML_ERROR_NOT_FOUND), "Not Found (6)");
  EXPECT_EQ(a.shutdown(), NVML_SUCCESS);
}

TEST_F(LibraryTest, APathIsLoadedOnce) {
  Result<const Library*> first = Library::Load("libnvidia-ml.so.1");
  Result<const Library*> second = Library::Load("libnvidia-ml.so.1");
  ASSERT_TRUE(first.ok() && second.ok());
  EXPECT_EQ(*first, *second);
}

TEST_F(LibraryTest, ARequiredEntryPointItLacksIsNamed) {
  Result<const Library*> lib = Library::Load("libnvidia-ml.so.1");
  ASSERT_TRUE(lib.ok()) << lib.status().ToString();
  Status s = (*lib)->Require({"nvmlInit_v2", "nvmlMadeUpEntryPoint_v9"}, "the plugin");
  EXPECT_EQ(s.code(), StatusCode::kUnavailable);
  EXPECT_EQ(s.message(),
            "libnvidia-ml.so.1 lacks an NVML entry point the plugin needs (driver too old?): "
            "nvmlMadeUpEntryPoint_v9");
}

TEST(LibraryLoad, AMissingLibraryNamesThePathAndTheReason) {
  Result<const Library*> lib = Library::Load("libnvidia-ml-nope.so.1");
  EXPECT_EQ(lib.status().code(), StatusCode::kUnavailable);
  EXPECT_EQ(lib.status().message().rfind("cannot load libnvidia-ml-nope.so.1 (", 0), 0u)
      << lib.status().message();
}

TEST_F(LibraryTest, ALibraryThatAppearsLaterIsFound) {
  // Where the simulated driver lives, from one of its entry points.
  Result<const Library*> sim = Library::Load("libnvidia-ml.so.1");
  ASSERT_TRUE(sim.ok()) << sim.status().ToString();
  Dl_info info{};
  ASSERT_NE(dladdr(reinterpret_cast<void*>((*sim)->api().init), &info), 0);
  ASSERT_NE(info.dli_fname, nullptr);

  std::string late = dir_ + "/late/libnvidia-ml.so.1";
  EXPECT_FALSE(Library::Load(late).ok());
  std::filesystem::create_directories(dir_ + "/late");
  std::filesystem::create_symlink(std::filesystem::absolute(info.dli_fname), late);
  Result<const Library*> lib = Library::Load(late);  // the failure was not remembered
  ASSERT_TRUE(lib.ok()) << lib.status().ToString();
  EXPECT_NE((*lib)->api().init, nullptr);
}

TEST(LibraryLoad, ALibraryThatIsNotNvmlLacksEveryEntryPoint) {
  Result<const Library*> lib = Library::Load("libc.so.6");
  ASSERT_TRUE(lib.ok()) << lib.status().ToString();
  const Api& a = (*lib)->api();
  EXPECT_EQ(a.init, nullptr);
  EXPECT_EQ(a.event_set_free, nullptr);
  Status s = (*lib)->Require({"nvmlInit_v2", "nvmlDeviceGetCount_v2"}, "the monitor");
  EXPECT_EQ(s.message(),
            "libc.so.6 lacks NVML entry points the monitor needs (driver too old?): "
            "nvmlInit_v2, nvmlDeviceGetCount_v2");
  // Without nvmlErrorString a code still reads as something.
  EXPECT_EQ(a.ErrorText(NVML_ERROR_NOT_SUPPORTED), "NVML error (3)");
}

}  // namespace
}  // namespace hami::nvml
