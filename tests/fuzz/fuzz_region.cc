// Fuzzes region files: arbitrary bytes written where a region is expected (a corrupted or
// foreign file, as the node monitor or hamictl may find). Attach must reject or accept without
// crashing, and read-only inspection of an accepted file must stay in bounds.
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <string>
#include <vector>

#include "vgpu/log.h"
#include "vgpu/region.h"

using namespace hami::vgpu;  // NOLINT

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  SetLogLevel(-1);
  static std::string path = [] {
    char tmpl[] = "/tmp/hami-fuzz-region-XXXXXX";
    int fd = mkstemp(tmpl);
    close(fd);
    return std::string(tmpl);
  }();
  // Inputs are placed over a valid region so that the fuzzer explores past the header checks:
  // the first 8 bytes of input decide whether the magic is kept.
  static std::vector<uint8_t> valid = [] {
    unlink(path.c_str());
    RegionInit init;
    init.mem_limit[0] = 1 << 30;
    char err[256];
    Region* r = Region::Open(path.c_str(), init, err, sizeof(err));
    std::vector<uint8_t> bytes(reinterpret_cast<uint8_t*>(r->header()),
                               reinterpret_cast<uint8_t*>(r->header()) + sizeof(RegionHeader));
    Region::Free(r);
    return bytes;
  }();
  std::vector<uint8_t> file = valid;
  size_t keep_header = size > 0 && (data[0] & 1) ? 16 : 0;
  for (size_t i = 0; i < size && keep_header + i < file.size(); ++i) {
    file[keep_header + i] = data[i];
  }
  if (size > 1 && (data[1] & 1)) file.resize(size);  // wrong sizes too
  FILE* f = fopen(path.c_str(), "w");
  fwrite(file.data(), 1, file.size(), f);
  fclose(f);
  truncate(path.c_str(), static_cast<off_t>(file.size() == valid.size() ? 0 : file.size()));
  f = fopen(path.c_str(), "r+");
  fwrite(file.data(), 1, file.size(), f);
  fclose(f);

  char err[256];
  Region* r = Region::Attach(path.c_str(), err, sizeof(err));
  if (r == nullptr) return 0;
  const RegionHeader* h = r->header();
  uint64_t sum = 0;
  for (int d = 0; d < kMaxDevices; ++d) sum += r->Used(d) + r->Limit(d);
  r->FindDevice("GPU-00000000-0000-0000-0000-000000000000");
  for (int s = 0; s < kMaxSlots; ++s) sum += h->slots[s].used[0].load();
  (void)sum;
  Region::Free(r);
  return 0;
}
