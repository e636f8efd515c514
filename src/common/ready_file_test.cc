#include "common/ready_file.h"

#include <gtest/gtest.h>
#include <stdlib.h>
#include <unistd.h>

#include <filesystem>

#include "common/file_util.h"

namespace hami {
namespace {

TEST(ReadyFile, WrittenWithThePidAndReadBack) {
  std::string t = (std::filesystem::temp_directory_path() / "hami-ready-XXXXXX").string();
  ASSERT_NE(mkdtemp(t.data()), nullptr);
  const std::string path = t + "/scheduler.ready";
  Result<ReadyFields> none = ReadReadyFile(path);
  EXPECT_EQ(none.status().code(), StatusCode::kNotFound);
  ASSERT_TRUE(WriteReadyFile(path, {{"metrics", "127.0.0.1:9395"}}).ok());
  Result<ReadyFields> got = ReadReadyFile(path);
  ASSERT_TRUE(got.ok()) << got.status().ToString();
  EXPECT_EQ((*got)["metrics"], "127.0.0.1:9395");
  EXPECT_EQ((*got)["pid"], std::to_string(getpid()));
  EXPECT_TRUE(WriteReadyFile("", {{"a", "b"}}).ok()) << "no path: nothing to write";

  for (const char* garbage : {"", "[1,2]", "{\"port\": 8080}", "{\"a\":", "not json"}) {
    ASSERT_TRUE(WriteFileAtomically(path, garbage).ok());
    Result<ReadyFields> bad = ReadReadyFile(path);
    EXPECT_EQ(bad.status().code(), StatusCode::kInvalidArgument) << garbage;
  }
  std::filesystem::remove_all(t);
}

}  // namespace
}  // namespace hami
