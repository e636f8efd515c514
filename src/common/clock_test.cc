#include "common/clock.h"

#include <gtest/gtest.h>
#include <poll.h>

#include <thread>

namespace hami {
namespace {

// Whether `fd` polls readable right now.
bool Readable(int fd) {
  pollfd p{fd, POLLIN, 0};
  return ::poll(&p, 1, 0) == 1 && (p.revents & POLLIN) != 0;
}

TEST(CancellationTest, WakeFdTurnsReadableOnCancel) {
  Cancellation c;
  int fd = c.WakeFd();
  ASSERT_GE(fd, 0);
  EXPECT_FALSE(Readable(fd));
  EXPECT_EQ(c.WakeFd(), fd);  // one descriptor per Cancellation
  c.Cancel();
  EXPECT_TRUE(Readable(fd));
  EXPECT_TRUE(c.cancelled());
}

TEST(CancellationTest, WakeFdMadeAfterCancelIsReadableAtOnce) {
  Cancellation c;
  c.Cancel();
  int fd = c.WakeFd();
  ASSERT_GE(fd, 0);
  EXPECT_TRUE(Readable(fd));
}

TEST(CancellationTest, APollOnTheWakeFdEndsWhenAnotherThreadCancels) {
  Cancellation c;
  int fd = c.WakeFd();
  ASSERT_GE(fd, 0);
  std::thread canceller([&c] { c.Cancel(); });
  pollfd p{fd, POLLIN, 0};
  // No timeout: only the cancellation can end this wait.
  EXPECT_EQ(::poll(&p, 1, -1), 1);
  canceller.join();
}

TEST(CancellationTest, WaitForReturnsTrueOnceCancelled) {
  Cancellation c;
  EXPECT_FALSE(c.WaitFor(std::chrono::milliseconds(1)));
  c.Cancel();
  EXPECT_TRUE(c.WaitFor(std::chrono::hours(1)));
}

}  // namespace
}  // namespace hami
