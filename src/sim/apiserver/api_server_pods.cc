// ApiServer::Impl's pod subresources and deletions: pods/binding, pods/log and pods/exec (through
// the pod's kubelet), and delete and deletecollection, with pods' graceful deletion.
#include "sim/apiserver/api_server_internal.h"

#include <poll.h>
#include <strings.h>

#include <algorithm>

#include "net/http_wire.h"
#include "sim/apiserver/json_fields.h"

namespace hami::sim {

using api_server_internal::NowRfc3339;
using api_server_internal::Rfc3339After;
using api_server_internal::WriteError;
using api_server_internal::WriteObject;
using api_server_internal::WriteStatus;
using json_fields::Str;

bool ApiServer::Impl::FindKubelet(const HttpRequest& req, const Target& t, const char* what,
                                  HttpResponse& res, KubeletTarget* out) {
  json details = {{"name", t.name}, {"kind", "pods"}};
  Result<ObjectPtr> pod = store.Get(*t.resource, t.ns, t.name, nullptr);
  if (!pod.ok()) return WriteError(res, pod.status(), details), false;
  std::vector<std::string> names;
  if ((**pod).contains("spec") && (**pod)["spec"].contains("containers")) {
    for (const json& c : (**pod)["spec"]["containers"]) names.push_back(Str(c, "name"));
  }
  std::string container = req.Param("container");
  if (container.empty()) {
    if (names.size() != 1) {
      std::string list;
      for (const std::string& n : names) list += (list.empty() ? "" : " ") + n;
      WriteStatus(res, 400, "BadRequest",
                  "a container name must be specified for pod " + t.name +
                      ", choose one of: [" + list + "]");
      return false;
    }
    container = names[0];
  } else if (std::find(names.begin(), names.end(), container) == names.end()) {
    WriteStatus(res, 400, "BadRequest",
                "container " + container + " is not valid for pod " + t.name);
    return false;
  }
  std::string node = FieldValue(**pod, "spec.nodeName");
  if (node.empty()) {
    WriteStatus(res, 400, "BadRequest",
                "container \"" + container + "\" in pod \"" + t.name +
                    "\" is waiting to start: the pod is not scheduled yet");
    return false;
  }
  const ResourceInfo* nodes = registry.Find("", "v1", "nodes");
  Result<ObjectPtr> n = store.Get(*nodes, "", node, nullptr);
  if (!n.ok()) return WriteError(res, n.status(), {{"name", node}, {"kind", "nodes"}}), false;
  const json& st = (**n).value("status", json::object());
  std::string ip;
  for (const json& a : st.value("addresses", json::array())) {
    if (Str(a, "type") == "InternalIP") ip = Str(a, "address");
  }
  int kubelet_port = 0;
  if (st.contains("daemonEndpoints") && st["daemonEndpoints"].contains("kubeletEndpoint")) {
    kubelet_port = st["daemonEndpoints"]["kubeletEndpoint"].value("Port", 0);
  }
  if (ip.empty() || kubelet_port <= 0) {
    WriteStatus(res, 400, "BadRequest",
                "node " + node + " has no kubelet to ask for " + what);
    return false;
  }
  *out = {container, ip, kubelet_port};
  return true;
}

void ApiServer::Impl::Exec(const HttpRequest& req, const Target& t, HttpResponse& res) {
  KubeletTarget k;
  if (!FindKubelet(req, t, "exec", res, &k)) return;
  if (req.Header("Upgrade").empty()) {
    return WriteStatus(res, 400, "BadRequest", "Upgrade request required");
  }
  // The kubelet's query, as kube-apiserver writes it from PodExecOptions: command (repeated),
  // then input, output, error and tty as "1" for the streams asked for.
  std::string path = "/exec/" + t.ns + "/" + t.name + "/" + k.container;
  char sep = '?';
  auto range = req.params.equal_range("command");
  for (auto it = range.first; it != range.second; ++it) {
    path += sep + std::string("command=") + net::wire::PercentEncode(it->second);
    sep = '&';
  }
  for (auto [option, kubelet_name] : {std::pair{"stdin", "input"}, std::pair{"stdout", "output"},
                                     std::pair{"stderr", "error"}, std::pair{"tty", "tty"}}) {
    std::string v = req.Param(option);
    if (v == "true" || v == "1") {
      path += sep + std::string(kubelet_name) + "=1";
      sep = '&';
    }
  }
  std::vector<std::pair<std::string, std::string>> forward;
  for (const auto& [key, value] : req.headers) {
    for (const char* name : {"Upgrade", "Connection", "Sec-WebSocket-Key",
                             "Sec-WebSocket-Version", "Sec-WebSocket-Protocol",
                             "X-Stream-Protocol-Version"}) {
      if (::strcasecmp(key.c_str(), name) == 0) forward.emplace_back(name, value);
    }
  }
  Result<KubeletUpgradeReply> r = KubeletUpgrade(k.ip, k.port, req.method, path, forward);
  if (!r.ok()) return WriteStatus(res, 500, "InternalError", r.status().message());
  if (r->status != 101) {
    std::string message = r->body;
    while (!message.empty() && (message.back() == '\n' || message.back() == '\r')) {
      message.pop_back();
    }
    return WriteStatus(res, r->status >= 400 ? r->status : 500,
                       r->status == 404 ? "NotFound" : "BadRequest", message);
  }
  res.status = 101;
  for (const auto& [key, value] : r->headers) {
    if (key == "connection" || key == "content-length" || key == "content-type") continue;
    res.headers.emplace_back(key, value);
  }
  std::shared_ptr<KubeletStream> kubelet = std::move(r->stream);
  res.upgrade = [kubelet, early = std::move(r->early)](net::UpgradedConnection& client) {
    RelayUpgraded(client, *kubelet, early);
  };
}

void ApiServer::Impl::RelayUpgraded(net::UpgradedConnection& client, KubeletStream& kubelet,
                                    const std::string& early) {
  if (!early.empty() && !client.Write(early)) return;
  std::string buf;
  while (client.ServerRunning()) {
    pollfd fds[2] = {{client.fd(), POLLIN, 0}, {kubelet.fd(), POLLIN, 0}};
    int timeout = client.HasBuffered() || kubelet.HasBuffered() ? 0 : 250;
    if (::poll(fds, 2, timeout) < 0 && errno != EINTR) return;
    if (client.HasBuffered() || (fds[0].revents & (POLLIN | POLLHUP | POLLERR)) != 0) {
      buf.clear();
      if (client.Read(&buf) == net::UpgradedConnection::ReadResult::kEnd) return;
      if (!buf.empty() && !kubelet.Write(buf)) return;
    }
    if (kubelet.HasBuffered() || (fds[1].revents & (POLLIN | POLLHUP | POLLERR)) != 0) {
      buf.clear();
      if (!kubelet.Read(&buf)) return;
      if (!buf.empty() && !client.Write(buf)) return;
    }
  }
}

void ApiServer::Impl::Log(const HttpRequest& req, const Target& t, HttpResponse& res) {
  KubeletTarget k;
  if (!FindKubelet(req, t, "logs", res, &k)) return;
  std::string path = "/containerLogs/" + t.ns + "/" + t.name + "/" + k.container;
  if (req.HasParam("tailLines")) path += "?tailLines=" + req.Param("tailLines");
  Result<KubeletReply> r = KubeletGet(k.ip, k.port, path);
  if (!r.ok()) return WriteStatus(res, 500, "InternalError", r.status().message());
  if (r->status != 200) {
    return WriteStatus(res, r->status == 404 ? 404 : 500,
                       r->status == 404 ? "NotFound" : "InternalError", r->body);
  }
  res.SetText(200, r->body);
}

void ApiServer::Impl::Bind(const HttpRequest& req, const Target& t, HttpResponse& res) {
  json details = {{"name", t.name}, {"kind", "pods"}};
  json body = json::parse(req.body, nullptr, false);
  if (body.is_discarded() || !body.is_object()) return BadBody(res);
  if (body.contains("kind") && Str(body, "kind") != "Binding") {
    return WriteStatus(res, 400, "BadRequest", "expected a Binding object");
  }
  std::string node = body.contains("target") ? Str(body["target"], "name") : "";
  if (node.empty()) {
    return WriteStatus(res, 422, "Invalid",
                       "Binding \"" + t.name + "\" is invalid: target.name: Required value");
  }
  json annotations = body.contains("metadata") && body["metadata"].is_object()
                         ? body["metadata"].value("annotations", json())
                         : json();
  Result<ObjectPtr> bound = store.Update(*t.resource, t.ns, t.name, [&](const json&, json& pod) {
    std::string current = FieldValue(pod, "spec.nodeName");
    if (!current.empty()) {
      return AbortedError("Operation cannot be fulfilled on pods/binding \"" + t.name +
                          "\": pod " + t.name + " is already assigned to node \"" + current +
                          "\"");
    }
    if (!pod["spec"].is_object()) pod["spec"] = json::object();
    pod["spec"]["nodeName"] = node;
    if (annotations.is_object()) {
      for (const auto& [k, v] : annotations.items()) {
        if (v.is_string()) pod["metadata"]["annotations"][k] = v;
      }
    }
    if (!pod["status"].is_object()) pod["status"] = json::object();
    json& conds = pod["status"]["conditions"];
    if (!conds.is_array()) conds = json::array();
    json cond = {{"type", "PodScheduled"},
                 {"status", "True"},
                 {"lastProbeTime", nullptr},
                 {"lastTransitionTime", NowRfc3339()}};
    bool replaced = false;
    for (json& c : conds) {
      if (Str(c, "type") == "PodScheduled") {
        c = cond;
        replaced = true;
      }
    }
    if (!replaced) conds.push_back(cond);
    return OkStatus();
  });
  if (!bound.ok()) return WriteError(res, bound.status(), details);
  json ok = {{"kind", "Status"},
             {"apiVersion", "v1"},
             {"metadata", json::object()},
             {"status", "Success"},
             {"code", 201}};
  WriteObject(res, 201, ok);
}

int64_t ApiServer::Impl::PodGracePeriod(const json& pod, std::optional<int64_t> asked) {
  std::string phase = Str(pod.value("status", json::object()), "phase");
  if (Str(pod.value("spec", json::object()), "nodeName").empty() || phase == "Succeeded" ||
      phase == "Failed") {
    return 0;
  }
  if (asked) return std::max<int64_t>(0, *asked);
  const json spec = pod.value("spec", json::object());
  auto it = spec.find("terminationGracePeriodSeconds");
  return it != spec.end() && it->is_number_integer() ? std::max<int64_t>(0, it->get<int64_t>())
                                                     : 30;
}

void ApiServer::Impl::Delete(const HttpRequest& req, const Target& t, HttpResponse& res) {
  const ResourceInfo& r = *t.resource;
  json details = {{"name", t.name}, {"group", r.group}, {"kind", r.resource}};
  if (!t.sub.empty()) return WriteStatus(res, 405, "MethodNotAllowed", "method not allowed");
  std::string want_uid, want_rv;
  std::optional<int64_t> grace;
  if (req.HasParam("gracePeriodSeconds")) {
    const std::string v = req.Param("gracePeriodSeconds");
    char* end = nullptr;
    long long n = std::strtoll(v.c_str(), &end, 10);
    if (v.empty() || *end != '\0') {
      return WriteStatus(res, 400, "BadRequest",
                         "gracePeriodSeconds \"" + v + "\": not an integer");
    }
    grace = n;
  }
  if (!req.body.empty()) {
    json opts = json::parse(req.body, nullptr, false);
    if (opts.is_discarded() || !opts.is_object()) return BadBody(res);
    if (opts.contains("preconditions") && opts["preconditions"].is_object()) {
      want_uid = Str(opts["preconditions"], "uid");
      want_rv = Str(opts["preconditions"], "resourceVersion");
    }
    if (opts.contains("gracePeriodSeconds") && opts["gracePeriodSeconds"].is_number_integer()) {
      grace = opts["gracePeriodSeconds"].get<int64_t>();
    }
  }
  auto precondition = [&](const json& current) {
    if (!want_uid.empty() && want_uid != Str(current["metadata"], "uid")) {
      return AbortedError("Operation cannot be fulfilled on " + r.qualified() + " \"" + t.name +
                          "\": Precondition failed: UID in precondition: " + want_uid +
                          ", UID in object meta: " + Str(current["metadata"], "uid"));
    }
    return CheckResourceVersion(r, t.name, want_rv, current);
  };
  if (r.group.empty() && r.kind == "Pod") {
    // Graceful deletion: a pod on a node stays, Terminating (deletionTimestamp set), until its
    // kubelet has stopped the containers and deletes it with no grace period. A second
    // deletion may shorten the grace, never lengthen it.
    Result<ObjectPtr> current = store.Get(r, t.ns, t.name);
    if (!current.ok()) return WriteError(res, current.status(), details);
    if (Status s = precondition(**current); !s.ok()) return WriteError(res, s, details);
    const int64_t g = PodGracePeriod(**current, grace);
    const json& md = (**current)["metadata"];
    auto had = md.find("deletionGracePeriodSeconds");
    const bool already = had != md.end() && had->is_number_integer();
    if (g > 0 && already && had->get<int64_t>() <= g) return WriteObject(res, 200, **current);
    if (g > 0) {
      Result<ObjectPtr> marked =
          store.Update(r, t.ns, t.name, [&](const json& now, json& next) -> Status {
            HAMI_RETURN_IF_ERROR(precondition(now));
            next["metadata"]["deletionTimestamp"] = Rfc3339After(g);
            next["metadata"]["deletionGracePeriodSeconds"] = g;
            return OkStatus();
          });
      if (!marked.ok()) return WriteError(res, marked.status(), details);
      return WriteObject(res, 200, **marked);
    }
  }
  Result<ObjectPtr> gone = store.Delete(r, t.ns, t.name, precondition);
  if (!gone.ok()) return WriteError(res, gone.status(), details);
  if (r.group.empty() && r.kind == "Namespace") DeleteNamespaceContents(t.name);
  if (r.group.empty() && r.kind == "Pod") {
    json last = **gone;
    if (!last["metadata"].contains("deletionTimestamp")) {
      last["metadata"]["deletionTimestamp"] = NowRfc3339();
    }
    last["metadata"]["deletionGracePeriodSeconds"] = 0;
    return WriteObject(res, 200, last);
  }
  details["uid"] = Str((**gone)["metadata"], "uid");
  json ok = {{"kind", "Status"},
             {"apiVersion", "v1"},
             {"metadata", json::object()},
             {"status", "Success"},
             {"details", details}};
  WriteObject(res, 200, ok);
}

void ApiServer::Impl::DeleteCollection(const HttpRequest& req, const Target& t, HttpResponse& res) {
  Result<Selectors> sel = ParseSelectors(req);
  if (!sel.ok()) return WriteError(res, sel.status());
  int64_t revision = 0;
  json items = json::array();
  for (const ObjectPtr& o : store.List(*t.resource, t.ns, &revision)) {
    if (!sel->Matches(*o)) continue;
    const json& md = (*o)["metadata"];
    Result<ObjectPtr> gone =
        store.Delete(*t.resource, Str(md, "namespace"), Str(md, "name"), nullptr);
    if (gone.ok()) items.push_back(**gone);
  }
  json list = {{"kind", t.resource->list_kind()},
               {"apiVersion", t.resource->api_version()},
               {"metadata", {{"resourceVersion", std::to_string(store.revision())}}},
               {"items", items}};
  WriteObject(res, 200, list);
}

void ApiServer::Impl::DeleteNamespaceContents(const std::string& ns) {
  for (const ResourceInfo& r : registry.all()) {
    if (!r.namespaced) continue;
    int64_t revision = 0;
    for (const ObjectPtr& o : store.List(r, ns, &revision)) {
      (void)store.Delete(r, ns, Str((*o)["metadata"], "name"), nullptr);
    }
  }
}

}  // namespace hami::sim
