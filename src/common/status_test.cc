#include "common/status.h"

#include <gtest/gtest.h>

#include <memory>
#include <string>

namespace hami {
namespace {

TEST(StatusTest, DefaultIsOk) {
  Status s;
  EXPECT_TRUE(s.ok());
  EXPECT_EQ(s.code(), StatusCode::kOk);
  EXPECT_EQ(s.ToString(), "OK");
  EXPECT_EQ(s, OkStatus());
}

TEST(StatusTest, ErrorCarriesCodeAndMessage) {
  Status s = InvalidArgumentError("count must be positive");
  EXPECT_FALSE(s.ok());
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(s.message(), "count must be positive");
  EXPECT_EQ(s.ToString(), "INVALID_ARGUMENT: count must be positive");
}

TEST(StatusTest, OkCodeDropsMessage) {
  Status s(StatusCode::kOk, "ignored");
  EXPECT_TRUE(s.ok());
  EXPECT_EQ(s.message(), "");
}

TEST(StatusTest, WithContextPrefixes) {
  EXPECT_EQ(NotFoundError("x").WithContext("devices[1]").message(), "devices[1]: x");
  EXPECT_TRUE(OkStatus().WithContext("ignored").ok());
}

TEST(StatusTest, CodeNames) {
  EXPECT_EQ(StatusCodeName(StatusCode::kUnavailable), "UNAVAILABLE");
  EXPECT_EQ(StatusCodeName(static_cast<StatusCode>(99)), "UNKNOWN_CODE");
  EXPECT_EQ(DataLossError("d").code(), StatusCode::kDataLoss);
  EXPECT_EQ(FailedPreconditionError("d").code(), StatusCode::kFailedPrecondition);
}

TEST(ResultTest, HoldsValue) {
  Result<int> r = 42;
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(*r, 42);
  EXPECT_TRUE(r.status().ok());
  EXPECT_EQ(r.value_or(7), 42);
}

TEST(ResultTest, HoldsError) {
  Result<int> r = OutOfRangeError("too big");
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kOutOfRange);
  EXPECT_EQ(r.value_or(7), 7);
}

TEST(ResultDeathTest, ReadingTheValueOfAnErrorAbortsWithItsMessage) {
  Result<int> r = OutOfRangeError("too big");
  EXPECT_DEATH((void)r.value(), "Result holds no value: .*too big");
  EXPECT_DEATH((void)*r, "too big");
  Result<std::string> s = NotFoundError("no such pod");
  EXPECT_DEATH((void)s->size(), "no such pod");
  EXPECT_DEATH((void)std::move(s).value(), "no such pod");
}

TEST(ResultTest, ConvertingConstructorAndMoveOnly) {
  Result<std::string> s = "abc";
  EXPECT_EQ(*s, "abc");
  Result<std::unique_ptr<int>> p = std::make_unique<int>(3);
  ASSERT_TRUE(p.ok());
  std::unique_ptr<int> taken = std::move(p).value();
  EXPECT_EQ(*taken, 3);
}

Result<int> Half(int v) {
  if (v % 2 != 0) return InvalidArgumentError("odd");
  return v / 2;
}

Result<int> Quarter(int v) {
  HAMI_ASSIGN_OR_RETURN(int h, Half(v));
  HAMI_ASSIGN_OR_RETURN(h, Half(h));
  return h;
}

Status CheckEven(int v) {
  HAMI_RETURN_IF_ERROR(Half(v));
  HAMI_RETURN_IF_ERROR(OkStatus());
  return OkStatus();
}

TEST(ResultTest, Macros) {
  EXPECT_EQ(*Quarter(8), 2);
  EXPECT_EQ(Quarter(6).status().message(), "odd");
  EXPECT_TRUE(CheckEven(4).ok());
  EXPECT_EQ(CheckEven(3).code(), StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace hami
