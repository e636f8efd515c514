#include "common/stop_signals.h"

#include <gtest/gtest.h>
#include <pthread.h>

namespace hami {
namespace {

bool Blocked(int sig) {
  sigset_t now;
  pthread_sigmask(SIG_BLOCK, nullptr, &now);
  return sigismember(&now, sig) == 1;
}

TEST(StopSignals, TakesAPendingSignalSynchronouslyAndRestoresTheMask) {
  ASSERT_FALSE(Blocked(SIGUSR1));
  {
    StopSignals signals({SIGUSR1});
    EXPECT_TRUE(Blocked(SIGINT));
    EXPECT_TRUE(Blocked(SIGTERM));
    EXPECT_TRUE(Blocked(SIGUSR1));
    // Blocked, so no handler runs (SIGUSR1's default would end the test): it waits for Wait.
    ASSERT_EQ(pthread_kill(pthread_self(), SIGUSR1), 0);
    EXPECT_EQ(signals.Wait(), SIGUSR1);
    ASSERT_EQ(pthread_kill(pthread_self(), SIGTERM), 0);
    EXPECT_EQ(signals.Wait(), SIGTERM);
  }
  EXPECT_FALSE(Blocked(SIGUSR1)) << "the earlier mask is back";
  EXPECT_FALSE(Blocked(SIGTERM));
}

}  // namespace
}  // namespace hami
