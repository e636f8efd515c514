// Fuzzes what the node monitor parses from other processes' /proc files and directory names:
// a process chooses its own command name (inside /proc/<pid>/stat) and a pod's container
// directory name comes from the node. Any text: no crash, no out-of-range read, and answers that
// are consistent with the text.
#include <stddef.h>
#include <stdint.h>

#include <string>

#include "monitor/monitor.h"
#include "monitor/procfs.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string text(reinterpret_cast<const char*>(data), size);
  (void)hami::monitor::ParseStatStartTime(text);
  for (int pid : hami::monitor::ParseNsPids(text)) {
    if (pid <= 0) __builtin_trap();  // only positive PIDs come out
  }
  auto files = hami::monitor::ParseMappedFiles(text);
  for (size_t i = 1; i < files.size(); ++i) {
    if (!(files[i - 1] < files[i])) __builtin_trap();  // sorted, each once
  }
  if (auto name = hami::monitor::ParseContainerDirName(text)) {
    if (name->pod_uid.empty() || name->container.empty() ||
        name->pod_uid + "_" + name->container != text) {
      __builtin_trap();
    }
  }
  return 0;
}
