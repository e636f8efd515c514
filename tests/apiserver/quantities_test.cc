// Canonical quantities: the spellings kube-apiserver writes back (resource.Quantity's documented
// canonical form), and the fields of each kind that hold them.
#include "sim/apiserver/quantities.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

namespace hami::sim {
namespace {

using json = nlohmann::json;

TEST(CanonicalQuantity, TheLargestSuffixWithoutFractionalDigits) {
  const std::pair<const char*, const char*> cases[] = {
      {"1", "1"},
      {"3000", "3k"},
      {"8192", "8192"},
      {"1000000", "1M"},
      {"1500", "1500"},
      {"1.5k", "1500"},
      {"1000m", "1"},
      {"1500m", "1500m"},
      {"0.5", "500m"},
      {"0.0001", "100u"},
      {"1n", "1n"},
      {"0.1n", "1n"},
      {"1.0", "1"},
      {"+5", "5"},
      {"-2", "-2"},
      {"0", "0"},
      {"0Gi", "0"},
      {"1.5Gi", "1536Mi"},
      {"1024Mi", "1Gi"},
      {"16Gi", "16Gi"},
      {"1Ki", "1Ki"},
      {"1023Ki", "1023Ki"},
      {"0.5Ki", "512"},
      {"0.1Ki", "102400m"},
      {"1e3", "1e3"},
      {"1000e0", "1e3"},
      {"1E3", "1e3"},
      {"12e6", "12e6"},
      {"1e-3", "1e-3"},
      {"2G", "2G"},
      {"2000M", "2G"},
      {".5", "500m"},
      {"007", "7"},
      {"5.", "5"},
      // Long values keep every digit (the canonical spelling must read back the same).
      {"1505555550535.05555550532Gi", "1616577962964834728109615538504n"},
  };
  for (const auto& [in, want] : cases) {
    Result<std::string> got = CanonicalQuantity(in);
    ASSERT_TRUE(got.ok()) << in << ": " << got.status().message();
    EXPECT_EQ(*got, want) << in;
  }
}

TEST(CanonicalQuantity, GarbageIsRefusedWithTheRealServersRule) {
  for (const char* in : {"", "abc", "1..2", "1x", "Gi", "1e", "--1", "1 Gi", ".", "1e+", "1Gi2",
                         "99999999999999999999999999999999999999", "1e99", "1e36"}) {
    Result<std::string> got = CanonicalQuantity(in);
    EXPECT_FALSE(got.ok()) << in << " -> " << (got.ok() ? *got : "");
  }
  EXPECT_NE(CanonicalQuantity("abc").status().message().find("regular expression"),
            std::string::npos);
}

TEST(CanonicalizeQuantities, EveryQuantityFieldOfAPodBecomesAString) {
  json pod = {
      {"spec",
       {{"containers",
         {{{"name", "a"},
           {"resources",
            {{"limits", {{"nvidia.com/gpu", 1}, {"nvidia.com/gpumem", 3000}, {"cpu", 0.5}}},
             {"requests", {{"memory", "1.5Gi"}}}}}},
          {{"name", "b"}}}},
        {"initContainers", {{{"name", "i"}, {"resources", {{"limits", {{"cpu", "1000m"}}}}}}}},
        {"overhead", {{"cpu", 0.25}}},
        {"volumes", {{{"name", "v"}, {"emptyDir", {{"sizeLimit", 1024}}}}}},
        // Not quantities: left alone.
        {"priority", 1000},
        {"terminationGracePeriodSeconds", 30}}},
      {"status", {{"containerStatuses", {{{"name", "a"}, {"allocatedResources", {{"cpu", 2}}}}}}}}};
  ASSERT_TRUE(CanonicalizeQuantities("Pod", pod).ok());
  const json& limits = pod["spec"]["containers"][0]["resources"]["limits"];
  EXPECT_EQ(limits["nvidia.com/gpu"], "1");
  EXPECT_EQ(limits["nvidia.com/gpumem"], "3k");
  EXPECT_EQ(limits["cpu"], "500m");
  EXPECT_EQ(pod["spec"]["containers"][0]["resources"]["requests"]["memory"], "1536Mi");
  EXPECT_EQ(pod["spec"]["initContainers"][0]["resources"]["limits"]["cpu"], "1");
  EXPECT_EQ(pod["spec"]["overhead"]["cpu"], "250m");
  EXPECT_EQ(pod["spec"]["volumes"][0]["emptyDir"]["sizeLimit"], "1024");
  EXPECT_EQ(pod["status"]["containerStatuses"][0]["allocatedResources"]["cpu"], "2");
  EXPECT_EQ(pod["spec"]["priority"], 1000);
  EXPECT_EQ(pod["spec"]["terminationGracePeriodSeconds"], 30);
}

TEST(CanonicalizeQuantities, TemplatesNodesAndQuotas) {
  json deploy = {
      {"spec",
       {{"replicas", 2},
        {"template",
         {{"spec",
           {{"containers",
             {{{"name", "c"}, {"resources", {{"limits", {{"nvidia.com/gpu", 2}}}}}}}}}}}}}}};
  ASSERT_TRUE(CanonicalizeQuantities("Deployment", deploy).ok());
  EXPECT_EQ(
      deploy["spec"]["template"]["spec"]["containers"][0]["resources"]["limits"]["nvidia.com/gpu"],
      "2");
  EXPECT_EQ(deploy["spec"]["replicas"], 2);
  json node = {{"status",
                {{"capacity", {{"nvidia.com/gpu", 10}, {"memory", "65536Ki"}}},
                 {"allocatable", {{"pods", 110}}}}}};
  ASSERT_TRUE(CanonicalizeQuantities("Node", node).ok());
  EXPECT_EQ(node["status"]["capacity"]["nvidia.com/gpu"], "10");
  EXPECT_EQ(node["status"]["capacity"]["memory"], "64Mi");
  EXPECT_EQ(node["status"]["allocatable"]["pods"], "110");
  json quota = {{"spec", {{"hard", {{"limits.nvidia.com/gpumem", 20000}}}}},
                {"status", {{"used", {{"limits.nvidia.com/gpumem", 0}}}}}};
  ASSERT_TRUE(CanonicalizeQuantities("ResourceQuota", quota).ok());
  EXPECT_EQ(quota["spec"]["hard"]["limits.nvidia.com/gpumem"], "20k");
  EXPECT_EQ(quota["status"]["used"]["limits.nvidia.com/gpumem"], "0");
  json lease = {{"spec", {{"leaseDurationSeconds", 15}}}};
  ASSERT_TRUE(CanonicalizeQuantities("Lease", lease).ok());
  EXPECT_EQ(lease["spec"]["leaseDurationSeconds"], 15);
}

TEST(CanonicalizeQuantities, AnInvalidQuantityNamesItsField) {
  json pod = {
      {"spec",
       {{"containers",
         {{{"name", "a"}, {"resources", {{"limits", {{"nvidia.com/gpumem", "lots"}}}}}}}}}}};
  Status s = CanonicalizeQuantities("Pod", pod);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("spec.containers[0].resources.limits[nvidia.com/gpumem]"),
            std::string::npos)
      << s.message();
  json bad_type = {{"status", {{"capacity", {{"cpu", json::object()}}}}}};
  EXPECT_FALSE(CanonicalizeQuantities("Node", bad_type).ok());
}

}  // namespace
}  // namespace hami::sim
