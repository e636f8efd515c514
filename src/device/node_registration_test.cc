#include "device/node_registration.h"

#include <gtest/gtest.h>

namespace hami::device {
namespace {

// Upstream's documented JSON registration example.
constexpr char kUpstreamJson[] =
    R"([{"id":"GPU-aaa","count":10,"devmem":32768,"devcore":100,"type":"NVIDIA-Tesla V100-PCIE-32GB","mode":"hami-core","health":true},)"
    R"({"id":"GPU-bbb","index":1,"count":10,"devmem":32768,"devcore":100,"type":"NVIDIA-Tesla V100-PCIE-32GB","numa":1,"mode":"hami-core","health":true}])";

// Seed 003: a real legacy (v2.4) registration of a node with two A40s.
constexpr char kSeed003Legacy[] =
    "GPU-03f69c50-207a-2038-9b45-23cac89cb67d,10,46068,100,NVIDIA-NVIDIA A40,0,true:"
    "GPU-1afede84-4e70-2174-49af-f07ebb94d1ae,10,46068,100,NVIDIA-NVIDIA A40,0,true:";

TEST(NodeRegistrationJson, DecodesUpstreamExample) {
  Result<std::vector<DeviceInfo>> r = DecodeNodeDevicesJson(kUpstreamJson);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  ASSERT_EQ(r->size(), 2u);
  const DeviceInfo& a = (*r)[0];
  EXPECT_EQ(a.id, "GPU-aaa");
  EXPECT_EQ(a.index, 0u);
  EXPECT_EQ(a.count, 10);
  EXPECT_EQ(a.devmem, 32768);
  EXPECT_EQ(a.devcore, 100);
  EXPECT_EQ(a.type, "NVIDIA-Tesla V100-PCIE-32GB");
  EXPECT_EQ(a.numa, 0);
  EXPECT_EQ(a.mode, "hami-core");
  EXPECT_TRUE(a.health);
  EXPECT_EQ((*r)[1].index, 1u);
  EXPECT_EQ((*r)[1].numa, 1);
}

TEST(NodeRegistrationJson, ReencodesUpstreamExampleByteForByte) {
  Result<std::vector<DeviceInfo>> r = DecodeNodeDevicesJson(kUpstreamJson);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(EncodeNodeDevicesJson(*r), kUpstreamJson);
}

TEST(NodeRegistrationJson, OmitsZeroFieldsAndFalseHealth) {
  DeviceInfo d;
  d.id = "GPU-x";
  EXPECT_EQ(EncodeNodeDevicesJson({d}), R"([{"id":"GPU-x"}])");
  EXPECT_EQ(EncodeNodeDevicesJson({}), "[]");
  d.numa = -1;
  d.vendor = "NVIDIA";  // never encoded
  EXPECT_EQ(EncodeNodeDevicesJson({d}), R"([{"id":"GPU-x","numa":-1}])");
}

TEST(NodeRegistrationJson, MissingHealthMeansUnhealthy) {
  Result<std::vector<DeviceInfo>> r = DecodeNodeDevicesJson(R"([{"id":"GPU-x","count":4}])");
  ASSERT_TRUE(r.ok());
  EXPECT_FALSE((*r)[0].health);
  EXPECT_EQ((*r)[0].mode, "");
}

TEST(NodeRegistrationJson, MigProfilesRoundTrip) {
  constexpr char kMig[] =
      R"([{"id":"GPU-m","count":7,"devmem":40960,"devcore":100,"type":"NVIDIA-A100-SXM4-40GB","mode":"mig",)"
      R"("migProfiles":[{"name":"1g.5gb","memoryMB":4864,"core":14,"sliceCount":1,"placements":[{"start":0,"size":1},{"start":6,"size":1}]},)"
      R"({"name":"7g.40gb","memoryMB":40192,"core":100,"sliceCount":7,"placements":[{"start":0,"size":8}]}],"health":true}])";
  Result<std::vector<DeviceInfo>> r = DecodeNodeDevicesJson(kMig);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  const DeviceInfo& d = (*r)[0];
  EXPECT_TRUE(d.IsMig());
  ASSERT_EQ(d.mig_profiles.size(), 2u);
  EXPECT_EQ(d.mig_profiles[0].name, "1g.5gb");
  EXPECT_EQ(d.mig_profiles[0].memory_mib, 4864);
  EXPECT_EQ(d.mig_profiles[0].slice_count, 1u);
  EXPECT_EQ(d.mig_profiles[0].placements[1], (MigPlacement{6, 1}));
  EXPECT_EQ(EncodeNodeDevicesJson(*r), kMig);
}

TEST(NodeRegistrationJson, GoDecodingSemantics) {
  // Unknown keys ignored, member names case-insensitive, null leaves the zero value, the
  // defined-but-unused upstream keys are accepted.
  Result<std::vector<DeviceInfo>> r = DecodeNodeDevicesJson(
      R"([{"ID":"GPU-x","Count":2,"numa":null,"devicevendor":"NVIDIA","custominfo":{"a":1},)"
      R"("migtemplate":[],"future":[1,2],"health":true}])");
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ((*r)[0].id, "GPU-x");
  EXPECT_EQ((*r)[0].count, 2);
  EXPECT_EQ((*r)[0].numa, 0);
  EXPECT_TRUE(DecodeNodeDevicesJson("null")->empty());
  EXPECT_TRUE(DecodeNodeDevicesJson(" [ ] ")->empty());
}

TEST(NodeRegistrationJson, GoStringEscaping) {
  DeviceInfo d;
  d.id = "GPU-1";
  d.type = std::string("a<b>&\"\\\n\t\x01\b\f") + "\xe2\x80\xa8" + "\xff" + "\xc3\xa9";
  EXPECT_EQ(EncodeNodeDevicesJson({d}),
            R"([{"id":"GPU-1","type":"a\u003cb\u003e\u0026\"\\\n\t\u0001\b\f\u2028\ufffdé"}])");
  // What we write, we read back (the invalid byte becomes U+FFFD, as in Go).
  Result<std::vector<DeviceInfo>> r = DecodeNodeDevicesJson(EncodeNodeDevicesJson({d}));
  ASSERT_TRUE(r.ok());
  EXPECT_EQ((*r)[0].type.substr(0, 4), "a<b>");
}

