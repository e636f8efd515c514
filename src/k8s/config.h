// RestConfig: where the API server is and how to authenticate, from a kubeconfig or from the
// in-cluster service account.
//
//   HAMI_ASSIGN_OR_RETURN(RestConfig cfg, LoadKubeconfigFile("/root/.kube/config"));
//   HAMI_ASSIGN_OR_RETURN(RestConfig cfg, LoadInClusterConfig());
//
// Kubeconfig fields read: current-context; clusters[].cluster.{server, certificate-authority,
// certificate-authority-data, insecure-skip-tls-verify, tls-server-name}; users[].user.{token,
// tokenFile, client-certificate[-data], client-key[-data]}; contexts[].context.{cluster, user,
// namespace}. File paths are relative to the kubeconfig's directory; *-data fields are base64.
// Certificates and keys are loaded into memory here, so the transport never reads files; the
// token file (which rotates in-cluster) is re-read by the client. Errors name the offending field.
//
// Thread safety: pure functions over their inputs (and the files they name).
#pragma once

#include <chrono>
#include <functional>
#include <optional>
#include <string>
#include <string_view>

#include "common/status.h"

namespace hami::k8s {

struct TlsConfig {
  std::string ca_pem{};           // empty: the system trust store
  std::string client_cert_pem{};  // with client_key_pem: client certificate authentication
  std::string client_key_pem{};
  bool insecure_skip_verify = false;
  std::string server_name{};  // SNI / verification name override; empty: the URL's host
};

struct RestConfig {
  std::string server{};  // "https://host:port" (a path prefix is allowed)
  TlsConfig tls{};
  std::string bearer_token{};       // static token
  std::string bearer_token_file{};  // re-read periodically when set (wins over bearer_token)
  std::string ns = "default";       // the context's namespace
  std::string user_agent = "hami-cpp";
  std::chrono::milliseconds timeout{30000};  // per non-watch request
  double qps = 50;                           // <= 0: unlimited
  int burst = 100;
};

// Parses kubeconfig YAML. `base_dir` resolves relative file paths; `context` overrides
// current-context when non-empty.
Result<RestConfig> ParseKubeconfig(std::string_view yaml, const std::string& base_dir,
                                   std::string_view context = "");
Result<RestConfig> LoadKubeconfigFile(const std::string& path, std::string_view context = "");

struct InClusterOptions {
  std::string dir = "/var/run/secrets/kubernetes.io/serviceaccount";
  // Environment lookup (KUBERNETES_SERVICE_HOST / _PORT); defaults to getenv.
  std::function<std::optional<std::string>(const std::string&)> getenv{};
};
Result<RestConfig> LoadInClusterConfig(const InClusterOptions& options = {});

// What every binary does with its --kubeconfig: that file (and `context`) when given, else the
// in-cluster service account.
Result<RestConfig> LoadRestConfig(const std::string& kubeconfig, std::string_view context = "");

}  // namespace hami::k8s
