#include "sim/kubelet/launch.h"

#include <algorithm>
#include <sstream>

#include "device/text_util.h"

namespace hami::sim {

std::string HostPath(const std::string& value, const std::vector<KubeletMount>& mounts) {
  const KubeletMount* best = nullptr;
  for (const KubeletMount& m : mounts) {
    const std::string& c = m.container_path;
    if (c.empty()) continue;
    bool covers = value == c || (value.size() > c.size() && value.compare(0, c.size(), c) == 0 &&
                                 (c.back() == '/' || value[c.size()] == '/'));
    if (covers && (best == nullptr || c.size() > best->container_path.size())) best = &m;
  }
  if (best == nullptr) return value;
  return best->host_path + value.substr(best->container_path.size());
}

std::optional<std::string> ToolkitDevices(const std::vector<const ContainerDevices*>& answers,
                                          const std::vector<KubeletMount>& mounts,
                                          const std::map<std::string, std::string>& env) {
  std::vector<std::string> ids;
  bool named = false;
  auto add = [&](const std::string& id) {
    named = true;
    if (!id.empty() && std::find(ids.begin(), ids.end(), id) == ids.end()) ids.push_back(id);
  };
  const std::string gpu_prefix = std::string(kToolkitCdiGpuKind) + "=";
  auto add_cdi = [&](const std::string& name) {
    if (name.rfind(gpu_prefix, 0) == 0) add(name.substr(gpu_prefix.size()));
  };
  for (const ContainerDevices* a : answers) {
    for (const std::string& name : a->cdi_devices) add_cdi(name);
    for (const auto& [key, value] : a->annotations) {
      if (key.rfind("cdi.k8s.io/", 0) != 0) continue;
      for (std::string_view name : device::text::Split(value, ',')) add_cdi(std::string(name));
    }
  }
  auto visible = env.find("NVIDIA_VISIBLE_DEVICES");
  if (visible != env.end() && visible->second == kToolkitVolumeMountRoot) {
    const std::string root = std::string(kToolkitVolumeMountRoot) + "/";
    for (const KubeletMount& m : mounts) {
      if (m.container_path.rfind(root, 0) == 0) add(m.container_path.substr(root.size()));
    }
    if (!named) return std::string("none");  // the directory names no device
  }
  if (!named) return std::nullopt;
  std::string out;
  for (const std::string& id : ids) out += (out.empty() ? "" : ",") + id;
  return out;
}

namespace {

// FailedPrecondition naming the CDI names of `answers` the registry does not define (read only
// when there are some).
Status CheckCdiNames(const std::vector<const ContainerDevices*>& answers,
                     const std::function<std::set<std::string>()>& registry) {
  std::vector<std::string> names;
  for (const ContainerDevices* a : answers) {
    names.insert(names.end(), a->cdi_devices.begin(), a->cdi_devices.end());
    for (const auto& [key, value] : a->annotations) {
      if (key.rfind("cdi.k8s.io/", 0) != 0) continue;
      for (std::string_view name : device::text::Split(value, ',')) names.emplace_back(name);
    }
  }
  if (names.empty()) return OkStatus();
  const std::set<std::string> known = registry();
  std::string missing;
  for (const std::string& name : names) {
    if (!known.count(name)) missing += (missing.empty() ? "" : ", ") + name;
  }
  if (missing.empty()) return OkStatus();
  return FailedPreconditionError("CDI device injection failed: unresolvable CDI devices " +
                                 missing);
}

// The container's environment before the toolkit's and the mounts' rewriting: the node's base
// env, then the plugins' envs, then the spec's own env, later entries winning. Collects the
// plugins' mounts too. InvalidArgument for a fieldRef the context does not know.
Status MergeEnv(const ContainerSpec& spec, const std::vector<const ContainerDevices*>& answers,
                const LaunchContext& ctx, std::map<std::string, std::string>& env,
                std::vector<KubeletMount>& mounts) {
  auto put = [&](const std::string& kv) {
    size_t eq = kv.find('=');
    if (eq != std::string::npos && eq > 0) env[kv.substr(0, eq)] = kv.substr(eq + 1);
  };
  for (const std::string& kv : ctx.node_env) put(kv);
  for (const ContainerDevices* a : answers) {
    for (const auto& [k, v] : a->envs) env[k] = v;
    mounts.insert(mounts.end(), a->mounts.begin(), a->mounts.end());
  }
  for (const EnvVar& e : spec.env) {
    if (e.value) {
      env[e.name] = *e.value;
    } else if (e.field_ref) {
      auto f = ctx.fields.find(*e.field_ref);
      if (f == ctx.fields.end()) {
        return InvalidArgumentError("env " + e.name + ": unsupported fieldRef " + *e.field_ref);
      }
      env[e.name] = f->second;
    }
  }
  return OkStatus();
}

// Appends to LD_PRELOAD the libraries of every mounted /etc/ld.so.preload, each translated
// through the mounts. FailedPrecondition when such a file cannot be read.
Status ApplyPreload(const std::vector<KubeletMount>& mounts, const LaunchContext& ctx,
                    std::map<std::string, std::string>& env) {
  for (const KubeletMount& m : mounts) {
    if (m.container_path != "/etc/ld.so.preload") continue;
    std::optional<std::string> text = ctx.read_file ? ctx.read_file(m.host_path) : std::nullopt;
    if (!text) return Status(StatusCode::kFailedPrecondition, "cannot read " + m.host_path);
    std::istringstream in(*text);
    std::string lib, preload = env.count("LD_PRELOAD") ? env["LD_PRELOAD"] : "";
    while (in >> lib) {
      if (lib[0] == '#') break;
      preload += (preload.empty() ? "" : ":") + HostPath(lib, mounts);
    }
    env["LD_PRELOAD"] = preload;
  }
  return OkStatus();
}

// Where the spec's command[0] is on this machine (as a path, or found on ctx.path); "" when it
// is not, or when the spec has no command.
std::string FindProgram(const ContainerSpec& spec, const LaunchContext& ctx) {
  std::string program;
  if (!spec.command.empty()) {
    const std::string& cmd = spec.command[0];
    if (cmd.find('/') != std::string::npos) {
      if (ctx.executable && ctx.executable(cmd)) program = cmd;
    } else {
      std::istringstream dirs(ctx.path);
      std::string dir;
      while (std::getline(dirs, dir, ':')) {
        if (!dir.empty() && ctx.executable && ctx.executable(dir + "/" + cmd)) {
          program = dir + "/" + cmd;
          break;
        }
      }
    }
  }
  return program;
}

}  // namespace

Result<Launch> PrepareLaunch(const ContainerSpec& spec,
                             const std::vector<const ContainerDevices*>& answers,
                             const LaunchContext& ctx) {
  if (ctx.cdi_registry) HAMI_RETURN_IF_ERROR(CheckCdiNames(answers, ctx.cdi_registry));
  std::map<std::string, std::string> env;
  std::vector<KubeletMount> mounts;
  HAMI_RETURN_IF_ERROR(MergeEnv(spec, answers, ctx, env, mounts));
  if (std::optional<std::string> gpus = ToolkitDevices(answers, mounts, env)) {
    env["NVIDIA_VISIBLE_DEVICES"] = *gpus;
  }
  for (auto& [k, v] : env) v = HostPath(v, mounts);
  HAMI_RETURN_IF_ERROR(ApplyPreload(mounts, ctx, env));

  Launch out;
  for (const auto& [k, v] : env) out.env.push_back(k + "=" + v);
  std::vector<std::string> argv = spec.command;
  argv.insert(argv.end(), spec.args.begin(), spec.args.end());
  std::string program = FindProgram(spec, ctx);
  if (ctx.stand_in_for_gpu_containers && ctx.has_devices && !ctx.stand_in.empty()) {
    out.argv = ctx.stand_in;
    out.stand_in = true;
    out.note = "this node runs the stand-in GPU workload in every container given a GPU";
    return out;
  }
  if (!program.empty()) {
    argv[0] = program;
    out.argv = std::move(argv);
    return out;
  }
  if (ctx.stand_in.empty()) {
    return Status(StatusCode::kFailedPrecondition,
                  spec.command.empty() ? "image " + spec.image + " has no command to run here"
                                       : "command " + spec.command[0] + " not found");
  }
  out.argv = ctx.stand_in;
  out.stand_in = true;
  out.note = spec.command.empty() ? "the simulated node cannot run image " + spec.image +
                                        "'s entrypoint; running the stand-in GPU workload"
                                  : "command " + spec.command[0] +
                                        " is not on this machine; running the stand-in "
                                        "GPU workload";
  return out;
}

void AddDriverTools(Launch* launch, const std::string& tools_dir) {
  if (tools_dir.empty()) return;
  std::string* path = nullptr;
  bool nvidia = false;
  for (std::string& kv : launch->env) {
    if (kv.rfind("PATH=", 0) == 0) path = &kv;
    if (kv.rfind("NVIDIA_VISIBLE_DEVICES=", 0) == 0) {
      std::string v = kv.substr(23);
      nvidia = !v.empty() && v != "void" && v != "none";
    }
  }
  if (!nvidia) return;
  if (path == nullptr) {
    launch->env.push_back("PATH=" + tools_dir + ":/usr/local/bin:/usr/bin:/bin");
    std::sort(launch->env.begin(), launch->env.end());
    return;
  }
  *path = "PATH=" + tools_dir + (path->size() > 5 ? ":" + path->substr(5) : "");
}

}  // namespace hami::sim
