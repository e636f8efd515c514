// hami-simctl: inspect and poke the simulated GPU node. See commands.h and
// src/sim/gpu/README.md.

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <string>

#include "commands.h"
#include "sim/gpu/shared_state.h"

namespace {

void Usage(FILE* f) {
  fprintf(f,
          "usage: hami-simctl [--state PATH] COMMAND\n"
          "  status                              devices, memory per process, utilisation\n"
          "  inject-xid --device N --xid CODE    post an XID error on physical device N\n"
          "  reset                               discard the shared state file\n"
          "The state file is --state, else $HAMI_SIM_STATE, else /tmp/hami-sim/state.\n");
}

bool ParseNumber(const char* s, unsigned long long max, unsigned long long* out) {
  if (s == nullptr || *s == '\0' || *s == '-') return false;
  char* end = nullptr;
  unsigned long long v = strtoull(s, &end, 0);
  if (*end != '\0' || v > max) return false;
  *out = v;
  return true;
}

}  // namespace

int main(int argc, char** argv) {
  std::string state_path = hami::sim::StatePathFromEnv();
  int i = 1;
  if (i + 1 < argc && strcmp(argv[i], "--state") == 0) {
    state_path = argv[i + 1];
    i += 2;
  }
  if (i >= argc) {
    Usage(stderr);
    return 2;
  }
  std::string cmd = argv[i++];
  if (cmd == "status" && i == argc) return hami::simctl::Status(state_path, stdout, stderr);
  if (cmd == "reset" && i == argc) return hami::simctl::Reset(state_path, stdout, stderr);
  if (cmd == "inject-xid") {
    unsigned long long device = 0, xid = 0;
    bool have_device = false, have_xid = false;
    for (; i + 1 < argc; i += 2) {
      if (strcmp(argv[i], "--device") == 0) {
        have_device = ParseNumber(argv[i + 1], 1023, &device);
      } else if (strcmp(argv[i], "--xid") == 0) {
        have_xid = ParseNumber(argv[i + 1], 0xFFFFFFFFull, &xid);
      } else {
        break;
      }
    }
    if (i == argc && have_device && have_xid) {
      return hami::simctl::InjectXid(state_path, static_cast<int>(device), xid, stdout, stderr);
    }
  }
  if (cmd == "help" || cmd == "--help" || cmd == "-h") {
    Usage(stdout);
    return 0;
  }
  Usage(stderr);
  return 2;
}
