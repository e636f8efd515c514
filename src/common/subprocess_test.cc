#include "common/subprocess.h"

#include <gtest/gtest.h>

namespace hami {
namespace {

TEST(Subprocess, WritesStdinReadsUntilAMarkerAndWaits) {
  // `read` takes one line from stdin; the shell echoes it back and exits with a status.
  Subprocess p({"/bin/sh", "-c", "echo ready; read line; echo got=$line; echo oops >&2; exit 3"},
               {"PATH=/usr/bin:/bin"});
  EXPECT_NE(p.ReadUntil("ready").find("ready"), std::string::npos);
  ASSERT_TRUE(p.WriteStdin("go\n"));
  ProcessResult r = p.Wait();
  EXPECT_EQ(r.exit_code, 3);
  EXPECT_EQ(KeyValues(r.out, "got")["got"], "go");
  EXPECT_EQ(r.err, "oops\n");
  EXPECT_FALSE(p.WriteStdin("late\n")) << "stdin is closed once the child was waited for";
}

TEST(Subprocess, ClosedStdinIsEndOfFile) {
  Subprocess p({"/bin/sh", "-c", "if read line; then echo line; else echo eof; fi"},
               {"PATH=/usr/bin:/bin"});
  p.CloseStdin();
  EXPECT_FALSE(p.WriteStdin("x\n"));
  EXPECT_EQ(p.Wait().out, "eof\n");
}

TEST(Subprocess, KeyValueLinesTakesEveryKeyValueLine) {
  auto kv = KeyValueLines("a=1\nnoise line\nb=x y=z\n\na=2\nlast=");
  EXPECT_EQ(kv.size(), 3u);
  EXPECT_EQ(kv["a"], "2");  // the later line wins
  EXPECT_EQ(kv["b"], "x y=z");
  EXPECT_EQ(kv["last"], "");  // no trailing newline needed
}

TEST(Subprocess, SetEnvReplacesEveryEntryOfTheName) {
  std::vector<std::string> env = {"PATH=/bin", "A=1", "AB=2", "A=3"};
  SetEnv(env, "A=9");
  EXPECT_EQ(env, (std::vector<std::string>{"PATH=/bin", "AB=2", "A=9"}));
  SetEnv(env, "NEW=x=y");
  EXPECT_EQ(env.back(), "NEW=x=y");
  EXPECT_EQ(env.size(), 4u);
}

}  // namespace
}  // namespace hami
