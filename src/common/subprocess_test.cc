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

}  // namespace
}  // namespace hami
