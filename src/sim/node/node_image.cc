#include "sim/node/node_image.h"

#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <set>
#include <sstream>

#include "common/file_util.h"
#include "common/subprocess.h"

namespace hami::sim {
namespace {

namespace fs = std::filesystem;

// A tool of the build machine by name: from $PATH, else the system folders.
std::string Tool(const std::string& name) {
  std::string found = FindOnPath(name);
  for (const char* dir : {"/usr/bin/", "/bin/", "/usr/sbin/", "/sbin/"}) {
    if (!found.empty()) break;
    if (access((dir + name).c_str(), X_OK) == 0) found = dir + name;
  }
  return found.empty() ? name : found;
}

// Merged /usr, as Debian bookworm: /lib and /lib64 are links into /usr.
std::string InImage(const std::string& host_path) {
  for (const char* top : {"/lib/", "/lib64/"}) {
    if (host_path.rfind(top, 0) == 0) return "/usr" + host_path;
  }
  return host_path;
}

Status Mkdirs(const std::string& path, int mode = 0755) {
  std::error_code ec;
  fs::create_directories(path, ec);
  if (ec) return InternalError("mkdir " + path + ": " + ec.message());
  chmod(path.c_str(), mode);
  return OkStatus();
}

// Copies `source` (following links) to `rootfs` + `dest`, stripped when `strip`.
Status Install(const std::string& rootfs, const std::string& dest, const std::string& source,
               bool strip) {
  if (!fs::exists(source)) return InvalidArgumentError(source + " does not exist (built?)");
  const std::string target = rootfs + dest;
  HAMI_RETURN_IF_ERROR(Mkdirs(fs::path(target).parent_path().string()));
  if (strip) {
    ProcessResult r = RunProcess({Tool("strip"), "--strip-unneeded", "-o", target, source}, {});
    if (r.exit_code != 0) return InternalError("strip " + source + ": " + r.err);
    return OkStatus();
  }
  std::error_code ec;
  fs::copy_file(source, target, fs::copy_options::overwrite_existing, ec);
  if (ec) return InternalError("copy " + source + ": " + ec.message());
  return OkStatus();
}

Status InstallLibraries(const std::string& rootfs, const std::vector<std::string>& elves) {
  std::set<std::string> libs;
  for (const std::string& elf : elves) {
    ProcessResult r = RunProcess({Tool("ldd"), elf}, {"PATH=/usr/bin:/bin", "LC_ALL=C"});
    // A static program: ldd says so and exits 1; it needs nothing.
    if (r.exit_code != 0 && r.out.find("not a dynamic") == std::string::npos &&
        r.err.find("not a dynamic") == std::string::npos) {
      return InternalError("ldd " + elf + ": " + r.err);
    }
    if (r.out.find("not found") != std::string::npos) {
      return InternalError("ldd " + elf + " misses a library:\n" + r.out);
    }
    for (const std::string& lib : ParseLddOutput(r.out)) libs.insert(lib);
  }
  for (const std::string& lib : libs) {
    HAMI_RETURN_IF_ERROR(Install(rootfs, InImage(lib), lib, /*strip=*/false));
  }
  return OkStatus();
}

Status InstallBusybox(const std::string& rootfs, const std::string& busybox) {
  HAMI_RETURN_IF_ERROR(Install(rootfs, "/bin/busybox", busybox, /*strip=*/false));
  ProcessResult r = RunProcess({busybox, "--list"}, {});
  if (r.exit_code != 0) return InternalError(busybox + " --list: " + r.err);
  std::istringstream applets(r.out);
  for (std::string a; std::getline(applets, a);) {
    if (a.empty() || a == "busybox" || a.find('/') != std::string::npos) continue;
    const std::string link = rootfs + "/bin/" + a;
    if (!fs::exists(link) && symlink("busybox", link.c_str()) != 0) {
      return InternalError("symlink " + link);
    }
  }
  return OkStatus();
}

Status InstallSkeleton(const std::string& rootfs) {
  for (const char* d : {"/etc", "/root", "/proc", "/sys", "/dev", "/run", "/usr/lib64",
                        "/usr/lib/x86_64-linux-gnu", "/usr/bin", "/var/log"}) {
    HAMI_RETURN_IF_ERROR(Mkdirs(rootfs + d));
  }
  HAMI_RETURN_IF_ERROR(Mkdirs(rootfs + "/tmp", 01777));
  for (const auto& [link, target] : {std::pair<const char*, const char*>{"/lib", "usr/lib"},
                                     {"/lib64", "usr/lib64"}}) {
    if (symlink(target, (rootfs + link).c_str()) != 0) {
      return InternalError("symlink " + rootfs + link);
    }
  }
  HAMI_RETURN_IF_ERROR(WriteFileAtomically(
      rootfs + "/etc/passwd",
      "root:x:0:0:root:/root:/bin/sh\nnobody:x:65534:65534:nobody:/nonexistent:/bin/false\n",
      0644));
  return WriteFileAtomically(rootfs + "/etc/group", "root:x:0:\nnogroup:x:65534:\n", 0644);
}

}  // namespace

std::vector<std::string> ParseLddOutput(const std::string& text) {
  std::vector<std::string> libs;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) {
    // "\tlibz.so.1 => /lib/x86_64-linux-gnu/libz.so.1 (0x...)" or "\t/lib64/ld-linux... (0x...)"
    size_t arrow = line.find("=> ");
    size_t start = arrow != std::string::npos ? arrow + 3 : line.find_first_not_of(" \t");
    if (start == std::string::npos || start >= line.size() || line[start] != '/') continue;
    size_t end = line.find(" (", start);
    libs.push_back(line.substr(start, end == std::string::npos ? std::string::npos
                                                                : end - start));
  }
  return libs;
}

Status AssembleNodeRootfs(const NodeImageSpec& spec, const std::string& rootfs) {
  if (fs::exists(rootfs)) return InvalidArgumentError(rootfs + " exists already");
  HAMI_RETURN_IF_ERROR(Mkdirs(rootfs));
  HAMI_RETURN_IF_ERROR(InstallSkeleton(rootfs));
  std::vector<std::pair<std::string, std::string>> files = {
      {"/usr/local/bin/hami-scheduler", spec.build_dir + "/bin/hami-scheduler"},
      {"/usr/local/bin/hami-device-plugin", spec.build_dir + "/bin/hami-device-plugin"},
      {"/usr/local/bin/hami-monitor", spec.build_dir + "/bin/hami-monitor"},
      {"/usr/local/bin/hamictl", spec.build_dir + "/bin/hamictl"},
      {"/usr/local/bin/vgpu_probe", spec.build_dir + "/bin/vgpu_probe"},
      {"/k8s-vgpu/lib/nvidia/libvgpu.so", spec.build_dir + "/lib/libvgpu.so"},
      {"/pause", spec.pause}};
  files.insert(files.end(), spec.extra_files.begin(), spec.extra_files.end());
  std::vector<std::string> elves;
  for (const auto& [dest, source] : files) {
    HAMI_RETURN_IF_ERROR(Install(rootfs, dest, source, /*strip=*/true));
    elves.push_back(source);
  }
  HAMI_RETURN_IF_ERROR(InstallLibraries(rootfs, elves));
  return InstallBusybox(rootfs, spec.busybox);
}

}  // namespace hami::sim
