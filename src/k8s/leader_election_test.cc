#include "k8s/leader_election.h"

#include <gtest/gtest.h>

#include "k8s/api_error.h"
#include "k8s/test_util.h"

namespace hami::k8s {
namespace {

using std::chrono::seconds;
using testing::FakeClient;

constexpr char kLeasePath[] = "/apis/coordination.k8s.io/v1/namespaces/kube-system/leases/sched";

HttpResponse J(int status, std::string body) {
  return FakeTransport::Json(status, std::move(body));
}

std::string Lease(const std::string& holder, const std::string& renew, const std::string& rv,
                  int transitions = 0) {
  Object l = {
      {"apiVersion", "coordination.k8s.io/v1"},
      {"kind", "Lease"},
      {"metadata", {{"name", "sched"}, {"namespace", "kube-system"}, {"resourceVersion", rv}}},
      {"spec",
       {{"holderIdentity", holder},
        {"leaseDurationSeconds", 15},
        {"renewTime", renew},
        {"leaseTransitions", transitions}}}};
  return l.dump();
}

LeaderElectionConfig Config() { return {.ns = "kube-system", .name = "sched", .identity = "me"}; }

TEST(LeaderElectionTest, CreatesMissingLease) {
  FakeClient fc;
  LeaderElector le(*fc.client, Config());
  fc.fake->Push("GET", kLeasePath, J(404, R"({"reason":"NotFound"})"));
  fc.fake->Push("POST", "/apis/coordination.k8s.io/v1/namespaces/kube-system/leases",
                J(201, Lease("me", "t", "1")));
  Result<bool> r = le.TryAcquireOrRenew();
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_TRUE(*r);
  Object body = *ParseObject(fc.fake->requests().at(1).body);
  EXPECT_EQ(body["spec"]["holderIdentity"], "me");
  EXPECT_EQ(body["spec"]["leaseDurationSeconds"], 15);
  EXPECT_EQ(body["spec"]["renewTime"], "2024-01-01T00:00:00.000000Z");
  EXPECT_EQ(body["spec"]["acquireTime"], "2024-01-01T00:00:00.000000Z");
  EXPECT_EQ(le.Holder(), "me");
}

TEST(LeaderElectionTest, LosingTheCreateRaceIsNotAnError) {
  FakeClient fc;
  LeaderElector le(*fc.client, Config());
  fc.fake->Push("GET", kLeasePath, J(404, "{}"));
  fc.fake->Push("POST", "/leases", J(409, R"({"reason":"AlreadyExists"})"));
  Result<bool> r = le.TryAcquireOrRenew();
  ASSERT_TRUE(r.ok());
  EXPECT_FALSE(*r);
}

TEST(LeaderElectionTest, RespectsLiveHolderThenTakesOverAfterExpiry) {
  FakeClient fc;
  std::vector<std::string> leaders;
  LeaderElector le(*fc.client, Config(),
                   {.on_new_leader = [&](const std::string& id) { leaders.push_back(id); }});
  // Another holder, renewTime unchanged across observations.
  fc.fake->Push("GET", kLeasePath, J(200, Lease("other", "T1", "5", 2)));
  EXPECT_FALSE(*le.TryAcquireOrRenew());
  EXPECT_EQ(le.Holder(), "other");
  fc.clock.Advance(seconds(10));
  fc.fake->Push("GET", kLeasePath, J(200, Lease("other", "T1", "5", 2)));
  EXPECT_FALSE(*le.TryAcquireOrRenew());  // 10 s < 15 s since we first saw T1
  fc.clock.Advance(seconds(6));
  fc.fake->Push("GET", kLeasePath, J(200, Lease("other", "T1", "5", 2)));
  fc.fake->Push("PUT", kLeasePath, J(200, Lease("me", "T2", "6", 3)));
  EXPECT_TRUE(*le.TryAcquireOrRenew());
  Object put = *ParseObject(fc.fake->requests().back().body);
  EXPECT_EQ(put["metadata"]["resourceVersion"], "5");  // optimistic precondition
  EXPECT_EQ(put["spec"]["holderIdentity"], "me");
  EXPECT_EQ(put["spec"]["leaseTransitions"], 3);
  EXPECT_EQ(put["spec"]["acquireTime"], put["spec"]["renewTime"]);
  EXPECT_EQ(leaders, (std::vector<std::string>{"other", "me"}));
}

TEST(LeaderElectionTest, RenewalByOtherHolderResetsExpiry) {
  FakeClient fc;
  LeaderElector le(*fc.client, Config());
  fc.fake->Push("GET", kLeasePath, J(200, Lease("other", "T1", "5")));
  EXPECT_FALSE(*le.TryAcquireOrRenew());
  fc.clock.Advance(seconds(14));
  fc.fake->Push("GET", kLeasePath, J(200, Lease("other", "T2", "6")));  // they renewed
  EXPECT_FALSE(*le.TryAcquireOrRenew());
  fc.clock.Advance(seconds(14));
  fc.fake->Push("GET", kLeasePath, J(200, Lease("other", "T2", "6")));
  EXPECT_FALSE(*le.TryAcquireOrRenew());  // only 14 s since T2 was first seen
  EXPECT_EQ(fc.fake->pending(), 0u);
}

TEST(LeaderElectionTest, ConflictOnTakeoverMeansSomeoneElseWon) {
  FakeClient fc;
  LeaderElector le(*fc.client, Config());
  fc.fake->Push("GET", kLeasePath, J(200, Lease("", "", "5")));  // released lease
  fc.fake->Push("PUT", kLeasePath, J(409, R"({"reason":"Conflict"})"));
  Result<bool> r = le.TryAcquireOrRenew();
  ASSERT_TRUE(r.ok());
  EXPECT_FALSE(*r);
}

TEST(LeaderElectionTest, ServerErrorsAreReported) {
  FakeClient fc(FakeClient::DefaultConfig(), RetryPolicy{.max_attempts = 1});
  LeaderElector le(*fc.client, Config());
  fc.fake->Push("GET", kLeasePath, J(403, R"({"reason":"Forbidden"})"));
  EXPECT_EQ(le.TryAcquireOrRenew().status().code(), StatusCode::kPermissionDenied);
}

TEST(LeaderElectionTest, RunLeadsUntilRenewDeadlineThenStops) {
  FakeClient fc(FakeClient::DefaultConfig(), RetryPolicy{.max_attempts = 1});
  int started = 0, stopped = 0;
  LeaderElector le(
      *fc.client, Config(),
      {.on_started_leading = [&] { ++started; }, .on_stopped_leading = [&] { ++stopped; }});
  // Acquire, one successful renewal, then the API server fails for longer than renew_deadline.
  fc.fake->Push("GET", kLeasePath, J(404, "{}"));
  fc.fake->Push("POST", "/leases", J(201, Lease("me", "A", "1")));
  fc.fake->Push("GET", kLeasePath, J(200, Lease("me", "A", "1")));
  fc.fake->Push("PUT", kLeasePath, J(200, Lease("me", "B", "2")));
  for (int i = 0; i < 5; ++i) fc.fake->Push("GET", kLeasePath, J(500, "{}"));
  Cancellation never;
  le.Run(never);
  EXPECT_EQ(started, 1);
  EXPECT_EQ(stopped, 1);
  EXPECT_FALSE(le.IsLeader());
  // Renewals every retry_period (2 s); the failures started at t=4 s and lasted 10 s.
  EXPECT_EQ(fc.clock.total_slept(), seconds(2 + 2 * 5));
  EXPECT_EQ(fc.fake->pending(), 0u);
}

TEST(LeaderElectionTest, CancelReleasesTheLease) {
  FakeClient fc;
  Cancellation stop;
  int stopped = 0;
  LeaderElector le(
      *fc.client, Config(),
      {.on_started_leading = [&] { stop.Cancel(); }, .on_stopped_leading = [&] { ++stopped; }});
  fc.fake->Push("GET", kLeasePath, J(404, "{}"));
  fc.fake->Push("POST", "/leases", J(201, Lease("me", "A", "1")));
  fc.fake->Push("GET", kLeasePath, J(200, Lease("me", "A", "1")));
  fc.fake->Push("PUT", kLeasePath, J(200, Lease("", "B", "2")));
  le.Run(stop);
  EXPECT_EQ(stopped, 1);
  EXPECT_FALSE(le.IsLeader());
  Object put = *ParseObject(fc.fake->requests().back().body);
  EXPECT_EQ(put["spec"]["holderIdentity"], "");
  EXPECT_EQ(put["spec"]["leaseDurationSeconds"], 1);
  EXPECT_EQ(put["metadata"]["resourceVersion"], "1");
  EXPECT_EQ(fc.fake->pending(), 0u);
}

TEST(LeaderElectionTest, RunOnCancelledTokenDoesNothing) {
  FakeClient fc;
  LeaderElector le(*fc.client, Config());
  Cancellation done;
  done.Cancel();
  le.Run(done);
  EXPECT_TRUE(fc.fake->requests().empty());
  EXPECT_TRUE(le.Release().ok());  // not leading: nothing to release
}

TEST(LeaderElectionTest, FollowingReadsTheHolderAndJudgesExpiryByObservationWithoutWriting) {
  FakeClient fc;
  LeaderElector le(*fc.client, Config());
  fc.fake->Push("GET", kLeasePath, J(200, Lease("other_1", "A", "1")));
  Result<LeaderElector::Observation> o = le.Follow();
  ASSERT_TRUE(o.ok()) << o.status().ToString();
  EXPECT_EQ(o->holder, "other_1");
  EXPECT_TRUE(o->fresh);
  // Unchanged for the whole lease duration (15 s) counts as fresh; a second more does not.
  fc.clock.Advance(seconds(15));
  fc.fake->Push("GET", kLeasePath, J(200, Lease("other_1", "A", "1")));
  EXPECT_TRUE(le.Follow()->fresh);
  fc.clock.Advance(seconds(1));
  fc.fake->Push("GET", kLeasePath, J(200, Lease("other_1", "A", "1")));
  EXPECT_FALSE(le.Follow()->fresh);
  // A renewal seen restarts the count; a timestamp far in the past does not matter.
  fc.fake->Push("GET", kLeasePath, J(200, Lease("other_1", "1999-01-01T00:00:00Z", "2")));
  EXPECT_TRUE(le.Follow()->fresh);
  EXPECT_EQ(le.Holder(), "other_1");
  fc.fake->Push("GET", kLeasePath, J(404, R"({"reason":"NotFound"})"));
  Result<LeaderElector::Observation> gone = le.Follow();
  EXPECT_TRUE(IsNotFound(gone.status())) << gone.status().ToString();
  for (const HttpRequest& r : fc.fake->requests()) EXPECT_EQ(r.method, "GET") << r.url;
  EXPECT_FALSE(le.IsLeader());
}

}  // namespace
}  // namespace hami::k8s
