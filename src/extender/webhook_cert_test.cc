// The pure part of the self-managed webhook certificate: the X.509 helpers of net/tls.h and the
// renewal decisions of PlanWebhookCertificates, on an injected time.
#include "extender/webhook_cert.h"

#include <gtest/gtest.h>

#include <algorithm>

namespace hami::extender {
namespace {

using net::CertTime;
using std::chrono::hours;
using std::chrono::seconds;

// A fixed, recognisable "now" (2030-01-01T00:00:00Z): every certificate here is judged on it.
const CertTime kNow = std::chrono::system_clock::from_time_t(1893456000);

WebhookCertPolicy Policy() {
  WebhookCertPolicy p;
  SetServingNames("hami-scheduler", "hami-system", {}, p);
  return p;
}

bool Has(const std::vector<std::string>& v, const std::string& s) {
  return std::find(v.begin(), v.end(), s) != v.end();
}

size_t CountCertificates(const std::string& pem) {
  Result<std::vector<std::string>> certs = net::SplitCertificateBundle(pem);
  return certs.ok() ? certs->size() : 0;
}

TEST(WebhookCertTest, ServingNamesCoverTheServiceAndLoopback) {
  WebhookCertPolicy p;
  SetServingNames("hami-scheduler", "kube-system", {"webhook.example.com", "10.0.0.7", "::1"}, p);
  EXPECT_EQ(p.dns_names, (std::vector<std::string>{"hami-scheduler", "hami-scheduler.kube-system",
                                                   "hami-scheduler.kube-system.svc",
                                                   "hami-scheduler.kube-system.svc.cluster.local",
                                                   "localhost", "webhook.example.com"}));
  EXPECT_EQ(p.ip_addresses, (std::vector<std::string>{"127.0.0.1", "10.0.0.7", "::1"}));
  // Idempotent: a second call adds nothing.
  SetServingNames("hami-scheduler", "kube-system", {"10.0.0.7"}, p);
  EXPECT_EQ(p.dns_names.size(), 6u);
  EXPECT_EQ(p.ip_addresses.size(), 3u);
}

TEST(WebhookCertTest, PolicyDurationsMustLeaveRoomToRenew) {
  WebhookCertPolicy p = Policy();
  EXPECT_TRUE(ValidatePolicy(p).ok());
  p.renew_before = p.serving_validity;
  EXPECT_NE(ValidatePolicy(p).message().find("renewal window"), std::string::npos);
  p = Policy();
  p.ca_validity = p.serving_validity;
  EXPECT_NE(ValidatePolicy(p).message().find("twice"), std::string::npos);
  p = Policy();
  p.serving_validity = seconds(0);
  EXPECT_FALSE(ValidatePolicy(p).ok());
}

TEST(WebhookCertTest, CaAndServingCertificateChain) {
  net::CertificateSpec ca_spec{"test-ca", {}, {}, kNow - hours(1), kNow + hours(24 * 3650)};
  Result<net::CertificatePem> ca = net::GenerateCertificateAuthority(ca_spec);
  ASSERT_TRUE(ca.ok()) << ca.status().ToString();
  Result<net::CertificateInfo> ca_info = net::InspectCertificate(ca->cert_pem);
  ASSERT_TRUE(ca_info.ok());
  EXPECT_TRUE(ca_info->is_ca);
  EXPECT_EQ(ca_info->common_name, "test-ca");
  EXPECT_EQ(ca_info->not_after, kNow + hours(24 * 3650));

  net::CertificateSpec spec{
      "svc", {"svc", "svc.ns.svc"}, {"127.0.0.1", "::1"}, kNow, kNow + hours(24 * 365)};
  Result<net::CertificatePem> leaf = net::IssueServingCertificate(spec, *ca);
  ASSERT_TRUE(leaf.ok()) << leaf.status().ToString();
  Result<net::CertificateInfo> info = net::InspectCertificate(leaf->cert_pem);
  ASSERT_TRUE(info.ok());
  EXPECT_FALSE(info->is_ca);
  EXPECT_EQ(info->dns_names, spec.dns_names);
  EXPECT_EQ(info->ip_addresses, spec.ip_addresses);
  EXPECT_EQ(info->not_before, kNow);
  EXPECT_EQ(info->not_after, kNow + hours(24 * 365));
  EXPECT_TRUE(net::CheckKeyPair(*leaf).ok());
  EXPECT_FALSE(net::CheckKeyPair({leaf->cert_pem, ca->key_pem}).ok());

  // The CA's signature verifies; another CA's does not; neither before nor after the validity.
  EXPECT_TRUE(net::VerifyCertificate(leaf->cert_pem, ca->cert_pem, kNow + hours(1)).ok());
  Result<net::CertificatePem> other = net::GenerateCertificateAuthority(ca_spec);
  ASSERT_TRUE(other.ok());
  Status wrong = net::VerifyCertificate(leaf->cert_pem, other->cert_pem, kNow + hours(1));
  EXPECT_FALSE(wrong.ok());
  EXPECT_NE(wrong.message().find("does not verify"), std::string::npos) << wrong.ToString();
  // A bundle holding both CAs trusts it (the caBundle during a CA rollover).
  EXPECT_TRUE(
      net::VerifyCertificate(leaf->cert_pem, other->cert_pem + ca->cert_pem, kNow + hours(1)).ok());
  EXPECT_FALSE(net::VerifyCertificate(leaf->cert_pem, ca->cert_pem, kNow + hours(24 * 366)).ok());
  EXPECT_FALSE(net::VerifyCertificate(leaf->cert_pem, ca->cert_pem, kNow - hours(1)).ok());
  // A serving certificate cannot sign.
  EXPECT_FALSE(net::IssueServingCertificate(spec, *leaf).ok());
}

TEST(WebhookCertTest, ClientCertificateCarriesItsGroups) {
  net::CertificateSpec ca_spec{"test-ca", {}, {}, kNow - hours(1), kNow + hours(24 * 3650)};
  Result<net::CertificatePem> ca = net::GenerateCertificateAuthority(ca_spec);
  ASSERT_TRUE(ca.ok()) << ca.status().ToString();
  net::CertificateSpec spec{"admin", {}, {}, kNow, kNow + hours(24), {"system:masters", "ops"}};
  Result<net::CertificatePem> client = net::IssueClientCertificate(spec, *ca);
  ASSERT_TRUE(client.ok()) << client.status().ToString();
  Result<net::CertificateInfo> info = net::InspectCertificate(client->cert_pem);
  ASSERT_TRUE(info.ok());
  EXPECT_EQ(info->common_name, "admin");
  EXPECT_EQ(info->organizations, (std::vector<std::string>{"system:masters", "ops"}));
  EXPECT_FALSE(info->is_ca);
  EXPECT_TRUE(net::VerifyCertificate(client->cert_pem, ca->cert_pem, kNow + hours(1)).ok());
  EXPECT_FALSE(net::IssueClientCertificate(spec, *client).ok());  // a leaf cannot sign
}

TEST(WebhookCertTest, GarbageIsAnErrorNotACrash) {
  EXPECT_FALSE(net::InspectCertificate("").ok());
  EXPECT_FALSE(net::InspectCertificate("-----BEGIN CERTIFICATE-----\nAAAA\n").ok());
  EXPECT_FALSE(net::SplitCertificateBundle("hello").ok());
  EXPECT_FALSE(net::VerifyCertificate("x", "y", kNow).ok());
  EXPECT_FALSE(net::CheckKeyPair({"x", "y"}).ok());
}

TEST(WebhookCertTest, FirstPlanCreatesCaAndServingCertificate) {
  WebhookCertPolicy p = Policy();
  Result<WebhookCertPlan> plan = PlanWebhookCertificates(std::nullopt, p, kNow);
  ASSERT_TRUE(plan.ok()) << plan.status().ToString();
  EXPECT_TRUE(plan->changed);
  EXPECT_TRUE(plan->new_ca);
  EXPECT_EQ(CountCertificates(plan->bundle.ca_crt), 1u);
  EXPECT_EQ(plan->ca.not_after, kNow + p.ca_validity);
  EXPECT_EQ(plan->serving.not_after, kNow + p.serving_validity);
  EXPECT_TRUE(Has(plan->serving.dns_names, "hami-scheduler.hami-system.svc"));
  EXPECT_TRUE(Has(plan->serving.dns_names, "hami-scheduler.hami-system.svc.cluster.local"));
  EXPECT_TRUE(Has(plan->serving.ip_addresses, "127.0.0.1"));
  EXPECT_TRUE(net::VerifyCertificate(plan->bundle.tls_crt, plan->bundle.ca_crt, kNow).ok());
  EXPECT_TRUE(net::CheckKeyPair({plan->bundle.ca_crt, plan->bundle.ca_key}).ok());
  EXPECT_TRUE(net::CheckKeyPair({plan->bundle.tls_crt, plan->bundle.tls_key}).ok());

  // The same Secret a moment (and months) later needs nothing.
  Result<WebhookCertPlan> again = PlanWebhookCertificates(plan->bundle, p, kNow + hours(24 * 200));
  ASSERT_TRUE(again.ok());
  EXPECT_FALSE(again->changed) << again->reason;
  EXPECT_EQ(again->reason, "");
  EXPECT_EQ(again->bundle.tls_crt, plan->bundle.tls_crt);
}

TEST(WebhookCertTest, ServingCertificateRenewedWithAThirdOfItsLifetimeLeft) {
  WebhookCertPolicy p = Policy();
  p.serving_validity = seconds(30);
  p.ca_validity = hours(1);
  WebhookCertBundle b = PlanWebhookCertificates(std::nullopt, p, kNow)->bundle;
  EXPECT_FALSE(PlanWebhookCertificates(b, p, kNow + seconds(20))->changed);
  Result<WebhookCertPlan> due = PlanWebhookCertificates(b, p, kNow + seconds(21));
  ASSERT_TRUE(due.ok());
  EXPECT_TRUE(due->changed);
  EXPECT_FALSE(due->new_ca);
  EXPECT_NE(due->reason.find("less than a third of its lifetime"), std::string::npos)
      << due->reason;
  EXPECT_EQ(due->bundle.ca_crt, b.ca_crt);  // same CA, new leaf
  EXPECT_EQ(due->bundle.ca_key, b.ca_key);
  EXPECT_NE(due->bundle.tls_crt, b.tls_crt);
  EXPECT_EQ(due->serving.not_after, kNow + seconds(51));
  EXPECT_TRUE(net::VerifyCertificate(due->bundle.tls_crt, b.ca_crt, kNow + seconds(21)).ok());

  // An explicit window replaces the third.
  p.renew_before = seconds(5);
  EXPECT_FALSE(PlanWebhookCertificates(b, p, kNow + seconds(25))->changed);
  Result<WebhookCertPlan> window = PlanWebhookCertificates(b, p, kNow + seconds(26));
  EXPECT_TRUE(window->changed);
  EXPECT_NE(window->reason.find("renewal window of 5s"), std::string::npos) << window->reason;
  // Expired outright.
  EXPECT_NE(PlanWebhookCertificates(b, p, kNow + seconds(31))->reason.find("expired"),
            std::string::npos);
}

TEST(WebhookCertTest, ServingCertificateRenewedWhenItsNamesChange) {
  WebhookCertPolicy p = Policy();
  WebhookCertBundle b = PlanWebhookCertificates(std::nullopt, p, kNow)->bundle;
  WebhookCertPolicy moved;
  SetServingNames("hami-scheduler", "other-ns", {}, moved);
  Result<WebhookCertPlan> plan = PlanWebhookCertificates(b, moved, kNow + seconds(1));
  ASSERT_TRUE(plan.ok());
  EXPECT_TRUE(plan->changed);
  EXPECT_FALSE(plan->new_ca);
  EXPECT_NE(plan->reason.find("differ"), std::string::npos) << plan->reason;
  EXPECT_TRUE(Has(plan->serving.dns_names, "hami-scheduler.other-ns.svc"));
  EXPECT_FALSE(Has(plan->serving.dns_names, "hami-scheduler.hami-system.svc"));
}

TEST(WebhookCertTest, CaRolloverKeepsTheOldCaTrustedUntilItExpires) {
  WebhookCertPolicy p = Policy();
  p.ca_validity = seconds(90);
  p.serving_validity = seconds(30);
  WebhookCertBundle b = PlanWebhookCertificates(std::nullopt, p, kNow)->bundle;
  // At 59s the CA has 31s left: it still covers a 30s serving certificate.
  Result<WebhookCertPlan> before = PlanWebhookCertificates(b, p, kNow + seconds(59));
  EXPECT_FALSE(before->new_ca) << before->reason;
  b = before->bundle;
  // At 61s it has 29s (less than a third of 90s, and less than a serving validity) left.
  const CertTime roll = kNow + seconds(61);
  Result<WebhookCertPlan> plan = PlanWebhookCertificates(b, p, roll);
  ASSERT_TRUE(plan.ok());
  EXPECT_TRUE(plan->new_ca);
  EXPECT_NE(plan->reason.find("the CA expires"), std::string::npos) << plan->reason;
  ASSERT_EQ(CountCertificates(plan->bundle.ca_crt), 2u);
  std::vector<std::string> cas = net::SplitCertificateBundle(plan->bundle.ca_crt).value();
  EXPECT_NE(cas[0], b.ca_crt);  // the new CA signs from now on...
  EXPECT_EQ(cas[1], b.ca_crt);  // ...and the old one stays trusted
  EXPECT_TRUE(net::CheckKeyPair({cas[0], plan->bundle.ca_key}).ok());
  EXPECT_TRUE(net::VerifyCertificate(plan->bundle.tls_crt, cas[0], roll).ok());
  // A server still presenting the old leaf is trusted by the overlap bundle.
  EXPECT_TRUE(net::VerifyCertificate(b.tls_crt, plan->bundle.ca_crt, roll).ok());

  // Stable during the overlap...
  EXPECT_FALSE(PlanWebhookCertificates(plan->bundle, p, roll + seconds(10))->changed);
  // ...and once the old CA expired (at 90s) it is dropped; the new CA stays.
  Result<WebhookCertPlan> after = PlanWebhookCertificates(plan->bundle, p, kNow + seconds(90));
  ASSERT_TRUE(after.ok());
  EXPECT_TRUE(after->changed);
  EXPECT_FALSE(after->new_ca);
  EXPECT_NE(after->reason.find("dropped 1 expired CA"), std::string::npos) << after->reason;
  EXPECT_EQ(after->bundle.ca_crt, cas[0]);
  EXPECT_EQ(after->bundle.ca_key, plan->bundle.ca_key);
  EXPECT_TRUE(net::VerifyCertificate(after->bundle.tls_crt, cas[0], kNow + seconds(90)).ok());
}

TEST(WebhookCertTest, SecretsWithoutAUsableCaGetANewOne) {
  WebhookCertPolicy p = Policy();
  WebhookCertBundle good = PlanWebhookCertificates(std::nullopt, p, kNow)->bundle;
  // What kube-webhook-certgen leaves: a CA certificate without its key.
  WebhookCertBundle no_key = good;
  no_key.ca_key.clear();
  Result<WebhookCertPlan> plan = PlanWebhookCertificates(no_key, p, kNow);
  ASSERT_TRUE(plan.ok());
  EXPECT_TRUE(plan->new_ca);
  EXPECT_NE(plan->reason.find("no ca.key"), std::string::npos) << plan->reason;
  EXPECT_EQ(CountCertificates(plan->bundle.ca_crt), 1u);
  EXPECT_TRUE(net::VerifyCertificate(plan->bundle.tls_crt, plan->bundle.ca_crt, kNow).ok());

  // Garbage in every key: replaced, no crash.
  WebhookCertBundle junk{"junk", "junk", "junk", "junk"};
  plan = PlanWebhookCertificates(junk, p, kNow);
  ASSERT_TRUE(plan.ok());
  EXPECT_TRUE(plan->new_ca);
  EXPECT_TRUE(net::VerifyCertificate(plan->bundle.tls_crt, plan->bundle.ca_crt, kNow).ok());

  // A CA key that belongs to another certificate.
  WebhookCertBundle swapped = good;
  swapped.ca_key = good.tls_key;
  EXPECT_TRUE(PlanWebhookCertificates(swapped, p, kNow)->new_ca);

  // A serving pair that no longer matches (or was signed elsewhere) is reissued by the same CA.
  WebhookCertBundle bad_leaf = good;
  bad_leaf.tls_key = good.ca_key;
  plan = PlanWebhookCertificates(bad_leaf, p, kNow);
  EXPECT_FALSE(plan->new_ca);
  EXPECT_NE(plan->reason.find("tls.key"), std::string::npos) << plan->reason;
  WebhookCertBundle foreign = good;
  WebhookCertBundle other = PlanWebhookCertificates(std::nullopt, p, kNow)->bundle;
  foreign.tls_crt = other.tls_crt;
  foreign.tls_key = other.tls_key;
  plan = PlanWebhookCertificates(foreign, p, kNow);
  EXPECT_FALSE(plan->new_ca);
  EXPECT_NE(plan->reason.find("not signed by the current CA"), std::string::npos) << plan->reason;
  EXPECT_TRUE(net::VerifyCertificate(plan->bundle.tls_crt, good.ca_crt, kNow).ok());
}

}  // namespace
}  // namespace hami::extender
