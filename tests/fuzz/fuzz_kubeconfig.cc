// Fuzzes the kubeconfig parser (YAML from an untrusted file): it must return a Status, never crash
// or throw.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "common/base64.h"
#include "k8s/config.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view text(reinterpret_cast<const char*>(data), size);
  hami::Result<hami::k8s::RestConfig> cfg = hami::k8s::ParseKubeconfig(text, "/nonexistent");
  if (cfg.ok() && cfg->server.empty()) __builtin_trap();  // a parsed config always has a server
  (void)hami::Base64Decode(text);
  return 0;
}
