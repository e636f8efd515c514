// Fuzzes DP_DISABLE_HEALTHCHECKS / DP_ENABLE_HEALTHCHECKS parsing: any text, no crash, and an
// entry the parser does not understand is reported, never silently dropped into the policy.
#include <stddef.h>
#include <stdint.h>

#include <string>

#include "deviceplugin/health.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string text(reinterpret_cast<const char*>(data), size);
  size_t nul = text.find('\0');
  std::string disable = text.substr(0, nul);
  std::string enable = nul == std::string::npos ? "" : text.substr(nul + 1);
  if (enable.find('\0') != std::string::npos) return 0;  // environment values hold no NUL
  std::vector<std::string> warnings;
  hami::deviceplugin::XidPolicy p =
      hami::deviceplugin::ParseXidPolicy(disable.c_str(), enable.c_str(), &warnings);
  if (disable != "all" && disable != "xids" && p.disabled) __builtin_trap();
  (void)p.MakesUnhealthy(79);
  return 0;
}