TEST(NodeRegistrationJson, RejectsMalformedInput) {
  const char* cases[][2] = {
      {"[{", "not valid JSON"},
      {R"({"id":"x"})", "expected a JSON array"},
      {R"([1])", "devices[0]: expected an object"},
      {R"([null])", "devices[0]: expected an object"},
      {R"([{"id":"GPU-a","count":"10"}])", "devices[0].count: expected an integer"},
      {R"([{"id":"GPU-a","count":1.5}])", "devices[0].count: expected an integer"},
      {R"([{"id":"GPU-a","count":2147483648}])", "out of range"},
      {R"([{"id":"GPU-a","index":-1}])", "devices[0].index"},
      {R"([{"id":"GPU-a","health":"true"}])", "devices[0].health: expected true or false"},
      {R"([{"id":"GPU-a","migProfiles":{}}])", "migProfiles: expected an array"},
      {R"([{"id":"GPU-a","migProfiles":[{"placements":[{"start":-1}]}]}])", "placements[0].start"},
      {R"([{"count":1}])", "empty device id"},
      {R"([{"id":"GPU-a"},{"id":"GPU-a"}])", "duplicate device id"},
      {R"([{"id":"GPU-a","devmem":-5}])", "devmem must not be negative"},
      {R"([{"id":"GPU-a:1"}])", "must not contain"},
  };
  for (const auto& c : cases) {
    Result<std::vector<DeviceInfo>> r = DecodeNodeDevicesJson(c[0]);
    ASSERT_FALSE(r.ok()) << c[0];
    EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
    EXPECT_NE(r.status().message().find(c[1]), std::string::npos)
        << c[0] << " -> " << r.status().message();
  }
}

TEST(NodeRegistrationLegacy, DecodesSeed003) {
  Result<std::vector<DeviceInfo>> r = DecodeNodeDevicesLegacy(kSeed003Legacy);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  ASSERT_EQ(r->size(), 2u);
  EXPECT_EQ((*r)[0].id, "GPU-03f69c50-207a-2038-9b45-23cac89cb67d");
  EXPECT_EQ((*r)[1].id, "GPU-1afede84-4e70-2174-49af-f07ebb94d1ae");
  for (const DeviceInfo& d : *r) {
    EXPECT_EQ(d.count, 10);
    EXPECT_EQ(d.devmem, 46068);
    EXPECT_EQ(d.devcore, 100);
    EXPECT_EQ(d.type, "NVIDIA-NVIDIA A40");
    EXPECT_EQ(d.numa, 0);
    EXPECT_TRUE(d.health);
    EXPECT_EQ(d.index, 0u);
    EXPECT_EQ(d.mode, "hami-core");
  }
  Result<std::string> seven = EncodeNodeDevicesLegacy(*r, LegacyFields::kSeven);
  ASSERT_TRUE(seven.ok());
  EXPECT_EQ(*seven, kSeed003Legacy);
  // Either-format entry point.
  EXPECT_EQ(*DecodeNodeDevices(kSeed003Legacy), *r);
}

