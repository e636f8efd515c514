#include "ctl/json.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

namespace hami::ctl {
namespace {

using Ordered = nlohmann::ordered_json;

TEST(DumpJson, KeepsTheOrderOfKeysAndIndentsByTwo) {
  Ordered doc;
  doc["b"] = -1;
  doc["a"] = Ordered::array({1, true, nullptr});
  doc["c"] = Ordered::object();
  doc["d"] = JsonRounded(29.5);
  EXPECT_EQ(DumpJson(doc),
            "{\n"
            "  \"b\": -1,\n"
            "  \"a\": [\n"
            "    1,\n"
            "    true,\n"
            "    null\n"
            "  ],\n"
            "  \"c\": {},\n"
            "  \"d\": 29.5\n"
            "}\n");
}

TEST(DumpJson, DoublesAreRoundedAndNonFiniteIsNull) {
  Ordered doc = Ordered::array(
      {JsonRounded(30.0), JsonRounded(0.125), JsonRounded(2.0 / 3.0), JsonRounded(1.0 / 0.0)});
  EXPECT_EQ(DumpJson(doc), "[\n  30.0,\n  0.125,\n  0.667,\n  null\n]\n");
}

TEST(DumpJson, AnyBytesYieldValidJson) {
  Ordered doc;
  doc["name"] = std::string("a\"b\\c\n\x01\xff", 8);  // a control byte and invalid UTF-8
  const std::string out = DumpJson(doc);
  EXPECT_EQ(out, "{\n  \"name\": \"a\\\"b\\\\c\\n\\u0001\xef\xbf\xbd\"\n}\n");
  EXPECT_FALSE(Ordered::parse(out, nullptr, false).is_discarded());
}

TEST(JsonScalars, FindsEveryValueOfAKeyInDocumentOrder) {
  Ordered doc;
  doc["devices"] = Ordered::array();
  doc["devices"].push_back({{"total", 4096}, {"name", "A \"x\""}, {"gone", nullptr}});
  doc["devices"].push_back({{"total", 2048}, {"name", "B"}, {"gone", false}});
  const std::string j = DumpJson(doc);
  EXPECT_EQ(JsonScalars(j, "total"), (std::vector<std::string>{"4096", "2048"}));
  EXPECT_EQ(JsonScalars(j, "name"), (std::vector<std::string>{"A \"x\"", "B"}));
  EXPECT_EQ(JsonScalars(j, "gone"), (std::vector<std::string>{"null", "false"}));
  EXPECT_TRUE(JsonScalars(j, "devices").empty());  // not a scalar
  EXPECT_TRUE(JsonScalars("", "x").empty());
  EXPECT_TRUE(JsonScalars("\"x\":", "x").empty());
}

}  // namespace
}  // namespace hami::ctl
