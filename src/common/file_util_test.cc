#include "common/file_util.h"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>

namespace hami {
namespace {

class FileUtilTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/hami-file-util-XXXXXX";
    ASSERT_NE(mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }
  std::string dir_;
};

TEST_F(FileUtilTest, ReadsWholeFilesAndNamesThePathInErrors) {
  std::ofstream(dir_ + "/a") << "hello\nworld";
  EXPECT_EQ(ReadFileToString(dir_ + "/a").value(), "hello\nworld");
  Result<std::string> missing = ReadFileToString(dir_ + "/none");
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.status().code(), StatusCode::kNotFound);
  EXPECT_NE(missing.status().message().find(dir_ + "/none"), std::string::npos);
  Result<std::string> big = ReadFileToString(dir_ + "/a", 5);
  ASSERT_FALSE(big.ok());
  EXPECT_EQ(big.status().code(), StatusCode::kInvalidArgument);
  EXPECT_TRUE(ReadFileToString(dir_ + "/a", 11).ok());  // exactly the cap
  EXPECT_FALSE(ReadFileToString("/dev/zero", 1 << 16).ok());
}

TEST_F(FileUtilTest, WritesAtomicallyAndLeavesIdenticalFilesAlone) {
  const std::string path = dir_ + "/f";
  bool changed = false;
  ASSERT_TRUE(WriteFileAtomically(path, "one", 0640, &changed).ok());
  EXPECT_TRUE(changed);
  EXPECT_EQ(ReadFileToString(path).value(), "one");
  struct stat st {};
  ASSERT_EQ(stat(path.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0640u);
  ino_t first = st.st_ino;

  changed = false;
  ASSERT_TRUE(WriteFileAtomically(path, "one", 0640, &changed).ok());
  EXPECT_FALSE(changed);  // the same bytes: not rewritten
  ASSERT_EQ(stat(path.c_str(), &st), 0);
  EXPECT_EQ(st.st_ino, first);

  ASSERT_TRUE(WriteFileAtomically(path, "on", 0640, &changed).ok());  // a prefix differs too
  EXPECT_TRUE(changed);
  EXPECT_EQ(ReadFileToString(path).value(), "on");
  ASSERT_TRUE(WriteFileAtomically(path, "on", 0640, &changed).ok());
  EXPECT_TRUE(changed);  // gathered: left as it was

  Status s = WriteFileAtomically(dir_ + "/no-dir/f", "x");
  EXPECT_FALSE(s.ok());
  EXPECT_NE(s.message().find("no-dir"), std::string::npos) << s.message();
  // Nothing left behind: only the file itself.
  EXPECT_EQ(std::distance(std::filesystem::directory_iterator(dir_),
                          std::filesystem::directory_iterator()),
            1);
}

}  // namespace
}  // namespace hami
