// Fuzzes the node monitor's reading of a HAMi-core 1.x region: the file is writable from inside
// a container, so every count and field in it is untrusted. The input becomes the start of a
// region file of the right size and magic; every accessor must stay inside the mapping.
#include <fcntl.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <unistd.h>

#include <cstring>
#include <string>
#include <vector>

#include "monitor/region_access.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const std::string path = [] {
    char tmpl[] = "/tmp/fuzz-region-access-XXXXXX";
    int fd = mkstemp(tmpl);
    if (fd >= 0) close(fd);
    return std::string(tmpl);
  }();
  using hami::monitor::kHamiCoreV1Size;
  std::vector<unsigned char> file(kHamiCoreV1Size, 0);
  // The fuzzer's bytes go to the header (counts, limits) and, mirrored, to the tail (process
  // count, feedback fields), the places a hostile container would aim at.
  std::memcpy(file.data(), data, size < file.size() ? size : file.size());
  for (size_t i = 0; i < size && i < 64; ++i) file[kHamiCoreV1Size - 64 + i] = data[i];
  int32_t head[2] = {hami::monitor::kHamiCoreMagic, 1};
  std::memcpy(file.data(), head, sizeof(head));
  int fd = open(path.c_str(), O_RDWR | O_TRUNC);
  if (fd < 0) return 0;
  bool ok = write(fd, file.data(), file.size()) == static_cast<ssize_t>(file.size());
  close(fd);
  if (!ok) return 0;
  std::string error;
  auto r = hami::monitor::OpenRegion(path, &error);
  if (r == nullptr) __builtin_trap();  // a well-formed header must be accepted
  for (int i = 0; i < r->DeviceCount(); ++i) (void)r->Device(i);
  for (int i = 0; i < r->SlotCount(); ++i) (void)r->Slot(i);
  // Indexes a caller remembered from before the count shrank.
  if (r->Slot(r->SlotCount()).pid != 0 || r->Slot(1 << 20).pid != 0) __builtin_trap();
  (void)r->LastKernelTime();
  (void)r->FindDevice("GPU-x");
  if (r->DeviceCount() > 16 || r->SlotCount() > 1024) __builtin_trap();
  return 0;
}
