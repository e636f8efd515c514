// Fuzzes the admission webhook: any POST /webhook body. A result is either a clean error or a
// JSON AdmissionReview response whose patch (when present) is base64 of a JSON array.
#include <stddef.h>
#include <stdint.h>

#include <nlohmann/json.hpp>
#include <string_view>

#include "device/config.h"
#include "device/vendor.h"
#include "scheduler/webhook/admission.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const hami::device::DeviceConfig config = hami::device::DefaultDeviceConfig();
  static const hami::device::VendorRegistry* vendors =
      new hami::device::VendorRegistry(hami::device::VendorRegistry::FromConfig(config).value());
  std::string_view body(reinterpret_cast<const char*>(data), size);
  hami::Result<std::string> out = hami::scheduler::HandleAdmissionReview(
      body, *vendors, config, hami::scheduler::WebhookOptions{}, nullptr);
  if (!out.ok()) {
    if (out.status().message().empty()) __builtin_trap();
    return 0;
  }
  nlohmann::json j = nlohmann::json::parse(*out, nullptr, false);
  if (!j.is_object() || !j.contains("response") || !j["response"].contains("uid")) __builtin_trap();
  return 0;
}
