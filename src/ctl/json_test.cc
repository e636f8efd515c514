#include "ctl/json.h"

#include <gtest/gtest.h>

namespace hami::ctl {
namespace {

TEST(JsonWriter, NestsAndSeparates) {
  JsonWriter w;
  w.BeginObject();
  w.Key("a").Int(-1);
  w.Key("b").BeginArray().Uint(1).Bool(true).Null().EndArray();
  w.Key("c").BeginObject().EndObject();
  w.Key("d").Double(29.5);
  w.EndObject();
  EXPECT_EQ(w.str(),
            "{\n"
            "  \"a\": -1,\n"
            "  \"b\": [\n"
            "    1,\n"
            "    true,\n"
            "    null\n"
            "  ],\n"
            "  \"c\": {},\n"
            "  \"d\": 29.5\n"
            "}\n");
}

TEST(JsonWriter, DoublesAreTrimmedAndNonFiniteIsNull) {
  JsonWriter w;
  w.BeginArray().Double(30.0).Double(0.125).Double(1.0 / 0.0).EndArray();
  EXPECT_EQ(w.str(), "[\n  30,\n  0.125,\n  null\n]\n");
}

TEST(JsonQuote, EscapesControlQuoteAndNonAscii) {
  EXPECT_EQ(JsonQuote("a\"b\\c\n\x01\xff"), "\"a\\\"b\\\\c\\n\\u0001\\u00ff\"");
}

TEST(JsonScalars, FindsEveryValueOfAKey) {
  JsonWriter w;
  w.BeginObject().Key("devices").BeginArray();
  w.BeginObject().Key("total").Uint(4096).Key("name").String("A \"x\"").EndObject();
  w.BeginObject().Key("total").Uint(2048).Key("name").String("B").EndObject();
  w.EndArray().EndObject();
  EXPECT_EQ(JsonScalars(w.str(), "total"), (std::vector<std::string>{"4096", "2048"}));
  EXPECT_EQ(JsonScalars(w.str(), "name"), (std::vector<std::string>{"A \\\"x\\\"", "B"}));
  EXPECT_TRUE(JsonScalars(w.str(), "devices").empty());
  EXPECT_TRUE(JsonScalars("", "x").empty());
  EXPECT_TRUE(JsonScalars("\"x\":", "x").empty());
}

}  // namespace
}  // namespace hami::ctl
