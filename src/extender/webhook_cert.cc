#include "extender/webhook_cert.h"

#include <arpa/inet.h>

#include <algorithm>
#include <utility>

#include "common/base64.h"
#include "common/log.h"
#include "k8s/api_error.h"
#include "k8s/object.h"

namespace hami::extender {
namespace {

using net::CertificateInfo;
using net::CertificatePem;
using net::CertTime;
using std::chrono::seconds;

const k8s::Resource kSecrets{"v1", "secrets", true};
const k8s::Resource kMutatingWebhookConfigurations{"admissionregistration.k8s.io/v1",
                                                   "mutatingwebhookconfigurations", false};

// The canonical text of an IP address, or "" when `host` is not one.
std::string CanonicalIp(const std::string& host) {
  unsigned char buf[16];
  char text[INET6_ADDRSTRLEN] = {};
  for (int family : {AF_INET, AF_INET6}) {
    if (inet_pton(family, host.c_str(), buf) == 1 &&
        inet_ntop(family, buf, text, sizeof text) != nullptr) {
      return text;
    }
  }
  return "";
}

void AddUnique(std::vector<std::string>& list, const std::string& value) {
  if (!value.empty() && std::find(list.begin(), list.end(), value) == list.end()) {
    list.push_back(value);
  }
}

// "250ms", "90s", "5m", "3h", "400d": the largest unit that divides it, for log lines.
std::string ShortDuration(std::chrono::milliseconds d) {
  int64_t ms = d.count();
  if (ms == 0 || ms % 1000 != 0) return std::to_string(ms) + "ms";
  int64_t s = ms / 1000;
  if (s % 86400 == 0) return std::to_string(s / 86400) + "d";
  if (s % 3600 == 0) return std::to_string(s / 3600) + "h";
  if (s % 60 == 0) return std::to_string(s / 60) + "m";
  return std::to_string(s) + "s";
}

std::string When(CertTime t) { return k8s::FormatTime(t); }

// The webhook configuration as the Secret's owner: deleting the configuration (`helm uninstall`,
// `kubectl delete`) deletes the Secret after it, through the garbage collector. A namespaced
// object may have a cluster-scoped owner.
k8s::Object OwnerReferenceTo(const k8s::Object& config) {
  return {{"apiVersion", "admissionregistration.k8s.io/v1"},
          {"kind", "MutatingWebhookConfiguration"},
          {"name", k8s::Name(config)},
          {"uid", k8s::GetString(config, "/metadata/uid")}};
}

bool OwnedBy(const k8s::Object& object, const std::string& uid) {
  for (const auto& ref : object["metadata"].value("ownerReferences", k8s::Object::array())) {
    if (ref.value("uid", "") == uid) return true;
  }
  return false;
}

// How far before expiry a certificate of this lifetime is renewed.
seconds RenewThreshold(const CertificateInfo& cert, const WebhookCertPolicy& policy) {
  if (policy.renew_before.count() > 0) return policy.renew_before;
  return std::chrono::duration_cast<seconds>(cert.not_after - cert.not_before) / 3;
}

std::string Expiring(const std::string& what, const CertificateInfo& cert,
                     const WebhookCertPolicy& policy, CertTime now) {
  if (cert.not_after <= now) return what + " expired at " + When(cert.not_after);
  seconds threshold = RenewThreshold(cert, policy);
  if (cert.not_after - now < threshold) {
    return what + " expires at " + When(cert.not_after) +
           (policy.renew_before.count() > 0
                ? ", within the renewal window of " + ShortDuration(threshold)
                : ", less than a third of its lifetime away");
  }
  return "";
}

// Certificates valid for an hour or more are dated five minutes into the past, so that an API
// server whose clock runs slightly behind ours accepts them at once. Shorter ones (tests) are not:
// there the margin would be a large part of the lifetime the renewal point is computed from.
CertTime NotBefore(CertTime now, seconds validity) {
  return validity >= std::chrono::hours(1) ? now - std::chrono::minutes(5) : now;
}

std::string NameList(std::vector<std::string> names) {
  std::sort(names.begin(), names.end());
  std::string out;
  for (const std::string& n : names) out += (out.empty() ? "" : " ") + n;
  return "[" + out + "]";
}

std::string Plural(size_t n, const std::string& word) {
  return std::to_string(n) + " " + word + (n == 1 ? "" : "s");
}

Result<std::string> DecodeKey(const k8s::Object& secret, const char* key) {
  const k8s::Object* data = nullptr;
  if (secret.contains("data") && secret["data"].is_object()) data = &secret["data"];
  if (data == nullptr || !data->contains(key) || !(*data)[key].is_string()) return std::string();
  return Base64Decode((*data)[key].get<std::string>());
}

// What the Secret holds; keys that are absent or not base64 read as "" (and get replaced).
WebhookCertBundle BundleFromSecret(const k8s::Object& secret) {
  auto get = [&](const char* key) { return DecodeKey(secret, key).value_or(""); };
  return {get("ca.crt"), get("ca.key"), get("tls.crt"), get("tls.key")};
}

void PutBundle(const WebhookCertBundle& b, k8s::Object& secret) {
  k8s::Object& data = secret["data"];
  if (!data.is_object()) data = k8s::Object::object();
  data["ca.crt"] = Base64Encode(b.ca_crt);
  data["ca.key"] = Base64Encode(b.ca_key);
  data["tls.crt"] = Base64Encode(b.tls_crt);
  data["tls.key"] = Base64Encode(b.tls_key);
}

bool SameBundle(const WebhookCertBundle& a, const WebhookCertBundle& b) {
  return a.ca_crt == b.ca_crt && a.ca_key == b.ca_key && a.tls_crt == b.tls_crt &&
         a.tls_key == b.tls_key;
}

}  // namespace

void SetServingNames(const std::string& service, const std::string& ns,
                     const std::vector<std::string>& extra_hosts, WebhookCertPolicy& policy) {
  for (const std::string& name :
       {service, service + "." + ns, service + "." + ns + ".svc",
        service + "." + ns + ".svc.cluster.local", std::string("localhost")}) {
    AddUnique(policy.dns_names, name);
  }
  AddUnique(policy.ip_addresses, "127.0.0.1");
  for (const std::string& host : extra_hosts) {
    std::string ip = CanonicalIp(host);
    if (!ip.empty()) {
      AddUnique(policy.ip_addresses, ip);
    } else {
      AddUnique(policy.dns_names, host);
    }
  }
}

Status ValidatePolicy(const WebhookCertPolicy& p) {
  if (p.serving_validity.count() <= 0 || p.ca_validity.count() <= 0) {
    return InvalidArgumentError("certificate validities must be positive");
  }
  if (p.renew_before.count() < 0 || p.renew_before >= p.serving_validity) {
    return InvalidArgumentError("the renewal window (" + ShortDuration(p.renew_before) +
                                ") must be shorter than the serving certificate's validity (" +
                                ShortDuration(p.serving_validity) + ")");
  }
  if (p.ca_validity < 2 * p.serving_validity) {
    return InvalidArgumentError("the CA's validity (" + ShortDuration(p.ca_validity) +
                                ") must be at least twice the serving certificate's (" +
                                ShortDuration(p.serving_validity) + ")");
  }
  if (p.dns_names.empty() && p.ip_addresses.empty()) {
    return InvalidArgumentError("the serving certificate needs at least one name");
  }
  return OkStatus();
}

std::string CaRenewalReason(const CertificateInfo& ca, const WebhookCertPolicy& policy,
                            CertTime now) {
  if (std::string r = Expiring("the CA", ca, policy, now); !r.empty()) return r;
  // A CA that could not cover a full serving certificate is replaced now rather than issuing
  // ever shorter certificates from it.
  if (ca.not_after - now < policy.serving_validity) {
    return "the CA expires at " + When(ca.not_after) + ", before a new serving certificate would";
  }
  return "";
}

std::string ServingRenewalReason(const CertificateInfo& serving, const WebhookCertPolicy& policy,
                                 CertTime now) {
  if (std::string r = Expiring("the serving certificate", serving, policy, now); !r.empty()) {
    return r;
  }
  auto sorted = [](std::vector<std::string> v) {
    std::sort(v.begin(), v.end());
    return v;
  };
  if (sorted(serving.dns_names) != sorted(policy.dns_names) ||
      sorted(serving.ip_addresses) != sorted(policy.ip_addresses)) {
    std::vector<std::string> have = serving.dns_names, want = policy.dns_names;
    have.insert(have.end(), serving.ip_addresses.begin(), serving.ip_addresses.end());
    want.insert(want.end(), policy.ip_addresses.begin(), policy.ip_addresses.end());
    return "the serving certificate's names " + NameList(have) + " differ from " + NameList(want);
  }
  return "";
}

namespace {

// Judges the Secret's signing CA: the first certificate of `in.ca_crt`, whose key is `in.ca_key`.
// Returns true when it stays, with `signing->cert_pem` and `plan->ca` set to it and the other
// CAs of ca.crt in `older_cas`. Returns false when a new CA is needed, with the reason appended
// to `reasons` (and the outgoing CAs in `older_cas` when the CA is merely due for renewal).
bool KeepCurrentCa(const WebhookCertBundle& in, const WebhookCertPolicy& policy, CertTime now,
                   CertificatePem* signing, std::vector<std::string>* older_cas,
                   WebhookCertPlan* plan, std::vector<std::string>* reasons) {
  std::string problem;
  Result<std::vector<std::string>> cas = net::SplitCertificateBundle(in.ca_crt);
  if (in.ca_crt.empty()) {
    problem = "no ca.crt";
  } else if (!cas.ok()) {
    problem = "ca.crt: " + cas.status().message();
  } else if (in.ca_key.empty()) {
    problem = "no ca.key";
  } else if (Status s = net::CheckKeyPair({(*cas)[0], in.ca_key}); !s.ok()) {
    problem = "ca.key: " + s.message();
  } else {
    Result<CertificateInfo> info = net::InspectCertificate((*cas)[0]);
    if (!info.ok()) {
      problem = "ca.crt: " + info.status().message();
    } else if (!info->is_ca) {
      problem = "ca.crt is not a CA certificate";
    } else if (std::string r = CaRenewalReason(*info, policy, now); !r.empty()) {
      reasons->push_back(r);
      *older_cas = *cas;  // the outgoing CA stays trusted until it expires
      return false;
    } else {
      signing->cert_pem = (*cas)[0];
      plan->ca = *info;
      older_cas->assign(cas->begin() + 1, cas->end());
      return true;
    }
  }
  reasons->push_back("the Secret has no usable CA (" + problem + ")");
  return false;
}

// Generates a CA valid for policy.ca_validity from `now` into `signing` and `plan->ca`.
Status GenerateCa(const WebhookCertPolicy& policy, CertTime now, CertificatePem* signing,
                  WebhookCertPlan* plan) {
  const seconds validity = policy.ca_validity;
  net::CertificateSpec spec;
  // A distinct name per CA keeps old and new apart in logs and in chain building.
  spec.common_name =
      "hami-scheduler-ca@" + std::to_string(std::chrono::system_clock::to_time_t(now));
  spec.not_before = NotBefore(now, validity);
  spec.not_after = now + validity;
  HAMI_ASSIGN_OR_RETURN(*signing, net::GenerateCertificateAuthority(spec));
  HAMI_ASSIGN_OR_RETURN(plan->ca, net::InspectCertificate(signing->cert_pem));
  plan->new_ca = true;
  return OkStatus();
}

// The ca.crt to write: the signing CA, then those of `older_cas` still valid at `now`. Dropping
// any is a reason, appended to `reasons`.
std::string TrustedCas(const std::string& signing_pem, const std::vector<std::string>& older_cas,
                       CertTime now, std::vector<std::string>* reasons) {
  size_t dropped = 0;
  std::string ca_crt = signing_pem;
  for (const std::string& old : older_cas) {
    Result<CertificateInfo> info = net::InspectCertificate(old);
    if (!info.ok() || info->not_after <= now) {
      ++dropped;
      continue;
    }
    ca_crt += old;
  }
  if (dropped > 0) reasons->push_back("dropped " + Plural(dropped, "expired CA") + " from ca.crt");
  return ca_crt;
}

// Why the Secret's serving certificate must be replaced; "" when it stays (then `plan->serving`
// is set to it) or when there is no Secret yet. A new CA always needs a new serving certificate.
std::string ServingProblem(bool have_secret, const WebhookCertBundle& in,
                           const WebhookCertPolicy& policy, CertTime now,
                           const std::string& signing_pem, WebhookCertPlan* plan) {
  if (plan->new_ca) return have_secret ? "it must be signed by the new CA" : "";
  if (in.tls_crt.empty() || in.tls_key.empty()) return "the Secret has no serving certificate";
  Result<CertificateInfo> info = net::InspectCertificate(in.tls_crt);
  if (!info.ok()) return "tls.crt: " + info.status().message();
  if (std::string r = ServingRenewalReason(*info, policy, now); !r.empty()) return r;
  if (Status s = net::CheckKeyPair({in.tls_crt, in.tls_key}); !s.ok()) {
    return "tls.key: " + s.message();
  }
  if (Status v = net::VerifyCertificate(in.tls_crt, signing_pem, now); !v.ok()) {
    return "tls.crt is not signed by the current CA (" + v.message() + ")";
  }
  plan->serving = *info;
  return "";
}

// Issues a serving certificate for the policy's names, signed by `signing` and expiring no later
// than the CA, into plan->bundle and plan->serving.
Status IssueServing(const WebhookCertPolicy& policy, CertTime now, const CertificatePem& signing,
                    WebhookCertPlan* plan) {
  net::CertificateSpec spec;
  spec.common_name = !policy.dns_names.empty() ? policy.dns_names[0] : policy.ip_addresses[0];
  spec.dns_names = policy.dns_names;
  spec.ip_addresses = policy.ip_addresses;
  spec.not_before = NotBefore(now, policy.serving_validity);
  spec.not_after = std::min(now + policy.serving_validity, plan->ca.not_after);
  HAMI_ASSIGN_OR_RETURN(CertificatePem serving, net::IssueServingCertificate(spec, signing));
  plan->bundle.tls_crt = serving.cert_pem;
  plan->bundle.tls_key = serving.key_pem;
  HAMI_ASSIGN_OR_RETURN(plan->serving, net::InspectCertificate(serving.cert_pem));
  return OkStatus();
}

}  // namespace

Result<WebhookCertPlan> PlanWebhookCertificates(const std::optional<WebhookCertBundle>& current,
                                                const WebhookCertPolicy& policy, CertTime now) {
  WebhookCertPlan plan;
  const WebhookCertBundle in = current.value_or(WebhookCertBundle{});
  std::vector<std::string> reasons;
  if (!current) reasons.push_back("there is no Secret yet");

  std::vector<std::string> older_cas;  // still trusted, carried in ca.crt after the signing CA
  CertificatePem signing{"", in.ca_key};
  bool need_ca = !current.has_value();
  if (current) need_ca = !KeepCurrentCa(in, policy, now, &signing, &older_cas, &plan, &reasons);
  if (need_ca) HAMI_RETURN_IF_ERROR(GenerateCa(policy, now, &signing, &plan));
  std::string ca_crt = TrustedCas(signing.cert_pem, older_cas, now, &reasons);

  std::string serving_problem =
      ServingProblem(current.has_value(), in, policy, now, signing.cert_pem, &plan);
  plan.bundle = WebhookCertBundle{ca_crt, signing.key_pem, in.tls_crt, in.tls_key};
  if (plan.new_ca || !serving_problem.empty()) {
    if (!serving_problem.empty()) reasons.push_back(serving_problem);
    HAMI_RETURN_IF_ERROR(IssueServing(policy, now, signing, &plan));
  }
  plan.changed = !current || !SameBundle(plan.bundle, in);
  if (plan.changed) {
    for (const std::string& r : reasons) plan.reason += (plan.reason.empty() ? "" : "; ") + r;
  }
  return plan;
}

WebhookCertManager::WebhookCertManager(k8s::RestClient& client, hami::Clock& clock,
                                       WebhookCertOptions options)
    : client_(client), clock_(clock), options_(std::move(options)) {}

WebhookCertManager::~WebhookCertManager() { Stop(); }

std::string WebhookCertManager::SecretRef() const {
  return options_.ns + "/" + options_.secret_name;
}

std::shared_ptr<net::CertificateSource> WebhookCertManager::certificate() const {
  MutexLock lock(mu_);
  return source_;
}

WebhookCertBundle WebhookCertManager::bundle() const {
  MutexLock lock(mu_);
  return bundle_;
}

Status WebhookCertManager::Adopt(const WebhookCertBundle& bundle, const std::string& rv) {
  MutexLock lock(mu_);
  if (!source_ || bundle.tls_crt != bundle_.tls_crt || bundle.tls_key != bundle_.tls_key) {
    CertificatePem pair{bundle.tls_crt, bundle.tls_key};
    if (source_) {
      HAMI_RETURN_IF_ERROR(source_->Replace(pair));
    } else {
      HAMI_ASSIGN_OR_RETURN(source_, net::CertificateSource::FromPem(pair));
    }
  }
  bundle_ = bundle;
  secret_rv_ = rv;
  return OkStatus();
}

Status WebhookCertManager::Bootstrap() {
  HAMI_RETURN_IF_ERROR(ValidatePolicy(options_.policy));
  return SyncSecret();
}

Status WebhookCertManager::SyncSecret() {
  // Each pass reads the Secret and writes at most once; a write that loses to another replica
  // (AlreadyExists, Conflict) is followed by a fresh read that usually finds nothing left to do.
  constexpr int kPasses = 5;
  for (int pass = 0; pass < kPasses; ++pass) {
    const CertTime now = clock_.WallNow();
    Result<k8s::Object> got = client_.Get(kSecrets, options_.ns, options_.secret_name);
    if (!got.ok() && !k8s::IsNotFound(got.status())) {
      return got.status().WithContext("reading Secret " + SecretRef());
    }
    std::optional<WebhookCertBundle> current;
    if (got.ok()) current = BundleFromSecret(*got);
    HAMI_ASSIGN_OR_RETURN(WebhookCertPlan plan,
                          PlanWebhookCertificates(current, options_.policy, now));
    const std::string validity = "(CA valid until " + When(plan.ca.not_after) + ", serving until " +
                                 When(plan.serving.not_after) + ")";
    if (!got.ok()) {
      k8s::Object secret = {{"apiVersion", "v1"},
                            {"kind", "Secret"},
                            {"metadata",
                             {{"name", options_.secret_name},
                              {"namespace", options_.ns},
                              {"labels", {{"app.kubernetes.io/managed-by", "hami-scheduler"}}}}},
                            {"type", "kubernetes.io/tls"}};
      PutBundle(plan.bundle, secret);
      Result<k8s::Object> config =
          client_.Get(kMutatingWebhookConfigurations, "", options_.webhook_config_name);
      if (config.ok() && !k8s::GetString(*config, "/metadata/uid").empty()) {
        secret["metadata"]["ownerReferences"] = k8s::Object::array({OwnerReferenceTo(*config)});
      }
      Result<k8s::Object> created = client_.Create(kSecrets, options_.ns, secret);
      if (!created.ok() && k8s::IsAlreadyExists(created.status())) {
        HAMI_VLOG(1) << "webhook certificate: another replica created Secret " << SecretRef()
                     << " first; reading it";
        continue;
      }
      if (!created.ok()) return created.status().WithContext("creating Secret " + SecretRef());
      HAMI_RETURN_IF_ERROR(Adopt(plan.bundle, k8s::ResourceVersion(*created)));
      HAMI_LOG(Info) << "webhook certificate: created Secret " << SecretRef() << " " << validity;
      return OkStatus();
    }
    const std::string rv = k8s::ResourceVersion(*got);
    if (!plan.changed) {
      if (rv == secret_rv_) return OkStatus();
      const bool first = secret_rv_.empty();
      const bool new_pair = plan.bundle.tls_crt != bundle().tls_crt;
      HAMI_RETURN_IF_ERROR(Adopt(plan.bundle, rv));
      if (first) {
        HAMI_LOG(Info) << "webhook certificate: reused Secret " << SecretRef() << " " << validity;
      } else if (new_pair) {
        HAMI_LOG(Info) << "webhook certificate: loaded Secret " << SecretRef()
                       << " as renewed elsewhere (resourceVersion " << rv << ") " << validity;
      }
      return OkStatus();
    }
    k8s::Object secret = *got;  // unknown keys and metadata survive the update
    PutBundle(plan.bundle, secret);
    Result<k8s::Object> updated = client_.Update(kSecrets, options_.ns, secret);
    if (!updated.ok() && k8s::IsConflict(updated.status())) {
      HAMI_VLOG(1) << "webhook certificate: Secret " << SecretRef()
                   << " changed while renewing; reading it again";
      continue;
    }
    if (!updated.ok()) return updated.status().WithContext("updating Secret " + SecretRef());
    HAMI_RETURN_IF_ERROR(Adopt(plan.bundle, k8s::ResourceVersion(*updated)));
    HAMI_LOG(Info) << "webhook certificate: renewed Secret " << SecretRef() << " because "
                   << plan.reason << " " << validity;
    return OkStatus();
  }
  return AbortedError("Secret " + SecretRef() + " kept changing during " + std::to_string(kPasses) +
                      " attempts to read and write it");
}

Status WebhookCertManager::PatchCaBundle() {
  const std::string& name = options_.webhook_config_name;
  Result<k8s::Object> config = client_.Get(kMutatingWebhookConfigurations, "", name);
  if (!config.ok() && k8s::IsNotFound(config.status())) {
    return UnavailableError("MutatingWebhookConfiguration " + name +
                            " not found; its caBundle is set once it exists");
  }
  if (!config.ok()) {
    return config.status().WithContext("reading MutatingWebhookConfiguration " + name);
  }
  HAMI_RETURN_IF_ERROR(SetSecretOwner(*config));
  const std::string want = Base64Encode(bundle().ca_crt);
  const k8s::Object* hooks = nullptr;
  if (config->contains("webhooks") && (*config)["webhooks"].is_array()) {
    hooks = &(*config)["webhooks"];
  }
  if (hooks == nullptr || hooks->empty()) {
    return FailedPreconditionError("MutatingWebhookConfiguration " + name + " has no webhooks");
  }
  // List items are addressed by index; each change is guarded by a test of the webhook's name,
  // so a list reordered since our read fails the whole patch instead of changing the wrong entry.
  k8s::Object ops = k8s::Object::array();
  size_t changed = 0;
  for (size_t i = 0; i < hooks->size(); ++i) {
    const k8s::Object& hook = (*hooks)[i];
    if (!hook.is_object()) continue;
    const std::string base = "/webhooks/" + std::to_string(i);
    if (k8s::GetString(hook, "/clientConfig/caBundle") == want) continue;
    ops.push_back(
        {{"op", "test"}, {"path", base + "/name"}, {"value", k8s::GetString(hook, "/name")}});
    if (hook.contains("clientConfig") && hook["clientConfig"].is_object()) {
      ops.push_back({{"op", "add"}, {"path", base + "/clientConfig/caBundle"}, {"value", want}});
    } else {
      ops.push_back(
          {{"op", "add"}, {"path", base + "/clientConfig"}, {"value", {{"caBundle", want}}}});
    }
    ++changed;
  }
  if (changed == 0) return OkStatus();
  Result<k8s::WriteAck> patched = client_.PatchAck(kMutatingWebhookConfigurations, "", name,
                                                   k8s::PatchType::kJsonPatch, ops.dump());
  if (!patched.ok()) {
    return patched.status().WithContext("patching the caBundle of " + name);
  }
  HAMI_LOG(Info) << "webhook certificate: patched caBundle of " << name << " ("
                 << Plural(changed, "webhook") << ")";
  return OkStatus();
}

Status WebhookCertManager::SetSecretOwner(const k8s::Object& config) {
  const std::string uid = k8s::GetString(config, "/metadata/uid");
  if (uid.empty()) return OkStatus();
  Result<k8s::Object> secret = client_.Get(kSecrets, options_.ns, options_.secret_name);
  if (!secret.ok()) return secret.status().WithContext("reading Secret " + SecretRef());
  if (OwnedBy(*secret, uid)) return OkStatus();
  // A Secret made before the configuration existed, or by an earlier release: it then belongs
  // to no one and would outlive an uninstall. A Conflict is retried at the next round.
  if (!(*secret)["metadata"]["ownerReferences"].is_array()) {
    (*secret)["metadata"]["ownerReferences"] = k8s::Object::array();
  }
  (*secret)["metadata"]["ownerReferences"].push_back(OwnerReferenceTo(config));
  Result<k8s::Object> updated = client_.Update(kSecrets, options_.ns, *secret);
  if (!updated.ok()) {
    return updated.status().WithContext("making " + options_.webhook_config_name +
                                        " the owner of Secret " + SecretRef());
  }
  // The pair is unchanged: the new version is simply the one adopted.
  if (secret_rv_ == k8s::ResourceVersion(*secret)) secret_rv_ = k8s::ResourceVersion(*updated);
  HAMI_LOG(Info) << "webhook certificate: Secret " << SecretRef()
                 << " now belongs to MutatingWebhookConfiguration "
                 << options_.webhook_config_name << " (deleted with it)";
  return OkStatus();
}

Status WebhookCertManager::SyncOnce() {
  HAMI_RETURN_IF_ERROR(SyncSecret());
  return PatchCaBundle();
}

void WebhookCertManager::Start() {
  loop_ = std::thread([this] {
    std::string last_error;
    while (!stop_.cancelled()) {
      Status s = SyncOnce();
      auto wait = options_.check_interval;
      if (!s.ok()) {
        wait = std::min(options_.retry_interval, options_.check_interval);
        // One warning per distinct problem: a configuration applied hours later must not fill
        // the log with the same line.
        if (s.message() != last_error) {
          HAMI_LOG(Warning) << "webhook certificate: " << s.message() << " (retrying every "
                            << ShortDuration(wait) << ")";
          last_error = s.message();
        }
      } else if (!last_error.empty()) {
        HAMI_LOG(Info) << "webhook certificate: recovered from: " << last_error;
        last_error.clear();
      }
      if (clock_.Sleep(wait, &stop_)) return;
    }
  });
}

void WebhookCertManager::Stop() {
  stop_.Cancel();
  if (loop_.joinable()) loop_.join();
}

}  // namespace hami::extender
