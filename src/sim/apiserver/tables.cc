#include "sim/apiserver/tables.h"

#include <nlohmann/json.hpp>

#include "sim/apiserver/json_fields.h"
#include "sim/apiserver/selectors.h"

namespace hami::sim {
namespace {

using json = nlohmann::json;

using json_fields::Member;
using json_fields::Str;

std::string OrNone(const std::string& s) { return s.empty() ? "<none>" : s; }

std::time_t ParseRfc3339(const std::string& s) {
  std::tm tm{};
  if (s.empty() || !strptime(s.c_str(), "%Y-%m-%dT%H:%M:%S", &tm)) return 0;
  return timegm(&tm);
}

std::string Since(const std::string& when, std::time_t now) {
  std::time_t t = ParseRfc3339(when);
  return t == 0 ? "<unknown>" : HumanDuration(static_cast<long long>(now - t));
}

json Column(const char* name, const char* type, int priority = 0, const char* format = "") {
  return {{"name", name},
          {"type", type},
          {"format", format},
          {"description", ""},
          {"priority", priority}};
}

// ---- pods ----------------------------------------------------------------------------------

// What kubectl shows as a pod's STATUS: the phase, or the pod's reason, or the most telling
// container state (an init container still running, a waiting or terminated reason).
std::string PodStatus(const json& pod) {
  const json& status = Member(pod, "status");
  std::string reason = Str(status, "phase");
  if (!Str(status, "reason").empty()) reason = Str(status, "reason");
  bool initializing = false;
  const json& inits = Member(status, "initContainerStatuses");
  const size_t init_total = Member(Member(pod, "spec"), "initContainers").size();
  if (inits.is_array()) {
    for (size_t i = 0; i < inits.size(); ++i) {
      const json& state = Member(inits[i], "state");
      const json& term = Member(state, "terminated");
      if (term.is_object() && Member(term, "exitCode") == 0) continue;
      initializing = true;
      if (term.is_object()) {
        reason = !Str(term, "reason").empty() ? "Init:" + Str(term, "reason")
                                              : "Init:ExitCode:" + Member(term, "exitCode").dump();
      } else if (!Str(Member(state, "waiting"), "reason").empty() &&
                 Str(Member(state, "waiting"), "reason") != "PodInitializing") {
        reason = "Init:" + Str(Member(state, "waiting"), "reason");
      } else {
        reason = "Init:" + std::to_string(i) + "/" + std::to_string(init_total);
      }
      break;
    }
  }
  if (!initializing) {
    const json& cs = Member(status, "containerStatuses");
    bool running = false;
    if (cs.is_array()) {
      for (auto it = cs.rbegin(); it != cs.rend(); ++it) {
        const json& state = Member(*it, "state");
        const json& term = Member(state, "terminated");
        if (!Str(Member(state, "waiting"), "reason").empty()) {
          reason = Str(Member(state, "waiting"), "reason");
        } else if (term.is_object()) {
          reason = !Str(term, "reason").empty() ? Str(term, "reason")
                                                : "ExitCode:" + Member(term, "exitCode").dump();
        } else if (Member(state, "running").is_object() && Member(*it, "ready") == true) {
          running = true;
        }
      }
    }
    if (reason == "Completed" && running) reason = "Running";
  }
  if (!Str(Member(pod, "metadata"), "deletionTimestamp").empty()) {
    reason = Str(status, "reason") == "NodeLost" ? "Unknown" : "Terminating";
  }
  return reason;
}

json PodCells(const json& pod, std::time_t now) {
  const json& spec = Member(pod, "spec");
  const json& status = Member(pod, "status");
  const json& cs = Member(status, "containerStatuses");
  int ready = 0;
  long long restarts = 0;
  std::string last_restart;
  if (cs.is_array()) {
    for (const json& c : cs) {
      ready += Member(c, "ready") == true ? 1 : 0;
      if (Member(c, "restartCount").is_number_integer())
        restarts += Member(c, "restartCount").get<long long>();
      std::string finished = Str(Member(Member(c, "lastState"), "terminated"), "finishedAt");
      if (finished > last_restart) last_restart = finished;
    }
  }
  std::string restart_cell = std::to_string(restarts);
  if (restarts > 0 && !last_restart.empty()) {
    restart_cell += " (" + Since(last_restart, now) + " ago)";
  }
  std::string gates = "<none>";
  const json& readiness = Member(spec, "readinessGates");
  if (readiness.is_array() && !readiness.empty()) {
    int met = 0;
    for (const json& g : readiness) {
      for (const json& c : Member(status, "conditions")) {
        if (Str(c, "type") == Str(g, "conditionType") && Str(c, "status") == "True") ++met;
      }
    }
    gates = std::to_string(met) + "/" + std::to_string(readiness.size());
  }
  return {Str(Member(pod, "metadata"), "name"),
          std::to_string(ready) + "/" + std::to_string(Member(spec, "containers").size()),
          PodStatus(pod),
          restart_cell,
          Since(Str(Member(pod, "metadata"), "creationTimestamp"), now),
          OrNone(Str(status, "podIP")),
          OrNone(Str(spec, "nodeName")),
          OrNone(Str(status, "nominatedNodeName")),
          gates};
}

// ---- nodes ---------------------------------------------------------------------------------

json NodeCells(const json& node, std::time_t now) {
  const json& status = Member(node, "status");
  std::string ready = "Unknown";
  for (const json& c : Member(status, "conditions")) {
    if (Str(c, "type") == "Ready") ready = Str(c, "status") == "True" ? "Ready" : "NotReady";
  }
  if (Member(Member(node, "spec"), "unschedulable") == true) ready += ",SchedulingDisabled";
  std::string roles;
  const std::string kRole = "node-role.kubernetes.io/";
  const json& labels = Member(Member(node, "metadata"), "labels");
  for (auto it = labels.begin(); labels.is_object() && it != labels.end(); ++it) {
    if (it.key().rfind(kRole, 0) == 0 && it.key().size() > kRole.size()) {
      roles += (roles.empty() ? "" : ",") + it.key().substr(kRole.size());
    }
  }
  std::string internal, external;
  for (const json& a : Member(status, "addresses")) {
    if (Str(a, "type") == "InternalIP" && internal.empty()) internal = Str(a, "address");
    if (Str(a, "type") == "ExternalIP" && external.empty()) external = Str(a, "address");
  }
  const json& info = Member(status, "nodeInfo");
  return {Str(Member(node, "metadata"), "name"),
          ready,
          OrNone(roles),
          Since(Str(Member(node, "metadata"), "creationTimestamp"), now),
          Str(info, "kubeletVersion"),
          OrNone(internal),
          OrNone(external),
          Str(info, "osImage").empty() ? "<unknown>" : Str(info, "osImage"),
          Str(info, "kernelVersion").empty() ? "<unknown>" : Str(info, "kernelVersion"),
          Str(info, "containerRuntimeVersion").empty() ? "<unknown>"
                                                       : Str(info, "containerRuntimeVersion")};
}

// ---- events (core/v1 and events.k8s.io/v1 field names) -------------------------------------

json EventCells(const json& ev, std::time_t now) {
  // events.k8s.io/v1 calls the object "regarding" and the message "note".
  const json& obj = Member(ev, "involvedObject").is_object() ? Member(ev, "involvedObject")
                                                             : Member(ev, "regarding");
  std::string kind = Str(obj, "kind");
  for (char& c : kind) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  std::string last = Str(ev, "lastTimestamp");
  if (last.empty()) last = Str(Member(ev, "series"), "lastObservedTime");
  if (last.empty()) last = Str(ev, "eventTime");
  std::string first = Str(ev, "firstTimestamp");
  if (first.empty()) first = Str(ev, "eventTime");
  std::string source = Str(Member(ev, "source"), "component");
  if (source.empty()) source = Str(ev, "reportingController");
  if (!Str(Member(ev, "source"), "host").empty())
    source += ", " + Str(Member(ev, "source"), "host");
  long long count =
      Member(ev, "count").is_number_integer() ? Member(ev, "count").get<long long>() : 1;
  if (Member(Member(ev, "series"), "count").is_number_integer()) {
    count = Member(Member(ev, "series"), "count").get<long long>();
  }
  std::string message = Str(ev, "message");
  if (message.empty()) message = Str(ev, "note");
  return {last.empty() ? "<unknown>" : Since(last, now),
          Str(ev, "type"),
          Str(ev, "reason"),
          kind + "/" + Str(obj, "name"),
          Str(obj, "fieldPath"),
          source,
          message,
          first.empty() ? "<unknown>" : Since(first, now),
          count,
          Str(Member(ev, "metadata"), "name")};
}

}  // namespace

std::string HumanDuration(long long s) {
  if (s < -1) return "<invalid>";
  if (s < 0) return "0s";
  if (s < 120) return std::to_string(s) + "s";
  const long long minutes = s / 60, hours = s / 3600, days = hours / 24;
  if (minutes < 10) {
    return s % 60 == 0 ? std::to_string(minutes) + "m"
                       : std::to_string(minutes) + "m" + std::to_string(s % 60) + "s";
  }
  if (minutes < 180) return std::to_string(minutes) + "m";
  if (hours < 8) {
    return minutes % 60 == 0 ? std::to_string(hours) + "h"
                             : std::to_string(hours) + "h" + std::to_string(minutes % 60) + "m";
  }
  if (hours < 48) return std::to_string(hours) + "h";
  if (hours < 24 * 8) {
    return hours % 24 == 0 ? std::to_string(days) + "d"
                           : std::to_string(days) + "d" + std::to_string(hours % 24) + "h";
  }
  if (hours < 24 * 365 * 2) return std::to_string(days) + "d";
  const long long years = days / 365;
  if (hours < 24 * 365 * 8) {
    return days % 365 == 0 ? std::to_string(years) + "y"
                           : std::to_string(years) + "y" + std::to_string(days % 365) + "d";
  }
  return std::to_string(years) + "y";
}

json TableOf(const ResourceInfo& r, const std::vector<std::shared_ptr<const json>>& objects,
             int64_t revision, std::time_t now) {
  json columns;
  const std::string& kind = r.kind;
  if (kind == "Pod") {
    columns = {Column("Name", "string", 0, "name"),
               Column("Ready", "string"),
               Column("Status", "string"),
               Column("Restarts", "string"),
               Column("Age", "string"),
               Column("IP", "string", 1),
               Column("Node", "string", 1),
               Column("Nominated Node", "string", 1),
               Column("Readiness Gates", "string", 1)};
  } else if (kind == "Node") {
    columns = {Column("Name", "string", 0, "name"),
               Column("Status", "string"),
               Column("Roles", "string"),
               Column("Age", "string"),
               Column("Version", "string"),
               Column("Internal-IP", "string", 1),
               Column("External-IP", "string", 1),
               Column("OS-Image", "string", 1),
               Column("Kernel-Version", "string", 1),
               Column("Container-Runtime", "string", 1)};
  } else if (kind == "Event") {
    columns = {Column("Last Seen", "string"),    Column("Type", "string"),
               Column("Reason", "string"),       Column("Object", "string"),
               Column("Subobject", "string", 1), Column("Source", "string", 1),
               Column("Message", "string"),      Column("First Seen", "string", 1),
               Column("Count", "integer", 1),    Column("Name", "string", 1, "name")};
  } else if (kind == "Lease") {
    columns = {Column("Name", "string", 0, "name"), Column("Holder", "string"),
               Column("Age", "string")};
  } else if (kind == "Namespace") {
    columns = {Column("Name", "string", 0, "name"), Column("Status", "string"),
               Column("Age", "string")};
  } else {
    columns = {Column("Name", "string", 0, "name"), Column("Age", "string")};
  }
  json rows = json::array();
  for (const std::shared_ptr<const json>& o : objects) {
    const json& md = Member(*o, "metadata");
    json cells;
    if (kind == "Pod") {
      cells = PodCells(*o, now);
    } else if (kind == "Node") {
      cells = NodeCells(*o, now);
    } else if (kind == "Event") {
      cells = EventCells(*o, now);
    } else if (kind == "Lease") {
      cells = {Str(md, "name"), OrNone(Str(Member(*o, "spec"), "holderIdentity")),
               Since(Str(md, "creationTimestamp"), now)};
    } else if (kind == "Namespace") {
      cells = {Str(md, "name"), FieldValue(*o, "status.phase"),
               Since(Str(md, "creationTimestamp"), now)};
    } else {
      cells = {Str(md, "name"), Since(Str(md, "creationTimestamp"), now)};
    }
    json partial = {
        {"kind", "PartialObjectMetadata"}, {"apiVersion", "meta.k8s.io/v1"}, {"metadata", md}};
    rows.push_back({{"cells", cells}, {"object", partial}});
  }
  return {{"kind", "Table"},
          {"apiVersion", "meta.k8s.io/v1"},
          {"metadata", {{"resourceVersion", std::to_string(revision)}}},
          {"columnDefinitions", columns},
          {"rows", rows}};
}

}  // namespace hami::sim
