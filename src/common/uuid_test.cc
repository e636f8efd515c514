#include "common/uuid.h"

#include <gtest/gtest.h>

#include <regex>
#include <set>

namespace hami {
namespace {

TEST(Uuid, RandomVersion4InCanonicalForm) {
  const std::regex form("[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}");
  std::set<std::string> seen;
  for (int i = 0; i < 1000; ++i) {
    std::string u = NewRandomUuid();
    ASSERT_TRUE(std::regex_match(u, form)) << u;
    seen.insert(u);
  }
  EXPECT_EQ(seen.size(), 1000u);
}

}  // namespace
}  // namespace hami
