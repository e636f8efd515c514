#include "sim/apiserver/selectors.h"

#include <nlohmann/json.hpp>

#include "common/base64.h"
#include "gtest/gtest.h"
#include "sim/apiserver/admission.h"

namespace hami::sim {
namespace {

using nlohmann::json;
using Labels = std::map<std::string, std::string>;

bool Match(const std::string& sel, const Labels& labels) {
  auto s = LabelSelector::Parse(sel);
  EXPECT_TRUE(s.ok()) << sel << ": " << s.status().ToString();
  return s.ok() && s->Matches(labels);
}

TEST(LabelSelectorTest, Operators) {
  Labels l = {{"app", "web"}, {"tier", "front"}, {"hami.io/gpu", "yes"}};
  EXPECT_TRUE(Match("", l));
  EXPECT_TRUE(Match("app=web", l));
  EXPECT_TRUE(Match("app==web", l));
  EXPECT_FALSE(Match("app=db", l));
  EXPECT_TRUE(Match("app!=db", l));
  EXPECT_TRUE(Match("missing!=x", l));
  EXPECT_TRUE(Match("app in (db, web)", l));
  EXPECT_FALSE(Match("app notin (db,web)", l));
  EXPECT_TRUE(Match("missing notin (x)", l));
  EXPECT_FALSE(Match("missing in (x)", l));
  EXPECT_TRUE(Match("hami.io/gpu", l));
  EXPECT_TRUE(Match("!legacy", l));
  EXPECT_FALSE(Match("!app", l));
  EXPECT_TRUE(Match(" app = web , tier in (front) ,!legacy", l));
  EXPECT_FALSE(Match("app=web,tier=back", l));
  EXPECT_TRUE(Match("app=web,empty=", Labels{{"app", "web"}, {"empty", ""}}));
}

TEST(LabelSelectorTest, RejectsMalformed) {
  for (const char* bad : {"app in (a", "app in a)", "app foo (a)", ",", "a=b,,c", "bad key=1",
                          "k=v v", "k in (a b)", "=v"}) {
    EXPECT_FALSE(LabelSelector::Parse(bad).ok()) << bad;
  }
}

TEST(LabelSelectorTest, FromJson) {
  json sel = {{"matchLabels", {{"app", "web"}}},
              {"matchExpressions",
               {{{"key", "tier"}, {"operator", "In"}, {"values", {"front", "mid"}}},
                {{"key", "legacy"}, {"operator", "DoesNotExist"}}}}};
  auto s = LabelSelector::FromJson(sel);
  ASSERT_TRUE(s.ok());
  EXPECT_TRUE(s->Matches({{"app", "web"}, {"tier", "mid"}}));
  EXPECT_FALSE(s->Matches({{"app", "web"}, {"tier", "mid"}, {"legacy", "1"}}));
  EXPECT_TRUE(LabelSelector::FromJson(json())->Matches({}));
  EXPECT_FALSE(LabelSelector::FromJson(json{{"matchExpressions", {{{"key", "a"}}}}}).ok());
  EXPECT_FALSE(
      LabelSelector::FromJson(json{{"matchExpressions", {{{"key", "a"}, {"operator", "Gt"}}}}})
          .ok());
}

TEST(FieldSelectorTest, MatchesDottedPaths) {
  json pod = {{"metadata", {{"name", "p"}, {"namespace", "default"}}},
              {"spec", {{"nodeName", "n1"}, {"priority", 5}}},
              {"status", {{"phase", "Running"}}}};
  auto s = FieldSelector::Parse("metadata.name=p,spec.nodeName==n1,status.phase!=Pending");
  ASSERT_TRUE(s.ok());
  EXPECT_TRUE(s->Matches(pod));
  EXPECT_TRUE(FieldSelector::Parse("spec.priority=5")->Matches(pod));
  EXPECT_TRUE(FieldSelector::Parse("spec.missing=")->Matches(pod));
  EXPECT_FALSE(FieldSelector::Parse("spec.nodeName=")->Matches(pod));
  EXPECT_EQ(*FieldSelector::Parse("metadata.name=p")->RequiredValue("metadata.name"), "p");
  EXPECT_FALSE(FieldSelector::Parse("novalue").ok());
  EXPECT_FALSE(FieldSelector::Parse("a b=c").ok());
  EXPECT_EQ(FieldValue(json("scalar"), "a.b"), "");
}

TEST(Base64Test, RoundTrip) {
  for (std::string s : {"", "a", "ab", "abc", "abcd", "\x00\xff\x10 binary"}) {
    auto back = Base64Decode(Base64Encode(s));
    ASSERT_TRUE(back.ok());
    EXPECT_EQ(*back, s);
  }
  EXPECT_EQ(Base64Encode("hami"), "aGFtaQ==");
  EXPECT_EQ(*Base64Decode("aGFt\naQ=="), "hami");
  EXPECT_FALSE(Base64Decode("a*b").ok());
  EXPECT_FALSE(Base64Decode("aQ==aQ").ok());
}

}  // namespace
}  // namespace hami::sim
