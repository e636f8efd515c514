// ApiServer's life cycle and accessors. Requests are answered by ApiServer::Impl, whose parts
// are spread over the api_server_*.cc files (see api_server_internal.h).
#include "sim/apiserver/api_server.h"

#include "common/base64.h"
#include "common/file_util.h"
#include "net/tls.h"
#include "sim/apiserver/api_server_internal.h"

namespace hami::sim {

ApiServer::ApiServer(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
ApiServer::~ApiServer() { Stop(); }

Status ApiServer::Impl::ConfigureTls(net::HttpServerOptions& server_options) {
  const ApiServerOptions& o = options;
  if (!o.tls_cert_file.empty() || !o.tls_key_file.empty()) {
    if (o.tls_cert_file.empty() || o.tls_key_file.empty()) {
      return InvalidArgumentError("--tls-cert and --tls-key go together");
    }
    server_options.tls = net::TlsOptions{o.tls_cert_file, o.tls_key_file};
    ca_pem = ReadFileToString(o.tls_cert_file).value_or("");
  } else if (o.self_signed) {
    HAMI_ASSIGN_OR_RETURN(
        net::CertificatePem pem,
        net::GenerateSelfSignedCertificate("hami-sim-apiserver", {"localhost"}, {"127.0.0.1"}));
    HAMI_ASSIGN_OR_RETURN(server_options.certificate, net::CertificateSource::FromPem(pem));
    ca_pem = pem.cert_pem;
  }
  return OkStatus();
}

Result<std::unique_ptr<ApiServer>> ApiServer::Start(ApiServerOptions options) {
  if (options.rbac && options.token.empty()) {
    return InvalidArgumentError("RBAC needs an administrator token (--token)");
  }
  auto impl = std::make_unique<Impl>(std::move(options));
  const ApiServerOptions& o = impl->options;
  net::HttpServerOptions http;
  http.host = o.host;
  http.port = o.port;
  http.worker_threads = o.worker_threads;
  http.keep_alive_timeout = std::chrono::seconds(10);
  HAMI_RETURN_IF_ERROR(impl->ConfigureTls(http));
  HAMI_ASSIGN_OR_RETURN(impl->http, net::HttpServer::Create(std::move(http)));
  impl->SeedNamespaces();
  if (o.on_write) impl->store.AddWriteListener([f = o.on_write](const ResourceInfo&) { f(); });

  net::HttpServer& s = *impl->http;
  impl->HandleDiscovery(s);
  impl->HandleOpenApi(s);
  impl->HandleResources(s);
  impl->watches.Start();
  HAMI_ASSIGN_OR_RETURN(impl->port, s.Start());
  // A wildcard bind address is reached through loopback (which the generated cert names too).
  std::string host = o.host == "0.0.0.0" || o.host.empty() ? "127.0.0.1" : o.host;
  impl->url =
      std::string(s.tls() ? "https://" : "http://") + host + ":" + std::to_string(impl->port);
  return std::unique_ptr<ApiServer>(new ApiServer(std::move(impl)));
}

void ApiServer::Stop() {
  if (!impl_->http) return;
  impl_->store.Close();
  impl_->watches.Stop();  // ends every watch stream
  impl_->http->Stop();
  impl_->http.reset();
}

int ApiServer::port() const { return impl_->port; }
std::string ApiServer::url() const { return impl_->url; }
bool ApiServer::tls() const { return !impl_->ca_pem.empty(); }
const std::string& ApiServer::ca_pem() const { return impl_->ca_pem; }
int64_t ApiServer::revision() const { return impl_->store.revision(); }

void ApiServer::ServeInProcess(const net::HttpRequest& req, net::HttpResponse& res) const {
  if (!impl_->http) {
    res.SetText(503, "the API server is stopped\n");
    return;
  }
  impl_->http->Serve(req, res);
}

std::map<std::string, uint64_t> ApiServer::RequestCounts() const {
  MutexLock lock(impl_->counts_mu);
  return impl_->request_counts;
}

std::string ApiServer::Kubeconfig(const std::string& token) const {
  const std::string& user_token = token.empty() ? impl_->options.token : token;
  std::string out =
      "apiVersion: v1\n"
      "kind: Config\n"
      "clusters:\n"
      "- name: hami-sim\n"
      "  cluster:\n"
      "    server: " +
      impl_->url + "\n";
  if (!impl_->ca_pem.empty()) {
    out += "    certificate-authority-data: " + Base64Encode(impl_->ca_pem) + "\n";
  }
  out += "users:\n- name: hami-sim\n  user:";
  out += user_token.empty() ? " {}\n" : "\n    token: " + user_token + "\n";
  out +=
      "contexts:\n"
      "- name: hami-sim\n"
      "  context:\n"
      "    cluster: hami-sim\n"
      "    user: hami-sim\n"
      "    namespace: default\n"
      "current-context: hami-sim\n";
  return out;
}

Status ApiServer::WriteKubeconfig(const std::string& path, const std::string& token) const {
  return hami::WriteFileAtomically(path, Kubeconfig(token));
}

Result<std::string> ApiServer::IssueServiceAccountToken(const std::string& ns,
                                                        const std::string& name) const {
  if (!impl_->options.rbac) return FailedPreconditionError("RBAC is off: tokens are not checked");
  return impl_->IssueToken(ns, name);
}

std::string ApiServer::AuthorizationReport() const { return impl_->DecisionReport(); }

}  // namespace hami::sim
