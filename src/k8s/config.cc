#include "k8s/config.h"

#include <yaml-cpp/yaml.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>

#include "common/base64.h"
#include "common/file_util.h"

namespace hami::k8s {

namespace {

std::string JoinPath(const std::string& base_dir, const std::string& path) {
  if (path.empty() || path[0] == '/' || base_dir.empty()) return path;
  return base_dir + "/" + path;
}

// Finds the entry named `name` in a kubeconfig list (clusters/users/contexts) and returns its
// `inner` map (cluster/user/context).
Result<YAML::Node> FindNamed(const YAML::Node& root, const char* list, const char* inner,
                             const std::string& name) {
  YAML::Node items = root[list];
  if (!items || items.IsNull()) return InvalidArgumentError(std::string(list) + ": missing");
  if (!items.IsSequence()) return InvalidArgumentError(std::string(list) + ": not a list");
  for (size_t i = 0; i < items.size(); ++i) {
    YAML::Node item = items[i];
    if (!item.IsMap()) {
      return InvalidArgumentError(std::string(list) + "[" + std::to_string(i) + "]: not a map");
    }
    YAML::Node n = item["name"];
    if (n && n.IsScalar() && n.Scalar() == name) {
      YAML::Node body = item[inner];
      if (!body || body.IsNull()) return YAML::Node(YAML::NodeType::Map);
      if (!body.IsMap()) {
        return InvalidArgumentError(std::string(list) + "[" + name + "]." + inner + ": not a map");
      }
      return body;
    }
  }
  return InvalidArgumentError(std::string(list) + ": no entry named \"" + name + "\"");
}

// A scalar string field; "" when absent.
Result<std::string> Str(const YAML::Node& map, const char* key, const std::string& where) {
  YAML::Node v = map[key];
  if (!v || v.IsNull()) return std::string();
  if (!v.IsScalar()) return InvalidArgumentError(where + "." + key + ": not a string");
  return v.Scalar();
}

// Loads PEM material from `<key>-data` (base64) or `<key>` (a file path).
Result<std::string> Material(const YAML::Node& map, const std::string& key,
                             const std::string& where, const std::string& base_dir) {
  HAMI_ASSIGN_OR_RETURN(std::string data, Str(map, (key + "-data").c_str(), where));
  if (!data.empty()) {
    Result<std::string> decoded = Base64Decode(data);
    if (!decoded.ok()) return decoded.status().WithContext(where + "." + key + "-data");
    return decoded;
  }
  HAMI_ASSIGN_OR_RETURN(std::string path, Str(map, key.c_str(), where));
  if (path.empty()) return std::string();
  Result<std::string> content = ReadFileToString(JoinPath(base_dir, path));
  if (!content.ok()) {
    return InvalidArgumentError(where + "." + key + ": " + content.status().message());
  }
  return content;
}

Result<RestConfig> ParseKubeconfigNode(const YAML::Node& root, const std::string& base_dir,
                                       std::string_view context_override) {
  if (!root.IsMap()) return InvalidArgumentError("kubeconfig: not a YAML map");
  std::string ctx_name(context_override);
  if (ctx_name.empty()) {
    HAMI_ASSIGN_OR_RETURN(ctx_name, Str(root, "current-context", "kubeconfig"));
  }
  if (ctx_name.empty()) return InvalidArgumentError("current-context: not set");
  HAMI_ASSIGN_OR_RETURN(YAML::Node ctx, FindNamed(root, "contexts", "context", ctx_name));
  std::string ctx_where = "contexts[" + ctx_name + "].context";
  HAMI_ASSIGN_OR_RETURN(std::string cluster_name, Str(ctx, "cluster", ctx_where));
  HAMI_ASSIGN_OR_RETURN(std::string user_name, Str(ctx, "user", ctx_where));
  HAMI_ASSIGN_OR_RETURN(std::string ns, Str(ctx, "namespace", ctx_where));
  if (cluster_name.empty()) return InvalidArgumentError(ctx_where + ".cluster: missing");

  RestConfig cfg;
  if (!ns.empty()) cfg.ns = ns;

  HAMI_ASSIGN_OR_RETURN(YAML::Node cluster, FindNamed(root, "clusters", "cluster", cluster_name));
  std::string cw = "clusters[" + cluster_name + "].cluster";
  HAMI_ASSIGN_OR_RETURN(cfg.server, Str(cluster, "server", cw));
  if (cfg.server.empty()) return InvalidArgumentError(cw + ".server: missing");
  if (cfg.server.rfind("https://", 0) != 0 && cfg.server.rfind("http://", 0) != 0) {
    return InvalidArgumentError(cw + ".server: \"" + cfg.server +
                                "\" is not an http:// or https:// URL");
  }
  while (!cfg.server.empty() && cfg.server.back() == '/') cfg.server.pop_back();
  HAMI_ASSIGN_OR_RETURN(cfg.tls.ca_pem, Material(cluster, "certificate-authority", cw, base_dir));
  HAMI_ASSIGN_OR_RETURN(cfg.tls.server_name, Str(cluster, "tls-server-name", cw));
  HAMI_ASSIGN_OR_RETURN(std::string insecure, Str(cluster, "insecure-skip-tls-verify", cw));
  if (insecure == "true") {
    cfg.tls.insecure_skip_verify = true;
  } else if (!insecure.empty() && insecure != "false") {
    return InvalidArgumentError(cw + ".insecure-skip-tls-verify: expected true or false, got \"" +
                                insecure + "\"");
  }
  if (cfg.tls.insecure_skip_verify && !cfg.tls.ca_pem.empty()) {
    return InvalidArgumentError(cw +
                                ": certificate-authority and insecure-skip-tls-verify are "
                                "mutually exclusive");
  }

  if (!user_name.empty()) {
    HAMI_ASSIGN_OR_RETURN(YAML::Node user, FindNamed(root, "users", "user", user_name));
    std::string uw = "users[" + user_name + "].user";
    HAMI_ASSIGN_OR_RETURN(cfg.bearer_token, Str(user, "token", uw));
    HAMI_ASSIGN_OR_RETURN(std::string token_file, Str(user, "tokenFile", uw));
    if (!token_file.empty()) {
      cfg.bearer_token_file = JoinPath(base_dir, token_file);
      Result<std::string> probe = ReadFileToString(cfg.bearer_token_file);
      if (!probe.ok()) return InvalidArgumentError(uw + ".tokenFile: " + probe.status().message());
    }
    HAMI_ASSIGN_OR_RETURN(cfg.tls.client_cert_pem,
                          Material(user, "client-certificate", uw, base_dir));
    HAMI_ASSIGN_OR_RETURN(cfg.tls.client_key_pem, Material(user, "client-key", uw, base_dir));
    if (cfg.tls.client_cert_pem.empty() != cfg.tls.client_key_pem.empty()) {
      return InvalidArgumentError(uw +
                                  ": client-certificate and client-key must be given together");
    }
  }
  return cfg;
}

}  // namespace

Result<RestConfig> ParseKubeconfig(std::string_view yaml, const std::string& base_dir,
                                   std::string_view context) {
  try {
    YAML::Node root = YAML::Load(std::string(yaml));
    return ParseKubeconfigNode(root, base_dir, context);
  } catch (const YAML::Exception& e) {
    return InvalidArgumentError(std::string("kubeconfig: ") + e.what());
  } catch (const std::exception& e) {
    return InvalidArgumentError(std::string("kubeconfig: ") + e.what());
  }
}

Result<RestConfig> LoadKubeconfigFile(const std::string& path, std::string_view context) {
  HAMI_ASSIGN_OR_RETURN(std::string text, ReadFileToString(path));
  size_t slash = path.rfind('/');
  std::string dir = slash == std::string::npos ? "." : path.substr(0, slash);
  Result<RestConfig> cfg = ParseKubeconfig(text, dir, context);
  if (!cfg.ok()) return cfg.status().WithContext(path);
  return cfg;
}

Result<RestConfig> LoadInClusterConfig(const InClusterOptions& options) {
  auto env = [&](const std::string& name) -> std::optional<std::string> {
    if (options.getenv) return options.getenv(name);
    const char* v = std::getenv(name.c_str());
    if (v == nullptr) return std::nullopt;
    return std::string(v);
  };
  std::optional<std::string> host = env("KUBERNETES_SERVICE_HOST");
  std::optional<std::string> port = env("KUBERNETES_SERVICE_PORT");
  if (!host || host->empty() || !port || port->empty()) {
    return FailedPreconditionError(
        "not running in a cluster: KUBERNETES_SERVICE_HOST and KUBERNETES_SERVICE_PORT must be "
        "set");
  }
  for (char c : *port) {
    if (c < '0' || c > '9') {
      return InvalidArgumentError("KUBERNETES_SERVICE_PORT: \"" + *port + "\" is not a port");
    }
  }
  RestConfig cfg;
  std::string h = host->find(':') != std::string::npos ? "[" + *host + "]" : *host;
  cfg.server = "https://" + h + ":" + *port;
  cfg.bearer_token_file = options.dir + "/token";
  Result<std::string> token = ReadFileToString(cfg.bearer_token_file);
  if (!token.ok())
    return InvalidArgumentError("service account token: " + token.status().message());
  Result<std::string> ca = ReadFileToString(options.dir + "/ca.crt");
  if (!ca.ok()) return InvalidArgumentError("service account ca.crt: " + ca.status().message());
  cfg.tls.ca_pem = std::move(*ca);
  if (Result<std::string> ns = ReadFileToString(options.dir + "/namespace"); ns.ok()) {
    std::string v = *ns;
    while (!v.empty() && (v.back() == '\n' || v.back() == ' ')) v.pop_back();
    if (!v.empty()) cfg.ns = v;
  }
  return cfg;
}

Result<RestConfig> LoadRestConfig(const std::string& kubeconfig, std::string_view context) {
  return kubeconfig.empty() ? LoadInClusterConfig() : LoadKubeconfigFile(kubeconfig, context);
}

}  // namespace hami::k8s
