#include "common/go_flags.h"

#include <algorithm>

namespace hami {

std::vector<std::string> GoStyleArgs(int argc, char** argv) {
  std::vector<std::string> out;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (a.size() > 2 && a[0] == '-' && a[1] != '-') a = "-" + a;
    out.push_back(std::move(a));
  }
  std::reverse(out.begin(), out.end());
  return out;
}

}  // namespace hami
