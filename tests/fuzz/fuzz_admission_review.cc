// Fuzzes the admission webhook: any POST /webhook body. A result is either a clean error or a
// JSON AdmissionReview response whose patch (when present) is base64 of a JSON array. Every
// vendor module is enabled.
#include <stddef.h>
#include <stdint.h>

#include <nlohmann/json.hpp>
#include <string_view>

#include "device/config.h"
#include "device/vendor.h"
#include "extender/webhook/admission.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  // Every vendor module, so that their webhook rules (edits of limits, env, pod annotations)
  // meet the fuzzed pods too.
  static const hami::device::DeviceConfig config =
      hami::device::ParseDeviceConfigYaml(
          "nvidia: {}\nhygon: {}\ncambricon: {}\nenflame: {}\nkunlun: {}\nmthreads: {}\n"
          "biren: {}\nvastai: {}\nmetax: {}\namd: {}\nvnpus: {}\niluvatars: ~\n")
          .value();
  static const hami::device::VendorRegistry* vendors =
      new hami::device::VendorRegistry(hami::device::VendorRegistry::FromConfig(
                                           config, {.enable_ascend = true, .enable_iluvatar = true})
                                           .value());
  std::string_view body(reinterpret_cast<const char*>(data), size);
  hami::Result<std::string> out = hami::extender::HandleAdmissionReview(
      body, *vendors, config, hami::extender::WebhookOptions{}, nullptr);
  if (!out.ok()) {
    if (out.status().message().empty()) __builtin_trap();
    return 0;
  }
  nlohmann::json j = nlohmann::json::parse(*out, nullptr, false);
  if (!j.is_object() || !j.contains("response") || !j["response"].contains("uid")) __builtin_trap();
  return 0;
}
