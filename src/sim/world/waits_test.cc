// The event-driven waits (waits.h) against the simulated API server in this process and a
// temporary directory. Every change a wait must notice is made from inside the wait (its
// callback), so the tests need no sleeps and no timing luck.
#include "sim/world/waits.h"

#include <gtest/gtest.h>
#include <stdlib.h>

#include <filesystem>
#include <fstream>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "k8s/api_error.h"
#include "k8s/config.h"
#include "sim/apiserver/api_server.h"

namespace hami::sim {
namespace {

using std::chrono::milliseconds;
using std::chrono::seconds;

class WaitsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string tmpl = (std::filesystem::temp_directory_path() / "hami_waits_XXXXXX").string();
    ASSERT_NE(::mkdtemp(tmpl.data()), nullptr);
    dir_ = tmpl;
    Result<std::unique_ptr<ApiServer>> server = ApiServer::Start(ServerOptions());
    ASSERT_TRUE(server.ok()) << server.status().ToString();
    server_ = std::move(*server);
    Result<k8s::RestConfig> cfg = k8s::ParseKubeconfig(server_->Kubeconfig(), dir_);
    ASSERT_TRUE(cfg.ok()) << cfg.status().ToString();
    Result<std::unique_ptr<k8s::RestClient>> client = k8s::RestClient::Create(*cfg);
    ASSERT_TRUE(client.ok()) << client.status().ToString();
    client_ = std::move(*client);
  }
  virtual ApiServerOptions ServerOptions() const { return {}; }
  void TearDown() override {
    client_.reset();
    if (server_) server_->Stop();
    std::error_code ec;
    std::filesystem::remove_all(dir_, ec);
  }

  Status CreateMap(const std::string& name, const std::string& value) {
    k8s::Object cm = {{"apiVersion", "v1"},
                      {"kind", "ConfigMap"},
                      {"metadata", {{"name", name}}},
                      {"data", {{"v", value}}}};
    return client_->Create(k8s::kConfigMaps, "default", cm).status();
  }
  Status SetMap(const std::string& name, const std::string& value) {
    k8s::Object patch = {{"data", {{"v", value}}}};
    return client_
        ->Patch(k8s::kConfigMaps, "default", name, k8s::PatchType::kMerge, patch.dump())
        .status();
  }
  static std::string Value(const k8s::Object* cm) {
    return cm == nullptr ? "(none)" : k8s::GetString(*cm, "/data/v");
  }
  static SteadyTime In(milliseconds d) { return std::chrono::steady_clock::now() + d; }

  std::string dir_;
  std::unique_ptr<ApiServer> server_;
  std::unique_ptr<k8s::RestClient> client_;
};

// A server that keeps one event for resumption: two writes after a list put the list's revision
// out of reach, so the watch from it is answered 410 Gone.
class ShortHistoryWaitsTest : public WaitsTest {
 protected:
  ApiServerOptions ServerOptions() const override {
    ApiServerOptions options;
    options.history_window = 1;
    return options;
  }
};

TEST_F(WaitsTest, FollowResourceHandsOverTheListThenEveryEventInOrder) {
  ASSERT_TRUE(CreateMap("a", "1").ok());
  ASSERT_TRUE(CreateMap("b", "1").ok());
  std::set<std::string> listed;
  std::vector<std::string> events;
  FollowOptions options;
  options.deadline = In(seconds(30));
  Status s = FollowResource(
      *client_, k8s::kConfigMaps, "default", options,
      [&](const k8s::Object& list) {
        for (const k8s::Object& cm : list.at("items")) listed.insert(k8s::Name(cm));
        // Made after the list: each must come as an event, the deletion included.
        EXPECT_TRUE(SetMap("a", "2").ok());
        EXPECT_TRUE(CreateMap("c", "1").ok());
        EXPECT_TRUE(client_->Delete(k8s::kConfigMaps, "default", "b").ok());
        return false;
      },
      [&](const k8s::WatchEvent& ev) {
        if (ev.type == k8s::WatchEvent::Type::kBookmark) return false;
        events.push_back(std::string(k8s::WatchEventTypeName(ev.type)) + " " +
                         k8s::Name(*ev.object));
        return events.size() == 3;
      });
  ASSERT_TRUE(s.ok()) << s.ToString();
  EXPECT_EQ(listed, (std::set<std::string>{"a", "b"}));
  EXPECT_EQ(events, (std::vector<std::string>{"MODIFIED a", "ADDED c", "DELETED b"}));
}

