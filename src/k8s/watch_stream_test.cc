#include "k8s/watch_stream.h"

#include <gtest/gtest.h>

#include "k8s/object.h"

namespace hami::k8s {
namespace {

std::vector<std::string> FeedAll(WatchStreamParser& p, const std::vector<std::string>& chunks,
                                 Status* status) {
  std::vector<std::string> out;
  for (const std::string& c : chunks) {
    *status = p.Feed(c, [&](WatchEvent ev) {
      out.push_back(std::string(WatchEventTypeName(ev.type)) + ":" + Name(*ev.object));
      return true;
    });
    if (!status->ok()) break;
  }
  return out;
}

TEST(WatchStreamParserTest, ByteByByteEqualsWhole) {
  std::string stream =
      "{\"type\":\"ADDED\",\"object\":{\"metadata\":{\"name\":\"a\"}}}\r\n"
      "\n"
      "{\"type\":\"MODIFIED\",\"object\":{\"metadata\":{\"name\":\"b\"}}}\n"
      "{\"type\":\"DELETED\",\"object\":{\"metadata\":{\"name\":\"c\"}}}\n"
      "{\"type\":\"BOOKMARK\",\"object\":{\"metadata\":{\"resourceVersion\":\"9\"}}}\n"
      "{\"type\":\"ADDED\",\"object\":{\"metadata\":{\"name\":\"partial\"";
  std::vector<std::string> bytes;
  for (char c : stream) bytes.emplace_back(1, c);
  WatchStreamParser a, b;
  Status sa, sb;
  auto whole = FeedAll(a, {stream}, &sa);
  auto split = FeedAll(b, bytes, &sb);
  ASSERT_TRUE(sa.ok());
  ASSERT_TRUE(sb.ok());
  EXPECT_EQ(whole, split);
  EXPECT_EQ(whole, (std::vector<std::string>{"ADDED:a", "MODIFIED:b", "DELETED:c", "BOOKMARK:"}));
  EXPECT_GT(a.buffered(), 0u);  // the unterminated last line waits for its newline
  Status s2;
  auto rest = FeedAll(a, {"}}}\n"}, &s2);
  EXPECT_EQ(rest, (std::vector<std::string>{"ADDED:partial"}));
  EXPECT_EQ(a.buffered(), 0u);
}

TEST(WatchStreamParserTest, RejectsBadEvents) {
  const char* bad[] = {"nope\n", "[1]\n", "{\"type\":1,\"object\":{}}\n",
                       "{\"type\":\"ADDED\",\"object\":3}\n",
                       "{\"type\":\"WHATEVER\",\"object\":{}}\n"};
  for (const char* line : bad) {
    WatchStreamParser p;
    Status s = p.Feed(line, [](WatchEvent) { return true; });
    EXPECT_EQ(s.code(), StatusCode::kDataLoss) << line;
  }
}

TEST(WatchStreamParserTest, ErrorEventCarriesStatus) {
  Result<WatchEvent> ev = WatchStreamParser::ParseLine(
      R"({"type":"ERROR","object":{"kind":"Status","code":410,"reason":"Expired"}})");
  ASSERT_TRUE(ev.ok());
  EXPECT_EQ(ev->type, WatchEvent::Type::kError);
  EXPECT_EQ(GetInt(*ev->object, "/code"), 410);
}

}  // namespace
}  // namespace hami::k8s
