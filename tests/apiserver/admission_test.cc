// Mutating admission: the simulated API server calls a real HTTPS webhook (our own HttpServer
// with a generated certificate) and applies its JSONPatch.
#include "sim/apiserver/admission.h"

#include <atomic>
#include <condition_variable>
#include <mutex>

#include "common/base64.h"
#include "gtest/gtest.h"
#include "net/http_server.h"
#include "net/tls.h"
#include "test_support.h"

namespace hami::sim {
namespace {

using nlohmann::json;
using testing::Client;
using testing::PodJson;
using testing::Reply;

constexpr char kPods[] = "/api/v1/namespaces/default/pods";
constexpr char kWebhooks[] = "/apis/admissionregistration.k8s.io/v1/mutatingwebhookconfigurations";

class AdmissionTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto pem = net::GenerateSelfSignedCertificate("webhook", {"localhost"}, {"127.0.0.1"});
    ASSERT_TRUE(pem.ok());
    ca_pem_ = pem->cert_pem;
    net::HttpServerOptions opts;
    opts.worker_threads = 8;
    opts.keep_alive_timeout = std::chrono::seconds(1);
    opts.certificate = net::CertificateSource::FromPem(*pem).value();
    webhook_ = net::HttpServer::Create(opts).value();
    webhook_->Handle(
        "POST", "/mutate", [this](const net::HttpRequest& req, net::HttpResponse& res) {
          ++calls_;
          json review = json::parse(req.body, nullptr, false);
          {
            std::lock_guard<std::mutex> lock(review_mu_);
            last_review_ = review;
          }
          json patch = json::array(
              {{{"op", "add"}, {"path", "/metadata/annotations"}, {"value", json::object()}},
               {{"op", "add"},
                {"path", "/metadata/annotations/hami.io~1webhook"},
                {"value", "seen"}},
               {{"op", "replace"}, {"path", "/spec/schedulerName"}, {"value", "hami-scheduler"}}});
          json answer = {{"apiVersion", review["apiVersion"]},
                         {"kind", "AdmissionReview"},
                         {"response",
                          {{"uid", review["request"]["uid"]},
                           {"allowed", true},
                           {"patchType", "JSONPatch"},
                           {"patch", Base64Encode(patch.dump())}}}};
          res.SetJson(200, answer.dump());
        });
    webhook_->Handle("POST", "/deny", [](const net::HttpRequest& req, net::HttpResponse& res) {
      json review = json::parse(req.body, nullptr, false);
      json answer = {
          {"apiVersion", "admission.k8s.io/v1"},
          {"kind", "AdmissionReview"},
          {"response",
           {{"uid", review["request"]["uid"]},
            {"allowed", false},
            {"status", {{"code", 403}, {"message", "privileged pods are not allowed"}}}}}};
      res.SetJson(200, answer.dump());
    });
    webhook_->Handle("POST", "/garbage", [](const net::HttpRequest&, net::HttpResponse& res) {
      res.SetJson(200, "{\"response\": 12");
    });
    webhook_->Handle("POST", "/slow", [this](const net::HttpRequest&, net::HttpResponse& res) {
      std::unique_lock<std::mutex> lock(mu_);
      released_cv_.wait(lock, [this] { return released_; });
      res.SetJson(200, "{}");
    });
    port_ = webhook_->Start().value();
    api_ = ApiServer::Start({}).value();
    client_ = std::make_unique<Client>(*api_);
  }

  void TearDown() override {
    {
      std::lock_guard<std::mutex> lock(mu_);
      released_ = true;
    }
    released_cv_.notify_all();
    client_.reset();
    api_->Stop();
    webhook_->Stop();
  }

  json Config(const std::string& name, const std::string& path, const std::string& policy,
              json extra = json::object()) {
    json hook = {{"name", name + ".hami.io"},
                 {"clientConfig",
                  {{"url", "https://127.0.0.1:" + std::to_string(port_) + path},
                   {"caBundle", Base64Encode(ca_pem_)}}},
                 {"rules",
                  {{{"operations", {"CREATE"}},
                    {"apiGroups", {""}},
                    {"apiVersions", {"v1"}},
                    {"resources", {"pods"}}}}},
                 {"failurePolicy", policy},
                 {"sideEffects", "None"},
                 {"admissionReviewVersions", {"v1"}}};
    hook.update(extra);
    return {{"apiVersion", "admissionregistration.k8s.io/v1"},
            {"kind", "MutatingWebhookConfiguration"},
            {"metadata", {{"name", name}}},
            {"webhooks", {hook}}};
  }
  void Register(const json& config) { ASSERT_EQ(client_->Post(kWebhooks, config).status, 201); }