TEST_F(ShortHistoryWaitsTest, GoneEndsAFollowWithoutRecoveryAndListsAgainWithIt) {
  ASSERT_TRUE(CreateMap("m", "0").ok());
  // Collects the value of each list, writing the map twice after the first; done at the second.
  auto follow = [&](Recovery recovery, std::vector<std::string>* lists) {
    FollowOptions options;
    options.deadline = In(seconds(30));
    options.recovery = recovery;
    return FollowResource(
        *client_, k8s::kConfigMaps, "default", options,
        [&](const k8s::Object& list) {
          lists->push_back(Value(&list.at("items").at(0)));
          if (lists->size() == 1) {
            EXPECT_TRUE(SetMap("m", lists->front() + "+1").ok());
            EXPECT_TRUE(SetMap("m", lists->front() + "+2").ok());
          }
          return lists->size() == 2;
        },
        [](const k8s::WatchEvent&) { return false; });
  };
  std::vector<std::string> lists;
  Status s = follow(Recovery::kNone, &lists);
  EXPECT_TRUE(k8s::IsGone(s)) << s.ToString();
  EXPECT_EQ(lists, (std::vector<std::string>{"0"}));

  lists.clear();
  s = follow(Recovery::kRelistOnGone, &lists);
  ASSERT_TRUE(s.ok()) << s.ToString();
  EXPECT_EQ(lists, (std::vector<std::string>{"0+2", "0+2+2"}));
}

TEST_F(WaitsTest, EveryStateFromTheListedOneOnIsHandedOverInOrder) {
  ASSERT_TRUE(CreateMap("m", "one").ok());
  std::vector<std::string> seen;
  Status s = WatchObject(
      *client_, k8s::kConfigMaps, "default", "m",
      [&](const k8s::Object* cm) {
        seen.push_back(Value(cm));
        if (seen.size() == 1) {  // changed after the list: the watch must carry both changes
          EXPECT_TRUE(SetMap("m", "two").ok());
          EXPECT_TRUE(SetMap("m", "three").ok());
        }
        return Value(cm) == "three";
      },
      In(seconds(30)));
  ASSERT_TRUE(s.ok()) << s.ToString();
  EXPECT_EQ(seen, (std::vector<std::string>{"one", "two", "three"}));
}

TEST_F(WaitsTest, AbsenceCreationAndDeletionAreStatesToo) {
  std::vector<std::string> seen;
  Status s = WatchObject(
      *client_, k8s::kConfigMaps, "default", "later",
      [&](const k8s::Object* cm) {
        seen.push_back(Value(cm));
        if (seen.size() == 1) {
          EXPECT_TRUE(CreateMap("later", "made").ok());
        }
        if (seen.size() == 2) {
          EXPECT_TRUE(client_->Delete(k8s::kConfigMaps, "default", "later").ok());
        }
        return seen.size() == 3;
      },
      In(seconds(30)));
  ASSERT_TRUE(s.ok()) << s.ToString();
  EXPECT_EQ(seen, (std::vector<std::string>{"(none)", "made", "(none)"}));
}