TEST(NodeRegistrationLegacy, NineFieldsRoundTrip) {
  constexpr char kNine[] =
      "GPU-aaa,10,32768,100,NVIDIA-Tesla V100-PCIE-32GB,0,true,0,hami-core:"
      "GPU-bbb,10,32768,100,NVIDIA-Tesla V100-PCIE-32GB,1,false,1,mig:";
  Result<std::vector<DeviceInfo>> r = DecodeNodeDevicesLegacy(kNine);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ((*r)[1].index, 1u);
  EXPECT_EQ((*r)[1].mode, "mig");
  EXPECT_FALSE((*r)[1].health);
  EXPECT_EQ(*EncodeNodeDevicesLegacy(*r), kNine);
  // The same devices as JSON and back.
  EXPECT_EQ(*DecodeNodeDevices(EncodeNodeDevicesJson(*r)), *r);
}

TEST(NodeRegistrationLegacy, GoParsingRules) {
  // Empty segments are skipped; ParseBool accepts 1/t/T/TRUE/True; ints accept a '+'.
  Result<std::vector<DeviceInfo>> r =
      DecodeNodeDevicesLegacy("::GPU-a,+4,100,100,T4,0,T::GPU-b,4,100,100,T4,-1,0,2,mps:");
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  ASSERT_EQ(r->size(), 2u);
  EXPECT_EQ((*r)[0].count, 4);
  EXPECT_TRUE((*r)[0].health);
  EXPECT_EQ((*r)[1].numa, -1);
  EXPECT_FALSE((*r)[1].health);
  EXPECT_EQ((*r)[1].index, 2u);
}

TEST(NodeRegistrationLegacy, RejectsMalformedInput) {
  const char* cases[][2] = {
      {"", "missing ':'"},
      {"GPU-a,1,2,3,T4,0,true", "missing ':'"},
      {"GPU-a,1,2,3,T4,0,true,0:", "expected 7 or 9"},
      {"GPU-a:", "expected 7 or 9"},
      {"GPU-a,x,2,3,T4,0,true:", "count \"x\": not an integer"},
      {"GPU-a,1,2147483648,3,T4,0,true:", "devmem \"2147483648\": out of range"},
      {"GPU-a,1,2,3,T4,0,yes:", "health \"yes\": not a boolean"},
      {"GPU-a,1,2,3,T4,0,true,-1,hami-core:", "index \"-1\": out of range"},
      {"GPU-a,1,2,3,T4, 0,true:", "numa \" 0\""},
      {",1,2,3,T4,0,true:", "empty device id"},
      {"GPU-a,-1,2,3,T4,0,true:", "count must not be negative"},
      {"GPU-\xff,1,2,3,T4,0,true:", "must be valid UTF-8"},
  };
  for (const auto& c : cases) {
    Result<std::vector<DeviceInfo>> r = DecodeNodeDevicesLegacy(c[0]);
    ASSERT_FALSE(r.ok()) << c[0];
    EXPECT_NE(r.status().message().find(c[1]), std::string::npos)
        << c[0] << " -> " << r.status().message();
  }
}

TEST(NodeRegistrationLegacy, EncoderRefusesWhatCannotRoundTrip) {
  DeviceInfo d;
  d.id = "GPU-a";
  d.type = "weird,type";
  d.mode = "hami-core";
  EXPECT_FALSE(EncodeNodeDevicesLegacy({d}).ok());
  d.type = "T4";
  d.index = 3;
  EXPECT_FALSE(EncodeNodeDevicesLegacy({d}, LegacyFields::kSeven).ok());
  EXPECT_EQ(*EncodeNodeDevicesLegacy({d}), "GPU-a,0,0,0,T4,0,false,3,hami-core:");
  d.mig_profiles.push_back({"1g.5gb", 1, 1, 1, {}});
  EXPECT_FALSE(EncodeNodeDevicesLegacy({d}).ok());
}

// Vendor plugins' extras (Ascend's NetworkID, Vastai's AIC and DeviceStrategy) are kept as
// text; nested values are skipped; custominfo that is not an object is refused.
TEST(NodeRegistrationJson, CustomInfoIsKeptAsText) {
  Result<std::vector<DeviceInfo>> r = DecodeNodeDevicesJson(
      R"([{"id":"NPU-0","count":4,"devmem":65536,"health":true,)"
      R"("custominfo":{"NetworkID":3,"AIC":"card-1","ok":true,"nested":{"a":1},"x":null}}])");
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  const std::map<std::string, std::string> want = {
      {"NetworkID", "3"}, {"AIC", "card-1"}, {"ok", "true"}};
  EXPECT_EQ((*r)[0].custom, want);
  EXPECT_EQ((*r)[0].group, "");
  // Not written back (upstream's plugins do not read it from the scheduler).
  EXPECT_EQ(EncodeNodeDevicesJson(*r).find("custominfo"), std::string::npos);
  Result<std::vector<DeviceInfo>> bad = DecodeNodeDevicesJson(R"([{"id":"NPU-0","custominfo":5}])");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("custominfo"), std::string::npos) << bad.status().message();
}

}  // namespace
}  // namespace hami::device
