#include "device/volcano_vgpu.h"

#include <gtest/gtest.h>

namespace hami::device {
namespace {

constexpr char kUuidA[] = "GPU-3d9f2a4e-1b6c-4d0e-9f1a-7c2b8e5d4a10";
constexpr char kUuidB[] = "GPU-cb12e8f0-5a3d-4b7c-8e2f-1d9a6c4b3e21";

DeviceInfo Gpu(const char* uuid, uint32_t index, const char* type = "NVIDIA-Tesla T4") {
  DeviceInfo d;
  d.id = uuid;
  d.index = index;
  d.count = 10;
  d.devmem = 15360;
  d.type = type;
  d.health = true;
  d.mode = std::string(kModeHamiCore);
  return d;
}

ContainerDevice Dev(const char* uuid, int32_t mem, int32_t cores) {
  ContainerDevice d;
  d.uuid = uuid;
  d.type = "NVIDIA";
  d.mem_mib = mem;
  d.cores = cores;
  return d;
}

void ExpectError(const Status& s, const std::string& fragment) {
  ASSERT_FALSE(s.ok()) << "expected an error containing " << fragment;
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument) << s.ToString();
  EXPECT_NE(s.message().find(fragment), std::string::npos) << s.message();
}

// ---- node registration ----

TEST(VolcanoNodeRegister, EncodesReferenceExample) {
  const std::string golden = std::string(kUuidA) + ",10,15360,NVIDIA-Tesla T4,true,hami-core:" +
                             kUuidB + ",10,15360,NVIDIA-Tesla T4,true,hami-core:";
  Result<std::string> enc = EncodeVolcanoNodeDevices({Gpu(kUuidA, 0), Gpu(kUuidB, 1)});
  ASSERT_TRUE(enc.ok()) << enc.status().ToString();
  EXPECT_EQ(*enc, golden);

  Result<std::vector<DeviceInfo>> dec = DecodeVolcanoNodeDevices(golden);
  ASSERT_TRUE(dec.ok()) << dec.status().ToString();
  EXPECT_EQ(*dec, (std::vector<DeviceInfo>{Gpu(kUuidA, 0), Gpu(kUuidB, 1)}));
  EXPECT_EQ(VolcanoNodeMode(*dec), kModeHamiCore);
}

TEST(VolcanoNodeRegister, ModelNamesKeepSpacesAndHealthAndModeRoundTrip) {
  DeviceInfo d = Gpu(kUuidA, 0, "NVIDIA-NVIDIA A100-SXM4-80GB");
  d.devmem = 81920;
  d.health = false;
  d.mode = std::string(kModeMig);
  const char* golden =
      "GPU-3d9f2a4e-1b6c-4d0e-9f1a-7c2b8e5d4a10,10,81920,NVIDIA-NVIDIA A100-SXM4-80GB,false,mig:";
  EXPECT_EQ(*EncodeVolcanoNodeDevices({d}), golden);
  Result<std::vector<DeviceInfo>> dec = DecodeVolcanoNodeDevices(golden);
  ASSERT_TRUE(dec.ok()) << dec.status().ToString();
  EXPECT_EQ(*dec, std::vector<DeviceInfo>{d});
  EXPECT_EQ(VolcanoNodeMode(*dec), kModeMig);
}

TEST(VolcanoNodeRegister, EncoderIgnoresFieldsOutsideTheFormat) {
  DeviceInfo d = Gpu(kUuidA, 7);
  d.devcore = 300;
  d.numa = 1;
  Result<std::vector<DeviceInfo>> back = DecodeVolcanoNodeDevices(*EncodeVolcanoNodeDevices({d}));
  ASSERT_TRUE(back.ok());
  // Index is the position on the wire; devcore and numa are not carried.
  EXPECT_EQ((*back)[0].index, 0u);
  EXPECT_EQ((*back)[0].devcore, 0);
  EXPECT_EQ((*back)[0].numa, 0);
}

TEST(VolcanoNodeRegister, NodeModeIsTheLastRecords) {
  DeviceInfo mig = Gpu(kUuidB, 1);
  mig.mode = "mig";
  EXPECT_EQ(VolcanoNodeMode({Gpu(kUuidA, 0), mig}), kModeMig);
  EXPECT_EQ(VolcanoNodeMode({mig, Gpu(kUuidA, 1)}), kModeHamiCore);
  DeviceInfo mps = Gpu(kUuidA, 0);
  mps.mode = "mps";  // Volcano has no MPS mode
  EXPECT_EQ(VolcanoNodeMode({mps}), kModeHamiCore);
  EXPECT_EQ(VolcanoNodeMode({}), kModeHamiCore);
}

TEST(VolcanoNodeRegister, DecoderLeniencyMatchesTheScheduler) {
  // Pieces without ',' are skipped, the final ':' is optional, extra fields are ignored.
  Result<std::vector<DeviceInfo>> dec =
      DecodeVolcanoNodeDevices("junk:GPU-a,2,100,NVIDIA-T4,true,hami-core,extra::GPU-b,2,100,"
                               "NVIDIA-T4,TRUE,hami-core");
  ASSERT_TRUE(dec.ok()) << dec.status().ToString();
  ASSERT_EQ(dec->size(), 2u);
  EXPECT_EQ((*dec)[0].id, "GPU-a");
  EXPECT_EQ((*dec)[1].id, "GPU-b");
  EXPECT_EQ((*dec)[1].index, 1u);
  EXPECT_TRUE((*dec)[1].health);
}

TEST(VolcanoNodeRegister, FiveFieldRecordNamesTheOldAgent) {
  Result<std::vector<DeviceInfo>> dec =
      DecodeVolcanoNodeDevices("GPU-a,10,15360,NVIDIA-Tesla T4,true:");
  ExpectError(dec.status(), "got 5 fields");
  ExpectError(dec.status(), "agents up to v1.9.x");
}

TEST(VolcanoNodeRegister, RejectsMalformedValues) {
  const char* cases[][2] = {
      {"", "missing ':'"},
      {"GPU-a,10,15360,NVIDIA-T4,true,hami-core", "missing ':'"},
      {":::", "no device record"},
      {"GPU-a,10:", "got 2 fields"},
      {"GPU-a,-1,100,NVIDIA-T4,true,hami-core:", "count \"-1\""},
      {"GPU-a,x,100,NVIDIA-T4,true,hami-core:", "count \"x\": not an integer"},
      {"GPU-a,1,2147483648,NVIDIA-T4,true,hami-core:", "devmem \"2147483648\": out of range"},
      {"GPU-a,1,100,NVIDIA-T4,healthy,hami-core:", "health \"healthy\": not a boolean"},
      {"GPU-a,1,100,,true,hami-core:", "empty device type"},
      {"GPU-a,1,100,NVIDIA-T4,true,:", "empty mode"},
      {",1,100,NVIDIA-T4,true,hami-core:", "empty device id"},
      {"GPU-a,1,100,NVIDIA-T4,true,hami-core:GPU-a,1,100,NVIDIA-T4,true,hami-core:",
       "duplicate device id"},
      {"GPU-a;b,1,100,NVIDIA-T4,true,hami-core:", "must not contain"},
      {"GPU-a,1,100,NVIDIA-\xff,true,hami-core:", "UTF-8"},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(c[0]);
    ExpectError(DecodeVolcanoNodeDevices(c[0]).status(), c[1]);
  }
}

TEST(VolcanoNodeRegister, EncoderRefusesWhatCannotBeReadBack) {
  ExpectError(EncodeVolcanoNodeDevices({}).status(), "no devices");
  DeviceInfo comma = Gpu(kUuidA, 0, "NVIDIA-A,B");
  ExpectError(EncodeVolcanoNodeDevices({comma}).status(), "must not contain ',' or ':'");
  DeviceInfo colon = Gpu(kUuidA, 0);
  colon.mode = "hami:core";
  ExpectError(EncodeVolcanoNodeDevices({colon}).status(), "must not contain ',' or ':'");
  DeviceInfo no_mode = Gpu(kUuidA, 0);
  no_mode.mode.clear();
  ExpectError(EncodeVolcanoNodeDevices({no_mode}).status(), "empty mode");
  DeviceInfo negative = Gpu(kUuidA, 0);
  negative.devmem = -1;
  ExpectError(EncodeVolcanoNodeDevices({negative}).status(), "devmem must not be negative");
  ExpectError(EncodeVolcanoNodeDevices({Gpu(kUuidA, 0), Gpu(kUuidA, 1)}).status(),
              "duplicate device id");
}

// ---- handshake ----

TEST(VolcanoHandshake, ReportAndOldSchedulerStamps) {
  EXPECT_EQ(EncodeVolcanoHandshakeReported({2024, 5, 13, 8, 42, 42}),
            "Reported 2024-05-13 08:42:42 +0000 UTC");
  EXPECT_FALSE(VolcanoHandshakeAwaitsReport(""));
  EXPECT_FALSE(VolcanoHandshakeAwaitsReport("Reported 2024-05-13 08:42:42.36 +0000 UTC m=+0.11"));
  EXPECT_TRUE(VolcanoHandshakeAwaitsReport("Requesting_2024.05.13 08:42:42"));
  EXPECT_TRUE(VolcanoHandshakeAwaitsReport("Deleted_2024.05.13 08:43:50"));
}

// ---- node lock ----

TEST(VolcanoNodeLock, ReferenceValueRoundTrips) {
  const char* golden = "2026-08-20T10:07:21+08:00";
  Result<Timestamp> t = DecodeVolcanoNodeLock(golden);
  ASSERT_TRUE(t.ok()) << t.status().ToString();
  EXPECT_EQ(t->utc_offset_seconds, 8 * 3600);
  EXPECT_EQ(EncodeVolcanoNodeLock(*t), golden);
  EXPECT_EQ(kVolcanoNodeLockAnnotation, "hamivgpu");
}

TEST(VolcanoNodeLock, HamiOwnerSuffixIsNotVolcanos) {
  ExpectError(DecodeVolcanoNodeLock("2026-08-20T10:07:21Z,default,pod").status(), "node lock");
  ExpectError(DecodeVolcanoNodeLock("").status(), "node lock");
  ExpectError(DecodeVolcanoNodeLock("yesterday").status(), "node lock");
}

TEST(VolcanoNodeLock, ExpiresAfterFiveMinutes) {
  Timestamp t = *DecodeVolcanoNodeLock("2026-08-20T02:07:21Z");
  EXPECT_FALSE(VolcanoNodeLockExpired(t, t.unix_seconds));
  EXPECT_FALSE(VolcanoNodeLockExpired(t, t.unix_seconds + 300));
  EXPECT_TRUE(VolcanoNodeLockExpired(t, t.unix_seconds + 301));
  EXPECT_FALSE(VolcanoNodeLockExpired(t, t.unix_seconds - 1000));  // a lock from the future
  Timestamp far{INT64_MIN, 0, 0};
  EXPECT_TRUE(VolcanoNodeLockExpired(far, INT64_MAX));
}

// ---- pod annotations ----

constexpr char kTwoContainers[] = "GPU-a,NVIDIA,3000,50:GPU-b,NVIDIA,3000,50:;GPU-c,NVIDIA,8000,0:";

TEST(VolcanoPodDevices, DecodesReferenceExample) {
  Result<PodSingleDevice> pod = DecodeVolcanoPodDevices(kTwoContainers);
  ASSERT_TRUE(pod.ok()) << pod.status().ToString();
  EXPECT_EQ(*pod, (PodSingleDevice{{Dev("GPU-a", 3000, 50), Dev("GPU-b", 3000, 50)},
                                   {Dev("GPU-c", 8000, 0)}}));
  EXPECT_EQ(EncodeVolcanoPodDevices(*pod), kTwoContainers);
}

TEST(VolcanoPodDevices, ServedEntriesStayInPlace) {
  PodSingleDevice pod = *DecodeVolcanoPodDevices(kTwoContainers);
  pod[0].clear();
  EXPECT_EQ(EncodeVolcanoPodDevices(pod), ";GPU-c,NVIDIA,8000,0:");
  pod[1].clear();
  EXPECT_EQ(EncodeVolcanoPodDevices(pod), ";");
  EXPECT_EQ(DecodeVolcanoPodDevices(";")->size(), 2u);
  // Unlike HAMi's list, a trailing ';' is a (served) last entry, and "" is one served entry.
  Result<PodSingleDevice> last_served = DecodeVolcanoPodDevices("GPU-a,NVIDIA,1,0:;");
  ASSERT_TRUE(last_served.ok());
  EXPECT_EQ(last_served->size(), 2u);
  EXPECT_TRUE((*last_served)[1].empty());
  EXPECT_EQ(*DecodeVolcanoPodDevices(""), PodSingleDevice{{}});
  EXPECT_EQ(EncodeVolcanoPodDevices({{}}), "");
}

TEST(VolcanoPodDevices, MigDeviceNamesPassAsUuids) {
  Result<PodSingleDevice> pod = DecodeVolcanoPodDevices("GPU-a[group0-2],NVIDIA,10240,0:");
  ASSERT_TRUE(pod.ok()) << pod.status().ToString();
  EXPECT_EQ((*pod)[0][0].uuid, "GPU-a[group0-2]");
}

TEST(VolcanoPodDevices, RejectsMalformedEntries) {
  const char* cases[][2] = {
      // Upstream's agent indexed the fourth field without a length check.
      {"GPU-a,NVIDIA,3000:", "entry 0: device 0: expected UUID,TYPE,MEM,CORES"},
      {"GPU-a,NVIDIA,3000,50:;GPU-b,NVIDIA,x,0:", "entry 1: device 0: memory \"x\""},
      {"GPU-a,NVIDIA,3000,-5:", "cores \"-5\""},
      {",NVIDIA,1,1:", "empty device UUID"},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(c[0]);
    ExpectError(DecodeVolcanoPodDevices(c[0]).status(), c[1]);
  }
}

TEST(VolcanoTime, ParsesLikeGoParseUint) {
  EXPECT_EQ(ParseVolcanoTime("1716889362"), 1716889362u);
  EXPECT_EQ(ParseVolcanoTime("18446744073709551615"), kVolcanoVgpuTimeDone);
  EXPECT_EQ(FormatVolcanoTime(kVolcanoVgpuTimeDone), "18446744073709551615");
  EXPECT_EQ(ParseVolcanoTime("0"), 0u);
  for (const char* bad : {"", "18446744073709551616", "99999999999999999999999", "-1", "+1",
                          "1.5", " 1", "1e3", "0x10"}) {
    EXPECT_FALSE(ParseVolcanoTime(bad).has_value()) << bad;
  }
}

TEST(VolcanoAssignment, ReadsEveryKey) {
  Annotations a = {
      {"volcano.sh/vgpu-node", "node-1"},
      {"volcano.sh/vgpu-time", "1716889362"},
      {"volcano.sh/vgpu-ids-new", kTwoContainers},
      {"volcano.sh/devices-to-allocate", ";GPU-c,NVIDIA,8000,0:"},
      {"volcano.sh/bind-phase", "allocating"},
      {"volcano.sh/bind-time", "1716889362"},
  };
  Result<VolcanoAssignment> r = DecodeVolcanoAssignment(a);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->node, "node-1");
  EXPECT_EQ(r->time, 1716889362u);
  EXPECT_EQ(r->bind_phase, kVolcanoBindPhaseAllocating);
  ASSERT_TRUE(r->ids.has_value());
  EXPECT_EQ(r->ids->size(), 2u);
  ASSERT_TRUE(r->to_allocate.has_value());
  EXPECT_EQ(*r->to_allocate, (PodSingleDevice{{}, {Dev("GPU-c", 8000, 0)}}));
}

TEST(VolcanoAssignment, AbsentKeysAndUnreadableTime) {
  Result<VolcanoAssignment> none = DecodeVolcanoAssignment({});
  ASSERT_TRUE(none.ok());
  EXPECT_EQ(*none, VolcanoAssignment{});
  EXPECT_EQ(none->TimeOrLast(), UINT64_MAX);

  Result<VolcanoAssignment> bad_time = DecodeVolcanoAssignment({{"volcano.sh/vgpu-time", "soon"}});
  ASSERT_TRUE(bad_time.ok());
  EXPECT_FALSE(bad_time->time.has_value());
}

TEST(VolcanoAssignment, MalformedListNamesItsKey) {
  ExpectError(DecodeVolcanoAssignment({{"volcano.sh/devices-to-allocate", "GPU-a,NVIDIA,1:"}})
                  .status(),
              "volcano.sh/devices-to-allocate: entry 0");
  ExpectError(DecodeVolcanoAssignment({{"volcano.sh/vgpu-ids-new", "GPU-a,NVIDIA,1,x:"}}).status(),
              "volcano.sh/vgpu-ids-new: entry 0");
}

}  // namespace
}  // namespace hami::device
