// ApiServer::Impl's writes: create (names, defaults, admission, canonical quantities), update
// and patch (merge, strategic merge, JSON patch) with their resourceVersion preconditions.
#include "sim/apiserver/api_server_internal.h"

#include "common/base64.h"
#include "sim/apiserver/admission.h"
#include "sim/apiserver/json_fields.h"
#include "sim/apiserver/quantities.h"
#include "sim/apiserver/strategic_merge.h"

namespace hami::sim {

using api_server_internal::NewUid;
using api_server_internal::NowRfc3339;
using api_server_internal::RandomSuffix;
using api_server_internal::ValidName;
using api_server_internal::WriteError;
using api_server_internal::WriteStatus;
using json_fields::Str;

void ApiServer::Impl::SeedNamespaces() {
  for (const char* ns : {"default", "kube-system", "kube-public", "kube-node-lease"}) {
    json obj = {{"kind", "Namespace"}, {"apiVersion", "v1"}, {"metadata", {{"name", ns}}}};
    (void)Create(Res("", "namespaces"), "", std::move(obj), "system:apiserver");
  }
}

Result<ObjectPtr> ApiServer::Impl::Create(const ResourceInfo& r, const std::string& path_ns,
                                          json obj, const std::string& user,
                                          std::shared_ptr<const LazyText>* text) {
  if (!obj.is_object()) return InvalidArgumentError("the request body must be a JSON object");
  if (obj.contains("kind") && Str(obj, "kind") != r.kind) {
    return InvalidArgumentError("the kind \"" + Str(obj, "kind") + "\" does not match the " +
                                r.kind + " expected by " + r.qualified());
  }
  if (obj.contains("apiVersion") && Str(obj, "apiVersion") != r.api_version()) {
    return InvalidArgumentError("the apiVersion \"" + Str(obj, "apiVersion") +
                                "\" does not match " + r.api_version());
  }
  obj["kind"] = r.kind;
  obj["apiVersion"] = r.api_version();
  if (!obj.contains("metadata")) obj["metadata"] = json::object();
  json& md = obj["metadata"];
  if (!md.is_object()) return InvalidArgumentError("metadata must be an object");
  if (Str(md, "name").empty() && !Str(md, "generateName").empty()) {
    md["name"] = Str(md, "generateName") + RandomSuffix(5);
  }
  std::string name = Str(md, "name");
  if (name.empty()) {
    return FailedPreconditionError(r.kind +
                                   " is invalid: metadata.name: Required value: name "
                                   "or generateName is required");
  }
  if (!ValidName(name)) {
    return FailedPreconditionError(r.kind + " \"" + name + "\" is invalid: metadata.name");
  }
  ObjectPtr ns_object;  // for admission
  if (r.namespaced) {
    std::string body_ns = Str(md, "namespace");
    if (!body_ns.empty() && body_ns != path_ns) {
      return InvalidArgumentError(
          "the namespace of the provided object does not match the namespace sent on the "
          "request");
    }
    md["namespace"] = path_ns;
    Result<ObjectPtr> ns = store.Get(Res("", "namespaces"), "", path_ns);
    if (!ns.ok()) return NotFoundError("namespaces \"" + path_ns + "\" not found");
    ns_object = *ns;
  } else {
    md.erase("namespace");
  }
  md["uid"] = NewUid();
  md["creationTimestamp"] = NowRfc3339();
  md["generation"] = 1;
  md.erase("resourceVersion");
  md.erase("deletionTimestamp");
  ApplyCreateDefaults(r, obj);
  // As the real server decodes the body: quantities in canonical form, as strings.
  HAMI_RETURN_IF_ERROR(CanonicalizeQuantities(r.kind, obj));
  if (r.kind == "Pod" && r.group.empty()) {
    int64_t unused;
    std::vector<ObjectPtr> configs = store.List(
        Res("admissionregistration.k8s.io", "mutatingwebhookconfigurations"), "", &unused);
    if (!configs.empty()) {
      json before = md;
      HAMI_ASSIGN_OR_RETURN(
          obj, AdmitCreate(configs, r, ns_object ? *ns_object : json(), std::move(obj), user));
      if (!obj.is_object() || !obj["metadata"].is_object()) {
        return InternalError("a mutating webhook removed the object's metadata");
      }
      // Identity fields are not the webhook's to change.
      for (const char* k : {"name", "namespace", "uid", "creationTimestamp"}) {
        obj["metadata"][k] = before[k];
      }
      obj["kind"] = r.kind;
      obj["apiVersion"] = r.api_version();
      // The patched object is decoded again, so what a webhook added is canonical too.
      HAMI_RETURN_IF_ERROR(CanonicalizeQuantities(r.kind, obj));
    }
  }
  return store.Create(r, path_ns, std::move(obj), text);
}

void ApiServer::Impl::ApplyCreateDefaults(const ResourceInfo& r, json& obj) {
  if (r.group.empty() && r.kind == "Pod") {
    if (!obj["spec"].is_object()) obj["spec"] = json::object();
    json& spec = obj["spec"];
    if (!spec.contains("schedulerName")) spec["schedulerName"] = "default-scheduler";
    if (!spec.contains("restartPolicy")) spec["restartPolicy"] = "Always";
    if (!spec.contains("dnsPolicy")) spec["dnsPolicy"] = "ClusterFirst";
    if (!spec.contains("terminationGracePeriodSeconds")) {
      spec["terminationGracePeriodSeconds"] = 30;
    }
    // As the real server: a new pod's status is reset to Pending.
    obj["status"] = {{"phase", "Pending"}};
  } else if (r.group.empty() && r.kind == "Namespace") {
    obj["spec"] = {{"finalizers", {"kubernetes"}}};
    obj["status"] = {{"phase", "Active"}};
  } else if (r.group.empty() && r.kind == "Secret") {
    NormalizeSecret(obj);
  }
}

void ApiServer::Impl::NormalizeSecret(json& obj) {
  if (!obj.contains("type")) obj["type"] = "Opaque";
  auto sd = obj.find("stringData");
  if (sd == obj.end()) return;
  if (sd->is_object()) {
    if (!obj["data"].is_object()) obj["data"] = json::object();
    for (auto it = sd->begin(); it != sd->end(); ++it) {
      if (it.value().is_string()) {
        obj["data"][it.key()] = Base64Encode(it.value().get<std::string>());
      }
    }
  }
  obj.erase("stringData");
}

bool ApiServer::Impl::SpecChanged(const json& a, const json& b) {
  auto counted = [](const json& o) {
    size_t n = o.size();
    for (const char* k : {"metadata", "status"}) n -= o.contains(k) ? 1 : 0;
    return n;
  };
  if (counted(a) != counted(b)) return true;
  for (auto it = a.begin(); it != a.end(); ++it) {
    if (it.key() == "metadata" || it.key() == "status") continue;
    auto other = b.find(it.key());
    if (other == b.end() || *other != it.value()) return true;
  }
  return false;
}

Status ApiServer::Impl::FinishUpdate(const ResourceInfo& r, const std::string& sub,
                                     const json& current, json& next) {
  if (!next.is_object()) return InvalidArgumentError("the object must be a JSON object");
  if (!next.contains("metadata") || !next["metadata"].is_object()) {
    next["metadata"] = json::object();
  }
  if (sub == "status") {
    // Only the status (and metadata labels and annotations, as on the real server) may change
    // through /status: everything else in `next` is put back to `current`'s value, in place.
    // Most of it is already equal, so this costs comparisons, not a copy of the object.
    auto restore = [](json& into, const json& from, std::initializer_list<const char*> keep) {
      auto kept = [&](const std::string& k) {
        for (const char* x : keep) {
          if (k == x) return true;
        }
        return false;
      };
      for (auto it = into.begin(); it != into.end();) {
        if (kept(it.key())) {
          ++it;
          continue;
        }
        auto was = from.find(it.key());
        if (was == from.end()) {
          it = into.erase(it);
          continue;
        }
        if (*it != *was) *it = *was;
        ++it;
      }
      for (auto it = from.begin(); it != from.end(); ++it) {
        if (!kept(it.key()) && !into.contains(it.key())) into[it.key()] = it.value();
      }
    };
    restore(next, current, {"status", "metadata"});
    json& md = next["metadata"];
    const json& cur_md = current["metadata"];
    restore(md, cur_md, {"labels", "annotations"});
    for (const char* k : {"labels", "annotations"}) {
      if (!md.contains(k) && cur_md.contains(k)) md[k] = cur_md[k];
    }
  } else if (r.has_status) {
    if (current.contains("status")) {
      next["status"] = current["status"];
    } else {
      next.erase("status");
    }
  }
  next["kind"] = r.kind;
  next["apiVersion"] = r.api_version();
  if (r.group.empty() && r.kind == "Secret") NormalizeSecret(next);
  json& md = next["metadata"];
  const json& cur_md = current["metadata"];
  for (const char* k :
       {"name", "namespace", "uid", "creationTimestamp", "deletionTimestamp", "generation"}) {
    if (cur_md.contains(k)) {
      md[k] = cur_md[k];
    } else {
      md.erase(k);
    }
  }
  if (SpecChanged(current, next) && cur_md.contains("generation") &&
      cur_md["generation"].is_number_integer()) {
    md["generation"] = cur_md["generation"].get<int64_t>() + 1;
  }
  return CanonicalizeQuantities(r.kind, next);
}

Status ApiServer::Impl::CheckResourceVersion(const ResourceInfo& r, const std::string& name,
                                             const std::string& wanted, const json& current) {
  if (wanted.empty() || wanted == Str(current["metadata"], "resourceVersion")) return OkStatus();
  return AbortedError("Operation cannot be fulfilled on " + r.qualified() + " \"" + name +
                      "\": the object has been modified; please apply your changes to the "
                      "latest version and try again");
}

void ApiServer::Impl::Update(const HttpRequest& req, const Target& t, HttpResponse& res) {
  const ResourceInfo& r = *t.resource;
  json details = {{"name", t.name}, {"group", r.group}, {"kind", r.resource}};
  if (t.name.empty() || t.sub == "binding") {
    return WriteStatus(res, 405, "MethodNotAllowed", "method not allowed");
  }
  json body = json::parse(req.body, nullptr, false);
  if (body.is_discarded()) return BadBody(res);
  if (!body.is_object()) return WriteStatus(res, 400, "BadRequest", "the body must be an object");
  if (body.contains("kind") && Str(body, "kind") != r.kind) {
    return WriteStatus(res, 400, "BadRequest",
                       "the kind \"" + Str(body, "kind") + "\" does not match " + r.kind);
  }
  std::string body_name = body.contains("metadata") ? Str(body["metadata"], "name") : "";
  if (body_name != t.name) {
    return WriteStatus(res, 400, "BadRequest",
                       "the name of the object (" + body_name +
                           ") does not match the name on the URL (" + t.name + ")");
  }
  std::string wanted_rv = Str(body["metadata"], "resourceVersion");
  std::shared_ptr<const LazyText> text;
  Result<ObjectPtr> updated = store.Update(
      r, t.ns, t.name,
      [&](const json& current, json& next) {
        HAMI_RETURN_IF_ERROR(CheckResourceVersion(r, t.name, wanted_rv, current));
        next = body;
        return FinishUpdate(r, t.sub, current, next);
      },
      &text);
  if (!updated.ok()) return WriteError(res, updated.status(), details);
  res.SetJson(200, text->Get(**updated));
}

void ApiServer::Impl::Patch(const HttpRequest& req, const Target& t, HttpResponse& res) {
  const ResourceInfo& r = *t.resource;
  json details = {{"name", t.name}, {"group", r.group}, {"kind", r.resource}};
  if (t.name.empty() || t.sub == "binding") {
    return WriteStatus(res, 405, "MethodNotAllowed", "method not allowed");
  }
  std::string ct = req.Header("Content-Type");
  ct = ct.substr(0, ct.find(';'));
  enum { kMerge, kStrategic, kJsonPatch } kind;
  if (ct == "application/merge-patch+json") {
    kind = kMerge;
  } else if (ct == "application/strategic-merge-patch+json") {
    kind = kStrategic;
  } else if (ct == "application/json-patch+json") {
    kind = kJsonPatch;
  } else if (ct == "application/apply-patch+yaml" || ct == "application/apply-patch+cbor") {
    return WriteStatus(res, 415, "UnsupportedMediaType",
                       "server-side apply (" + ct +
                           ") is not supported by the simulated API server: use client-side "
                           "apply (kubectl apply without --server-side), kubectl patch or "
                           "kubectl edit");
  } else {
    return WriteStatus(res, 415, "UnsupportedMediaType",
                       "the body of the request was in an unknown format - accepted media "
                       "types include: application/json-patch+json, "
                       "application/merge-patch+json, application/strategic-merge-patch+json");
  }
  json patch = json::parse(req.body, nullptr, false);
  if (patch.is_discarded()) return BadBody(res);
  if (kind != kJsonPatch && !patch.is_object()) {
    return WriteStatus(res, 400, "BadRequest", "a merge patch must be a JSON object");
  }
  if (kind == kJsonPatch && !patch.is_array()) {
    return WriteStatus(res, 400, "BadRequest", "a JSON patch must be a JSON array");
  }
  std::shared_ptr<const LazyText> text;
  Result<ObjectPtr> updated = store.Update(
      r, t.ns, t.name,
      [&](const json& current, json& next) {
        if (kind == kMerge) {
          next.merge_patch(patch);
        } else if (kind == kStrategic) {
          HAMI_RETURN_IF_ERROR(ApplyStrategicMergePatch(r.kind, next, patch));
        } else {
          try {
            next = current.patch(patch);
          } catch (const json::exception& e) {
            return FailedPreconditionError(std::string("the JSON patch cannot be applied: ") +
                                           e.what());
          }
        }
        if (!next.is_object() || !next.contains("metadata") || !next["metadata"].is_object()) {
          return FailedPreconditionError("the patch removed the object's metadata");
        }
        // A resourceVersion in the patched object is a precondition, as on the real server.
        std::string wanted_rv = Str(next["metadata"], "resourceVersion");
        HAMI_RETURN_IF_ERROR(CheckResourceVersion(r, t.name, wanted_rv, current));
        return FinishUpdate(r, t.sub, current, next);
      },
      &text);
  if (!updated.ok()) return WriteError(res, updated.status(), details);
  res.SetJson(200, text->Get(**updated));
}

}  // namespace hami::sim