TEST_F(WaitsTest, OtherObjectsOfTheKindAreNotHandedOver) {
  ASSERT_TRUE(CreateMap("mine", "a").ok());
  std::vector<std::string> seen;
  Status s = WatchObject(
      *client_, k8s::kConfigMaps, "default", "mine",
      [&](const k8s::Object* cm) {
        seen.push_back(Value(cm));
        if (seen.size() == 1) {
          EXPECT_TRUE(CreateMap("other", "x").ok());
          EXPECT_TRUE(SetMap("mine", "b").ok());
        }
        return seen.size() == 2;
      },
      In(seconds(30)));
  ASSERT_TRUE(s.ok()) << s.ToString();
  EXPECT_EQ(seen, (std::vector<std::string>{"a", "b"}));
}

TEST_F(WaitsTest, WaitForObjectReturnsTheFirstStateThatHolds) {
  ASSERT_TRUE(CreateMap("m", "one").ok());
  int calls = 0;
  Result<k8s::Object> got = WaitForObject(
      *client_, k8s::kConfigMaps, "default", "m",
      [&](const k8s::Object& cm) {
        if (++calls == 1) {
          EXPECT_TRUE(SetMap("m", "two").ok());
        }
        return Value(&cm) == "two";
      },
      seconds(30));
  ASSERT_TRUE(got.ok()) << got.status().ToString();
  EXPECT_EQ(Value(&*got), "two");
}

TEST_F(WaitsTest, WaitForObjectTellsNeverThereFromNeverRight) {
  Result<k8s::Object> absent = WaitForObject(
      *client_, k8s::kConfigMaps, "default", "absent", [](const k8s::Object&) { return true; },
      milliseconds(200));
  EXPECT_EQ(absent.status().code(), StatusCode::kNotFound) << absent.status().ToString();

  ASSERT_TRUE(CreateMap("m", "wrong").ok());
  Result<k8s::Object> wrong = WaitForObject(
      *client_, k8s::kConfigMaps, "default", "m",
      [](const k8s::Object& cm) { return Value(&cm) == "right"; }, milliseconds(200));
  EXPECT_EQ(wrong.status().code(), StatusCode::kDeadlineExceeded) << wrong.status().ToString();
  EXPECT_NE(wrong.status().message().find("\"wrong\""), std::string::npos)
      << "names the last state: " << wrong.status().ToString();
}

TEST_F(WaitsTest, CancellationEndsTheWait) {
  ASSERT_TRUE(CreateMap("m", "one").ok());
  Cancellation cancel;
  Status s = WatchObject(
      *client_, k8s::kConfigMaps, "default", "m",
      [&](const k8s::Object*) {
        cancel.Cancel();
        return false;
      },
      In(seconds(30)), &cancel);
  EXPECT_EQ(s.code(), StatusCode::kCancelled) << s.ToString();
}

TEST_F(WaitsTest, FileTextIsAwaitedThroughItsDirectory) {
  const std::string path = dir_ + "/app.log";
  // Written by another thread, before or after the wait starts: the outcome is the same.
  std::thread writer([&] {
    std::ofstream(path) << "starting\n";
    std::ofstream(path, std::ios::app) << "ready\n";
  });
  Result<std::string> got = WaitForFileText(path, "ready", In(seconds(30)));
  writer.join();
  ASSERT_TRUE(got.ok()) << got.status().ToString();
  EXPECT_EQ(*got, "starting\nready\n");
}

TEST_F(WaitsTest, FileTextFailsAtTheDeadlineOrWithoutItsDirectory) {
  const std::string path = dir_ + "/app.log";
  std::ofstream(path) << "starting\n";
  Result<std::string> late = WaitForFileText(path, "ready", In(milliseconds(50)));
  EXPECT_EQ(late.status().code(), StatusCode::kDeadlineExceeded) << late.status().ToString();
  EXPECT_NE(late.status().message().find("starting"), std::string::npos)
      << late.status().ToString();
  Result<std::string> nowhere = WaitForFileText(dir_ + "/no/such/dir/f", "x", In(seconds(30)));
  EXPECT_EQ(nowhere.status().code(), StatusCode::kNotFound) << nowhere.status().ToString();
}

}  // namespace
}  // namespace hami::sim
