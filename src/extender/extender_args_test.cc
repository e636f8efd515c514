#include "extender/extender_args.h"

#include <gtest/gtest.h>

namespace hami::extender {
namespace {

using Json = nlohmann::json;

// What the reader must agree with: the same fields taken from the parsed document.
void ExpectSameAsDocument(std::string_view body) {
  SCOPED_TRACE(std::string(body));
  Result<k8s::Object> doc = k8s::ParseJson(body);
  Result<ExtenderArgs> args = ParseExtenderArgs(body);
  ASSERT_EQ(doc.ok() && doc->is_object(), args.ok()) << args.status().ToString();
  if (!args.ok()) {
    EXPECT_EQ(args.status().message(), doc.ok() ? "wrong type" : "malformed JSON");
    return;
  }
  EXPECT_EQ(args->pod, doc->value("pod", Json()));
  EXPECT_EQ(args->nodes, doc->value("nodes", Json()));
  auto nn = doc->find("nodenames");
  EXPECT_EQ(args->has_names, nn != doc->end() && nn->is_array());
  EXPECT_EQ(args->names_not_list, nn != doc->end() && !nn->is_null() && !nn->is_array());
  std::vector<std::string_view> want;
  if (nn != doc->end() && nn->is_array()) {
    for (const Json& n : *nn) {
      if (n.is_string()) want.push_back(n.get_ref<const std::string&>());
    }
  }
  EXPECT_EQ(args->names, want);
}

TEST(ExtenderArgsTest, AgreesWithTheDocument) {
  for (std::string_view body : std::initializer_list<std::string_view>{
           R"({"pod":{"metadata":{"name":"p","annotations":{"a":"b"}},"spec":{"containers":[
               {"name":"c","resources":{"limits":{"nvidia.com/gpu":"1"}}}]}},
               "nodenames":["node-1","node-2","a-much-longer-node-name.example.internal"]})",
           R"({"pod":{},"nodenames":null,"nodes":{"items":[{"metadata":{"name":"n"}}]}})",
           R"({"nodenames":["x",1,null,["y"],{"z":"w"},"\u00e9\"q\\"],"pod":{"a":[1,2.5,true]}})",
           R"({"nodenames":"node-1","pod":{}})",
           R"({"nodenames":{"a":"b"}})",
           R"({"nodenames":7})",
           R"({"nodenames":["a"],"nodenames":["b","c"],"pod":{"x":1},"pod":{"y":2}})",
           R"({"pod":{"a":{"b":1},"a":{"c":2}}})",
           R"({"pod":5,"nodes":"n","other":{"deep":[[[{}]]]}})",
           R"({})",
           R"([])",
           R"("text")",
           R"({"pod":{)",
           R"({"nodenames":["a",]})",
           R"({"pod":{}} trailing)",
           "",
           R"({"nodenames":[]})",
           // The byte-scanning path and its fallbacks (plain bodies, then every kind of oddity).
           " \t\r\n{ \"pod\" : { \"s\" : \"}{][\\\"\" } , \"nodenames\" : [ \"a\" , \"b\" ] } \n",
           R"({ })",
           R"({"node\u006eames":["a"]})",
           R"({"nodenames":["caf\u00e9","b"]})",
           "{\"nodenames\":[\"caf\xc3\xa9\",\"b\"]}",
           "{\"nodenames\":[\"bad\xff\"]}",
           "{\"nodenames\":[\"tab\there\"]}",
           R"({"a":1,})",
           R"({,})",
           R"({"x":-1.5e3,"y":true,"z":null,"nodenames":["a"]})",
           R"({"x":01,"nodenames":["a"]})",
           R"({"x":tru,"nodenames":["a"]})",
           R"({"nodenames":[ ]})",
           R"({"nodenames":["a" "b"]})",
           R"({"nodenames":["a"]]})",
           R"({"nodenames":["a"],})",
           R"({"nodenames":"x","nodenames":["a"]})",
           R"({"nodenames":["a"],"nodenames":null})",
           R"({"pod":{"a":"\""},"nodes":[1,{"b":"]"}]})",
           R"({"pod":{"a":1}}})",
           R"({"pod":{"a":1})",
           R"({"pod")",
           R"({"pod":)",
           R"({"nodenames":["a)",
           // Found by fuzz_extender_args: a NUL after a number ends a slice's parse early.
           std::string_view("{\"pod\":2222E-4\0\0}", 17),
           std::string_view("{\"x\":1\0,\"nodenames\":[\"a\"]}", 26),
           R"({"x":1x,"nodenames":["a"]})",
       }) {
    ExpectSameAsDocument(body);
  }
}

TEST(ExtenderArgsTest, NamesStayValidAfterMoves) {
  std::string body = R"({"nodenames":[)";
  for (int i = 0; i < 2000; ++i)
    body += (i ? ",\"" : "\"") + std::string("node-") + std::to_string(i) + "\"";
  body += "]}";
  Result<ExtenderArgs> args = ParseExtenderArgs(body);
  ASSERT_TRUE(args.ok());
  ExtenderArgs moved = std::move(*args);
  body.assign(body.size(), 'x');  // the views do not point into the body
  ASSERT_EQ(moved.names.size(), 2000u);
  EXPECT_EQ(moved.names[0], "node-0");
  EXPECT_EQ(moved.names[1999], "node-1999");
}

// What a real kube-scheduler sends: the Go field names of its ExtenderArgs, which have no JSON
// tags. Go's decoder (HAMi's) matches member names without regard to case; so do we, on both the
// fast path and the escaped-key path.
TEST(ExtenderArgsTest, MemberNamesMatchWithoutRegardToCase) {
  for (std::string_view body : std::initializer_list<std::string_view>{
           R"({"Pod":{"metadata":{"name":"p"}},"Nodes":null,"NodeNames":["n1","n2"]})",
           R"({"POD":{"metadata":{"name":"p"}},"NODENAMES":["n1","n2"]})",
           R"({"\u0050od":{"metadata":{"name":"p"}},"NodeNames":["n1","n2"]})"}) {
    SCOPED_TRACE(std::string(body));
    Result<ExtenderArgs> args = ParseExtenderArgs(body);
    ASSERT_TRUE(args.ok()) << args.status().ToString();
    EXPECT_EQ(args->pod, Json::parse(R"({"metadata":{"name":"p"}})"));
    EXPECT_TRUE(args->has_names);
    EXPECT_EQ(args->names, (std::vector<std::string_view>{"n1", "n2"}));
  }
  // Not the same name in another case: left alone.
  Result<ExtenderArgs> other = ParseExtenderArgs(R"({"Pods":{},"NodeName":["n1"]})");
  ASSERT_TRUE(other.ok());
  EXPECT_TRUE(other->pod.is_null());
  EXPECT_FALSE(other->has_names);
}

}  // namespace
}  // namespace hami::extender
