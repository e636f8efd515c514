#include "device/handshake.h"

#include <gtest/gtest.h>

namespace hami::device {
namespace {

TEST(Handshake, Requesting) {
  CivilTime t{2024, 5, 1, 8, 30, 0};
  EXPECT_EQ(EncodeHandshakeRequesting(t), "Requesting_2024-05-01 08:30:00");
  Handshake h = DecodeHandshake("Requesting_2024-05-01 08:30:00");
  EXPECT_EQ(h.state, HandshakeState::kRequesting);
  ASSERT_TRUE(h.time.has_value());
  EXPECT_EQ(*h.time, t);
}

TEST(Handshake, RequestingWithUnreadableTimeHasNoTime) {
  for (const char* v : {"Requesting", "Requesting_", "Requesting_soon", "xRequesting_2024"}) {
    Handshake h = DecodeHandshake(v);
    EXPECT_EQ(h.state, HandshakeState::kRequesting) << v;
    EXPECT_FALSE(h.time.has_value()) << v;
  }
}

TEST(Handshake, LegacyValues) {
  Handshake d = DecodeHandshake(EncodeHandshakeDeleted({2023, 1, 2, 3, 4, 5}));
  EXPECT_EQ(d.state, HandshakeState::kDeleted);
  EXPECT_EQ(d.time, (CivilTime{2023, 1, 2, 3, 4, 5}));
  // Go's time.String() after "Reported ".
  Handshake r = DecodeHandshake("Reported 2023-01-02 03:04:05.123456789 +0800 CST m=+12.5");
  EXPECT_EQ(r.state, HandshakeState::kReported);
  EXPECT_EQ(r.time, (CivilTime{2023, 1, 2, 3, 4, 5}));
  EXPECT_FALSE(DecodeHandshake("Reported garbage").time.has_value());
}

TEST(Handshake, AbsentAndOther) {
  EXPECT_EQ(DecodeHandshake("").state, HandshakeState::kAbsent);
  EXPECT_EQ(DecodeHandshake("hello").state, HandshakeState::kOther);
}

}  // namespace
}  // namespace hami::device
