#include "ctl/layout.h"

#include <errno.h>
#include <string.h>
#include <unistd.h>

namespace hami::ctl {
namespace {

std::string Dirname(const std::string& path) {
  size_t slash = path.find_last_of('/');
  if (slash == std::string::npos) return ".";
  if (slash == 0) return "/";
  return path.substr(0, slash);
}

}  // namespace

Layout LayoutAt(const std::string& prefix, const std::string& hamictl) {
  Layout l;
  l.hamictl = hamictl;
  l.bin_dir = prefix + "/bin";
  l.lib = prefix + "/lib/libvgpu.so";
  l.sim_dir = prefix + "/sim";
  l.probe = l.bin_dir + "/vgpu_probe";
  return l;
}

bool SelfLayout(Layout* layout, std::string* error) {
  char buf[4096];
  ssize_t n = readlink("/proc/self/exe", buf, sizeof(buf) - 1);
  if (n <= 0) {
    *error = std::string("cannot read /proc/self/exe: ") + strerror(errno);
    return false;
  }
  std::string self(buf, static_cast<size_t>(n));
  *layout = LayoutAt(Dirname(Dirname(self)), self);
  return true;
}

}  // namespace hami::ctl
