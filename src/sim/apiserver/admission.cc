#include "sim/apiserver/admission.h"

#include <httplib.h>
#include <openssl/pem.h>
#include <openssl/x509.h>

#include <algorithm>
#include <nlohmann/json.hpp>

#include "common/base64.h"
#include "common/uuid.h"
#include "sim/apiserver/selectors.h"

namespace hami::sim {
namespace {

using nlohmann::json;

bool ListHas(const json& list, const std::string& want) {
  if (!list.is_array()) return false;
  for (const json& v : list) {
    if (v.is_string() && (v == "*" || v == want || v == "*/*")) return true;
  }
  return false;
}

bool RulesMatch(const json& webhook, const ResourceInfo& r) {
  auto rules = webhook.find("rules");
  if (rules == webhook.end() || !rules->is_array()) return false;
  for (const json& rule : *rules) {
    if (!rule.is_object()) continue;
    if (ListHas(rule.value("operations", json()), "CREATE") &&
        ListHas(rule.value("apiGroups", json()), r.group) &&
        ListHas(rule.value("apiVersions", json()), r.version) &&
        ListHas(rule.value("resources", json()), r.resource)) {
      return true;
    }
  }
  return false;
}

std::string NewUid() { return NewRandomUuid(); }

struct Url {
  std::string host;
  int port = 443;
  std::string path = "/";
};

Result<Url> ParseHttpsUrl(const std::string& url) {
  const std::string scheme = "https://";
  if (url.rfind(scheme, 0) != 0) return InvalidArgumentError("webhook url must be https: " + url);
  std::string rest = url.substr(scheme.size());
  Url out;
  size_t slash = rest.find('/');
  std::string hostport = rest.substr(0, slash);
  if (slash != std::string::npos) out.path = rest.substr(slash);
  size_t colon = hostport.rfind(':');
  if (colon != std::string::npos && hostport.find(']') == std::string::npos) {
    out.host = hostport.substr(0, colon);
    try {
      out.port = std::stoi(hostport.substr(colon + 1));
    } catch (...) {
      return InvalidArgumentError("bad port in webhook url " + url);
    }
  } else {
    out.host = hostport;
  }
  if (out.host.empty()) return InvalidArgumentError("no host in webhook url " + url);
  return out;
}

// The AdmissionReview apiVersion to send: v1 unless the webhook lists only v1beta1.
std::string ReviewVersion(const json& webhook) {
  std::string review_version = "admission.k8s.io/v1";
  if (webhook.contains("admissionReviewVersions")) {
    const json& versions = webhook["admissionReviewVersions"];
    bool v1 = ListHas(versions, "v1");
    if (!v1 && ListHas(versions, "v1beta1")) review_version = "admission.k8s.io/v1beta1";
  }
  return review_version;
}

// The AdmissionReview, request `uid`, asking about the CREATE of `object` by `user`.
json CreateReview(const std::string& review_version, const std::string& uid,
                  const ResourceInfo& r, const json& object, const std::string& user) {
  json gvk = {{"group", r.group}, {"version", r.version}, {"kind", r.kind}};
  json gvr = {{"group", r.group}, {"version", r.version}, {"resource", r.resource}};
  return {{"apiVersion", review_version},
          {"kind", "AdmissionReview"},
          {"request",
           {{"uid", uid},
            {"kind", gvk},
            {"resource", gvr},
            {"requestKind", gvk},
            {"requestResource", gvr},
            {"name", object["metadata"].value("name", "")},
            {"namespace", object["metadata"].value("namespace", "")},
            {"operation", "CREATE"},
            {"userInfo", {{"username", user}, {"groups", {"system:authenticated"}}}},
            {"object", object},
            {"oldObject", nullptr},
            {"dryRun", false},
            {"options", {{"apiVersion", "meta.k8s.io/v1"}, {"kind", "CreateOptions"}}}}}};
}

// With a clientConfig.caBundle, `client` trusts the PEM certificates it holds (and takes the
// store's ownership). InvalidArgument when the bundle is not base64 or holds no certificate.
Status TrustCaBundle(const json& cc, httplib::SSLClient& client) {
  if (cc.contains("caBundle") && cc["caBundle"].is_string()) {
    HAMI_ASSIGN_OR_RETURN(std::string pem, Base64Decode(cc["caBundle"].get<std::string>()));
    X509_STORE* store = X509_STORE_new();
    BIO* bio = BIO_new_mem_buf(pem.data(), static_cast<int>(pem.size()));
    int added = 0;
    while (X509* cert = PEM_read_bio_X509(bio, nullptr, nullptr, nullptr)) {
      added += X509_STORE_add_cert(store, cert) == 1;
      X509_free(cert);
    }
    BIO_free(bio);
    if (added == 0) {
      X509_STORE_free(store);
      return InvalidArgumentError("caBundle holds no PEM certificate");
    }
    client.set_ca_cert_store(store);  // owned by the client from here
  }
  return OkStatus();
}

// The verdict in the webhook `name`'s HTTP 200 body for request `uid`: `object` as patched, a
// FailedPrecondition for a denial, Unavailable for an answer that cannot be used.
Result<json> ReadVerdict(const std::string& body, const std::string& name,
                         const std::string& uid, const json& object) {
  json answer = json::parse(body, nullptr, /*allow_exceptions=*/false);
  if (answer.is_discarded() || !answer.is_object() || !answer.contains("response") ||
      !answer["response"].is_object()) {
    return UnavailableError("webhook answer is not an AdmissionReview with a response");
  }
  const json& response = answer["response"];
  if (response.value("uid", "") != uid) {
    return UnavailableError("webhook response uid does not match the request uid");
  }
  if (!response.value("allowed", false)) {
    std::string message;
    if (response.contains("status") && response["status"].is_object()) {
      message = response["status"].value("message", "");
    }
    return FailedPreconditionError("admission webhook \"" + name + "\" denied the request" +
                                   (message.empty() ? "" : ": " + message));
  }
  if (!response.contains("patch")) return object;
  if (response.value("patchType", "JSONPatch") != "JSONPatch" || !response["patch"].is_string()) {
    return UnavailableError("webhook returned a patch that is not a base64 JSONPatch");
  }
  HAMI_ASSIGN_OR_RETURN(std::string patch_text, Base64Decode(response["patch"].get<std::string>()));
  json patch = json::parse(patch_text, nullptr, false);
  if (patch.is_discarded() || !patch.is_array()) {
    return UnavailableError("webhook patch is not a JSON array");
  }
  try {
    return object.patch(patch);
  } catch (const std::exception& e) {
    return UnavailableError(std::string("applying the webhook's JSONPatch: ") + e.what());
  }
}

// One webhook call; returns the patched object or an error describing why the call failed
// (FailedPrecondition marks a denial, which failurePolicy does not override).
Result<json> CallWebhook(const json& webhook, const ResourceInfo& r, const json& object,
                         const std::string& user) {
  std::string name = webhook.value("name", "");
  const json& cc = webhook.contains("clientConfig") ? webhook["clientConfig"] : json();
  if (!cc.is_object() || !cc.contains("url") || !cc["url"].is_string()) {
    return UnavailableError("only clientConfig.url webhooks are reachable in the simulation");
  }
  HAMI_ASSIGN_OR_RETURN(Url url, ParseHttpsUrl(cc["url"].get<std::string>()));
  int timeout = 10;
  if (webhook.contains("timeoutSeconds") && webhook["timeoutSeconds"].is_number_integer()) {
    timeout = std::clamp(webhook["timeoutSeconds"].get<int>(), 1, 30);
  }
  std::string review_version = ReviewVersion(webhook);
  std::string uid = NewUid();
  json review = CreateReview(review_version, uid, r, object, user);

  httplib::SSLClient client(url.host, url.port);
  client.set_connection_timeout(timeout);
  client.set_read_timeout(timeout);
  client.set_write_timeout(timeout);
  client.enable_server_certificate_verification(true);
  HAMI_RETURN_IF_ERROR(TrustCaBundle(cc, client));
  auto res = client.Post(url.path, review.dump(), "application/json");
  if (!res)
    return UnavailableError("calling " + cc["url"].get<std::string>() + ": " +
                            httplib::to_string(res.error()));
  if (res->status != 200) {
    return UnavailableError("webhook answered HTTP " + std::to_string(res->status));
  }
  return ReadVerdict(res->body, name, uid, object);
}

}  // namespace

Result<json> AdmitCreate(const std::vector<ObjectPtr>& configurations, const ResourceInfo& r,
                         const json& namespace_object, json object, const std::string& user) {
  for (const ObjectPtr& config : configurations) {
    const json& webhooks = config->contains("webhooks") ? (*config)["webhooks"] : json();
    if (!webhooks.is_array()) continue;
    for (const json& webhook : webhooks) {
      if (!webhook.is_object() || !RulesMatch(webhook, r)) continue;
      auto object_sel = LabelSelector::FromJson(webhook.value("objectSelector", json()));
      auto ns_sel = LabelSelector::FromJson(webhook.value("namespaceSelector", json()));
      if (!object_sel.ok() || !ns_sel.ok()) continue;
      if (!object_sel->MatchesObject(object)) continue;
      if (r.namespaced && !ns_sel->MatchesObject(namespace_object)) continue;
      std::string name = webhook.value("name", "");
      Result<json> patched = CallWebhook(webhook, r, object, user);
      if (patched.ok()) {
        object = std::move(patched).value();
        continue;
      }
      if (patched.status().code() == StatusCode::kFailedPrecondition) {
        return PermissionDeniedError(patched.status().message());
      }
      if (webhook.value("failurePolicy", "Fail") == "Ignore") continue;
      return InternalError("failed calling webhook \"" + name +
                           "\": " + patched.status().message());
    }
  }
  return object;
}

}  // namespace hami::sim
