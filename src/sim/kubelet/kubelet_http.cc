// Kubelet::Impl's HTTP endpoints: /containerLogs/<ns>/<pod>/<container> (kubectl logs through
// the API server) and /exec/<ns>/<pod>/<container> over WebSocket (kubectl exec).
#include "sim/kubelet/kubelet_internal.h"

#include "net/websocket.h"

namespace hami::sim {

using kubelet_internal::ReadFile;

namespace {

// <ns>/<pod>/<container> after `prefix` in the path; empty when it is not that shape.
std::vector<std::string> PodContainerPath(const std::string& path, const std::string& prefix) {
  std::string rest = path.substr(prefix.size());
  std::vector<std::string> parts;
  size_t start = 0;
  while (start <= rest.size()) {
    size_t slash = rest.find('/', start);
    if (slash == std::string::npos) slash = rest.size();
    parts.push_back(rest.substr(start, slash - start));
    start = slash + 1;
  }
  if (parts.size() != 3 || parts[0].empty() || parts[1].empty() || parts[2].empty()) return {};
  return parts;
}

}  // namespace

void Kubelet::Impl::ServeExec(const net::HttpRequest& req, net::HttpResponse& res) {
  // /exec/<ns>/<pod>/<container>?command=...&input=1&output=1&error=1&tty=1
  std::vector<std::string> parts = PodContainerPath(req.path, "/exec/");
  if (parts.empty()) return res.SetText(400, "expected /exec/<namespace>/<pod>/<container>\n");
  Result<ExecRequest> exec = ParseExecRequest(req);
  if (!exec.ok()) return res.SetText(400, exec.status().message() + "\n");
  std::shared_ptr<PodWorker> w = WorkerOf(parts[0], parts[1]);
  if (!w) return res.SetText(404, "pod " + parts[0] + "/" + parts[1] + " is not on this node\n");
  Result<ExecProcess> process = w->ExecInto(parts[2], exec->command);
  if (!process.ok()) {
    return res.SetText(process.status().code() == StatusCode::kNotFound ? 404 : 400,
                       process.status().message() + "\n");
  }
  std::string why;
  if (!net::ws::IsUpgradeRequest(req, &why)) {
    std::string upgrade = req.Header("Upgrade");
    if (upgrade.rfind("SPDY", 0) == 0 || upgrade.rfind("spdy", 0) == 0) {
      return res.SetText(400, "the simulated kubelet streams exec over WebSocket only "
                              "(v5.channel.k8s.io, kubectl 1.30 or newer), not " + upgrade + "\n");
    }
    return res.SetText(400, "exec needs a WebSocket upgrade: " + why + "\n");
  }
  std::string protocol = ChooseExecProtocol(net::ws::OfferedProtocols(req));
  if (protocol.empty()) {
    return res.SetText(400, std::string("none of the offered subprotocols is spoken here; ") +
                                "this kubelet speaks " + kExecProtocolV5 + " and " +
                                kExecProtocolV4 + "\n");
  }
  HAMI_LOG(Info) << "kubelet " << options_.node_name << ": exec in " << parts[0] << "/"
                 << parts[1] << "/" << parts[2] << ": " << exec->command[0]
                 << (exec->tty ? " (tty)" : "");
  res.status = 101;
  res.headers = {{"Upgrade", "websocket"},
                 {"Sec-WebSocket-Accept", net::ws::AcceptKey(req.Header("Sec-WebSocket-Key"))},
                 {"Sec-WebSocket-Protocol", protocol}};
  res.upgrade = [exec = *exec, process = *process, protocol](net::UpgradedConnection& conn) {
    RunExecSession(conn, protocol, exec, process);
  };
}

void Kubelet::Impl::ServeLogs(const net::HttpRequest& req, net::HttpResponse& res) {
  // /containerLogs/<ns>/<pod>/<container>
  std::vector<std::string> parts = PodContainerPath(req.path, "/containerLogs/");
  if (parts.empty()) {
    return res.SetText(400, "expected /containerLogs/<namespace>/<pod>/<container>\n");
  }
  std::shared_ptr<PodWorker> w = WorkerOf(parts[0], parts[1]);
  if (!w) return res.SetText(404, "pod " + parts[0] + "/" + parts[1] + " is not on this node\n");
  std::string path = w->LogPath(parts[2]);
  if (path.empty()) {
    return res.SetText(404, "container " + parts[2] + " is not in pod " + parts[1] + "\n");
  }
  std::string text = ReadFile(path).value_or("");
  if (req.HasParam("tailLines")) {
    long n = std::strtol(req.Param("tailLines").c_str(), nullptr, 10);  // NOLINT(runtime/int)
    if (n >= 0) {
      size_t pos = text.size();
      if (pos > 0 && text[pos - 1] == '\n') --pos;
      for (long i = 0; i < n && pos != std::string::npos; ++i) {  // NOLINT(runtime/int)
        pos = pos == 0 ? std::string::npos : text.rfind('\n', pos - 1);
      }
      text = pos == std::string::npos ? text : text.substr(pos + 1);
    }
  }
  res.SetText(200, std::move(text));
}

}  // namespace hami::sim