  std::string ca_pem_;
  std::unique_ptr<net::HttpServer> webhook_;
  int port_ = 0;
  std::unique_ptr<ApiServer> api_;
  std::unique_ptr<Client> client_;
  std::atomic<int> calls_{0};
  // The last review the /mutate handler saw: written on the webhook server's thread.
  json LastReview() {
    std::lock_guard<std::mutex> lock(review_mu_);
    return last_review_;
  }
  std::mutex review_mu_;
  json last_review_;  // guarded by review_mu_
  std::mutex mu_;
  std::condition_variable released_cv_;
  bool released_ = false;
};

TEST_F(AdmissionTest, PodCreateIsPatchedByTheWebhook) {
  Register(Config("hami", "/mutate", "Fail"));
  Reply r = client_->Post(kPods, PodJson("gpu"));
  ASSERT_EQ(r.status, 201) << r.raw;
  EXPECT_EQ(r.body["metadata"]["annotations"]["hami.io/webhook"], "seen");
  EXPECT_EQ(r.body["spec"]["schedulerName"], "hami-scheduler");
  EXPECT_EQ(calls_.load(), 1);
  json review = LastReview();
  EXPECT_EQ(review["apiVersion"], "admission.k8s.io/v1");
  EXPECT_EQ(review["request"]["operation"], "CREATE");
  EXPECT_EQ(review["request"]["kind"]["kind"], "Pod");
  EXPECT_EQ(review["request"]["resource"]["resource"], "pods");
  EXPECT_EQ(review["request"]["namespace"], "default");
  EXPECT_EQ(review["request"]["object"]["metadata"]["name"], "gpu");
  // The stored object carries the mutation.
  EXPECT_EQ(client_->Get(std::string(kPods) + "/gpu").body["spec"]["schedulerName"],
            "hami-scheduler");
  // Other resources are not sent to a pods webhook.
  client_->Post("/api/v1/namespaces/default/configmaps", {{"metadata", {{"name", "c"}}}});
  EXPECT_EQ(calls_.load(), 1);
}

TEST_F(AdmissionTest, ObjectSelectorLimitsWhichPodsAreSent) {
  Register(Config("hami", "/mutate", "Fail",
                  {{"objectSelector", {{"matchLabels", {{"gpu", "true"}}}}}}));
  EXPECT_EQ(client_->Post(kPods, PodJson("cpu-only")).body["spec"]["schedulerName"],
            "default-scheduler");
  EXPECT_EQ(calls_.load(), 0);
  EXPECT_EQ(client_->Post(kPods, PodJson("gpu", {{"gpu", "true"}})).body["spec"]["schedulerName"],
            "hami-scheduler");
  EXPECT_EQ(calls_.load(), 1);
}

TEST_F(AdmissionTest, DenialIsReturnedToTheClient) {
  Register(Config("deny", "/deny", "Ignore"));  // a denial is final whatever the policy
  Reply r = client_->Post(kPods, PodJson("p"));
  EXPECT_EQ(r.status, 403) << r.raw;
  EXPECT_EQ(r.body["kind"], "Status");
  EXPECT_NE(r.body["message"].get<std::string>().find("privileged pods are not allowed"),
            std::string::npos);
  EXPECT_EQ(client_->Get(std::string(kPods) + "/p").status, 404);
}

TEST_F(AdmissionTest, FailurePolicyFailAndIgnore) {
  // Unreachable webhook (nothing listens on the api server's /mutate path over TLS).
  json unreachable = Config("down", "/mutate", "Ignore");
  unreachable["webhooks"][0]["clientConfig"]["url"] =
      "https://127.0.0.1:" + std::to_string(api_->port()) + "/mutate";
  Register(unreachable);
  EXPECT_EQ(client_->Post(kPods, PodJson("ignored")).status, 201);

  Register(Config("broken", "/garbage", "Fail"));
  Reply r = client_->Post(kPods, PodJson("failed"));
  EXPECT_EQ(r.status, 500) << r.raw;
  EXPECT_NE(r.raw.find("failed calling webhook"), std::string::npos);
  EXPECT_EQ(client_->Get("/healthz").status, 200);
}

TEST_F(AdmissionTest, WrongCaBundleFailsTheCall) {
  json config = Config("hami", "/mutate", "Fail");
  auto other = net::GenerateSelfSignedCertificate("other", {}, {"127.0.0.1"});
  config["webhooks"][0]["clientConfig"]["caBundle"] = Base64Encode(other->cert_pem);
  Register(config);
  EXPECT_EQ(client_->Post(kPods, PodJson("p")).status, 500);
  EXPECT_EQ(calls_.load(), 0);
}

TEST_F(AdmissionTest, TimeoutSecondsIsHonoured) {
  Register(Config("slow", "/slow", "Fail", {{"timeoutSeconds", 1}}));
  auto start = std::chrono::steady_clock::now();
  Reply r = client_->Post(kPods, PodJson("p"));
  EXPECT_EQ(r.status, 500) << r.raw;
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(10));
}

}  // namespace
}  // namespace hami::sim
