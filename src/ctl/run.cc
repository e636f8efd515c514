#include "ctl/run.h"

#include <errno.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <map>
#include <mutex>
#include <vector>

#include "common/thread_annotations.h"
#include "ctl/exit_codes.h"
#include "ctl/format.h"
#include "ctl/region_ops.h"
#include "ctl/region_view.h"
#include "vgpu/config.h"
#include "vgpu/region.h"

namespace hami::ctl {
namespace {

constexpr int kForwardedSignals[] = {SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGUSR1, SIGUSR2};

// While the command runs, hamictl takes the signals it forwards, and SIGCHLD, synchronously
// (blocked, then sigwaitinfo) instead of in a handler: nothing races the child's PID being known,
// a signal that arrives before the command is ready is held and forwarded, not lost, and no
// handler has to interrupt a blocking waitpid (a sanitizer runtime defers asynchronous handlers
// until the thread leaves such a call, which a restarted waitpid never does).
class SignalRelay {
 public:
  SignalRelay() {
    sigemptyset(&set_);
    for (int sig : kForwardedSignals) {
      struct sigaction old = {};
      // A signal the caller ignores stays ignored (the command inherits that, as with exec).
      if (sigaction(sig, nullptr, &old) == 0 && old.sa_handler != SIG_IGN) sigaddset(&set_, sig);
    }
    // The child's end must be seen: SIGCHLD at its default disposition (an ignored SIGCHLD would
    // reap the child before hamictl could read its status).
    struct sigaction dfl = {};
    dfl.sa_handler = SIG_DFL;
    sigemptyset(&dfl.sa_mask);
    chld_restore_ = sigaction(SIGCHLD, &dfl, &old_chld_) == 0;
    sigaddset(&set_, SIGCHLD);
    sigprocmask(SIG_BLOCK, &set_, &previous_);
  }
  ~SignalRelay() {
    // Signals still pending were meant for the command, which has ended: drop them rather than
    // let them act on hamictl once unblocked.
    timespec zero = {};
    while (sigtimedwait(&set_, nullptr, &zero) > 0) {
    }
    sigprocmask(SIG_SETMASK, &previous_, nullptr);
    if (chld_restore_) sigaction(SIGCHLD, &old_chld_, nullptr);
  }
  SignalRelay(const SignalRelay&) = delete;
  SignalRelay& operator=(const SignalRelay&) = delete;

  // The mask the command must start with (the caller's).
  const sigset_t& previous() const { return previous_; }

  // Forwards signals to `child` until it ends; its wait status, or -1 (errno set) when it
  // cannot be waited for.
  int WaitForwarding(pid_t child) {
    for (;;) {
      siginfo_t info = {};
      int sig = sigwaitinfo(&set_, &info);
      if (sig < 0) {
        if (errno == EINTR) continue;
        return -1;
      }
      if (sig != SIGCHLD) {
        // A signal the terminal sent (Ctrl-C, Ctrl-Backslash, hangup) went to the whole
        // foreground process group, the command included: forwarding it would deliver it twice.
        if (info.si_code != SI_KERNEL) kill(child, sig);
        continue;
      }
      int status = 0;
      pid_t got = waitpid(child, &status, WNOHANG);
      if (got == child) return status;
      if (got < 0 && errno != EINTR) return -1;
      // Stopped or continued, or another child's SIGCHLD: keep waiting.
    }
  }

 private:
  sigset_t set_;
  sigset_t previous_;
  struct sigaction old_chld_ = {};
  bool chld_restore_ = false;
};

// A temp dir that removes itself (and the region in it) unless released.
class TempDir {
 public:
  TempDir() = default;
  ~TempDir() {
    if (path_.empty() || keep_) return;
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;

  bool Create(std::string* error) {
    const char* tmp = getenv("TMPDIR");
    std::string pattern =
        std::string(tmp != nullptr && *tmp != '\0' ? tmp : "/tmp") + "/hamictl-XXXXXX";
    std::vector<char> buf(pattern.begin(), pattern.end());
    buf.push_back('\0');
    if (mkdtemp(buf.data()) == nullptr) {
      *error = "cannot create a temp dir " + pattern + ": " + strerror(errno);
      return false;
    }
    path_ = buf.data();
    // Every process of the command, whatever its user, must reach the region.
    chmod(path_.c_str(), 0755);
    return true;
  }
  void Keep() { keep_ = true; }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
  bool keep_ = false;
};

// vgpu::LoadConfig reads through a plain function pointer; this serves it from a map whose
// values stay put while LoadConfig runs.
Mutex g_config_env_mu;
const std::map<std::string, std::string>* g_config_env GUARDED_BY(g_config_env_mu) = nullptr;

// Called by LoadConfig only, inside ConfigFor's critical section.
const char* ConfigGetEnv(const char* name) REQUIRES(g_config_env_mu) {
  auto it = g_config_env->find(name);
  return it == g_config_env->end() ? nullptr : it->second.c_str();
}

// What libvgpu will read from `env` (the same parser, so the region hamictl creates is the one
// libvgpu would have created).
vgpu::Config ConfigFor(const std::vector<std::string>& env) {
  std::map<std::string, std::string> vars;
  for (const auto& e : env) {
    size_t eq = e.find('=');
    if (eq != std::string::npos) vars.emplace(e.substr(0, eq), e.substr(eq + 1));
  }
  MutexLock lock(g_config_env_mu);
  g_config_env = &vars;
  vgpu::Config cfg;
  vgpu::LoadConfig(ConfigGetEnv, &cfg);
  g_config_env = nullptr;
  return cfg;
}

// Opens (creating if needed) the region and warns about limits it already holds that differ
// from the requested ones.
bool PrepareRegion(const std::string& path, const vgpu::Config& cfg, std::ostream& err,
                   std::string* error) {
  char buf[512] = {};
  RegionPtr r(vgpu::Region::Open(path.c_str(), cfg.init, buf, sizeof(buf)));
  if (r == nullptr) {
    *error = std::string("cannot use region ") + path + ": " + buf;
    return false;
  }
  const vgpu::RegionHeader* h = r->header();
  for (int i = 0; i < vgpu::kMaxDevices; ++i) {
    uint64_t have = h->devices[i].mem_limit.load(std::memory_order_relaxed);
    if (cfg.mem_limit_set[i] && have != cfg.init.mem_limit[i]) {
      err << "hamictl: warning: region " << path << " already limits device " << i << " to "
          << (have == 0 ? "no limit" : FormatBytes(have)) << "; that applies, not "
          << FormatBytes(cfg.init.mem_limit[i]) << " (change it with `hamictl region set`)\n";
    }
    uint32_t sm = h->devices[i].sm_limit.load(std::memory_order_relaxed);
    if (cfg.sm_limit_set[i] && sm != cfg.init.sm_limit[i]) {
      err << "hamictl: warning: region " << path << " already has an SM limit of " << sm
          << "% on device " << i << "; that applies, not " << cfg.init.sm_limit[i] << "%\n";
    }
  }
  return true;
}

bool IsExecutableFile(const std::string& path, bool* exists) {
  struct stat st;
  *exists = stat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode);
  return *exists && access(path.c_str(), X_OK) == 0;
}

std::string Absolute(const std::string& path) {
  std::error_code ec;
  auto abs = std::filesystem::absolute(path, ec);
  return ec ? path : abs.lexically_normal().string();
}

}  // namespace

int ResolveCommand(const std::string& name, const std::string& path_var, std::string* resolved,
                   std::string* error) {
  bool exists = false;
  if (name.find('/') != std::string::npos) {
    if (IsExecutableFile(name, &exists)) {
      *resolved = name;
      return kExitOk;
    }
    *error = name + (exists ? ": permission denied (not executable)" : ": no such file");
    return exists ? kExitCannotExec : kExitNotFound;
  }
  bool found_unexecutable = false;
  size_t pos = 0;
  while (pos <= path_var.size()) {
    size_t end = path_var.find(':', pos);
    if (end == std::string::npos) end = path_var.size();
    std::string dir = path_var.substr(pos, end - pos);
    std::string candidate = (dir.empty() ? "." : dir) + "/" + name;
    if (IsExecutableFile(candidate, &exists)) {
      *resolved = candidate;
      return kExitOk;
    }
    found_unexecutable |= exists;
    pos = end + 1;
  }
  *error = name + (found_unexecutable ? ": permission denied (not executable)"
                                      : ": command not found in PATH");
  return found_unexecutable ? kExitCannotExec : kExitNotFound;
}

namespace {

// The library to preload: --lib, or the layout's libvgpu.so, made absolute. A missing default
// library is a run failure (the build lacks it); an unreadable --lib is a usage error.
int FindPreloadLibrary(const RunSpec& spec, const Layout& layout, std::ostream& err,
                       std::string* lib) {
  *lib = spec.lib.empty() ? layout.lib : spec.lib;
  if (access(lib->c_str(), R_OK) != 0) {
    if (spec.lib.empty()) {
      err << "hamictl: run: libvgpu.so not found at " << *lib
          << " (build it with `cmake --build <build> --target vgpu`, or pass --lib PATH)\n";
      return kExitRunFailed;
    }
    err << "hamictl: run: --lib " << *lib << ": " << strerror(errno) << "\n";
    return kExitUsage;
  }
  *lib = Absolute(*lib);
  return kExitOk;
}

// With --sim, the simulated driver libraries must be built.
bool HaveSimulatedDriver(const Layout& layout, std::ostream& err) {
  for (const char* so : {"libcuda.so.1", "libnvidia-ml.so.1"}) {
    std::string p = layout.sim_dir + "/" + so;
    if (access(p.c_str(), R_OK) != 0) {
      err << "hamictl: run: --sim: the simulated driver is missing (" << p
          << "); build it with `cmake --build <build> --target hami_sim_cuda hami_sim_nvml`\n";
      return false;
    }
  }
  return true;
}

// The region file: --region made absolute, or one in a fresh temp dir that `temp` owns.
bool ChooseRegion(const RunSpec& spec, TempDir& temp, std::ostream& err, std::string* region) {
  if (!spec.region.empty()) {
    *region = Absolute(spec.region);
    return true;
  }
  std::string why;
  if (!temp.Create(&why)) {
    err << "hamictl: run: " << why << "\n";
    return false;
  }
  *region = temp.path() + "/vgpu.cache";
  return true;
}

// The simulator keeps its node-wide state in this file; make sure its folder exists.
void MakeSimStateDir(const std::vector<std::string>& env) {
  auto state = std::filesystem::path(EnvValue(env, "HAMI_SIM_STATE").value_or(""));
  std::error_code ec;
  if (state.has_parent_path()) std::filesystem::create_directories(state.parent_path(), ec);
}

// The command's PATH; without one, the system's default path, as execvp searches.
std::string SearchPath(const std::vector<std::string>& env) {
  std::string path_var = EnvValue(env, "PATH").value_or("");
  if (!EnvValue(env, "PATH")) {
    char buf[512] = {};
    if (confstr(_CS_PATH, buf, sizeof(buf)) > 0) path_var = buf;
  }
  return path_var;
}

// Runs `exe` with the spec's arguments and `env`, relaying signals to it until it ends; its wait
// status lands in *status. Returns kExitOk, or kExitRunFailed (reported on `err`) when the child
// cannot be started or waited for.
int SpawnAndWait(const RunSpec& spec, const std::string& exe, const std::vector<std::string>& env,
                 std::ostream& err, int* status) {
  // Everything the child needs is built before fork: after it, only async-signal-safe calls.
  std::vector<char*> argv, envp;
  for (const auto& a : spec.command) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  for (const auto& e : env) envp.push_back(const_cast<char*>(e.c_str()));
  envp.push_back(nullptr);
  const std::string exec_failed = "hamictl: run: cannot execute " + exe + "\n";

  SignalRelay relay;
  pid_t pid = fork();
  if (pid < 0) {
    err << "hamictl: run: fork failed: " << strerror(errno) << "\n";
    return kExitRunFailed;
  }
  if (pid == 0) {
    sigprocmask(SIG_SETMASK, &relay.previous(), nullptr);  // a signal mask survives exec
    execve(exe.c_str(), argv.data(), envp.data());
    int e = errno;
    ssize_t ignored = write(2, exec_failed.data(), exec_failed.size());
    (void)ignored;
    _exit(e == ENOENT ? kExitNotFound : kExitCannotExec);
  }
  *status = relay.WaitForwarding(pid);
  if (*status < 0) {
    err << "hamictl: run: waitpid failed: " << strerror(errno) << "\n";
    return kExitRunFailed;
  }
  return kExitOk;
}

// The shell's convention: the exit code, or 128 + the signal that ended the command.
int ExitCodeOf(int status) {
  return WIFEXITED(status)     ? WEXITSTATUS(status)
         : WIFSIGNALED(status) ? 128 + WTERMSIG(status)
                               : kExitRunFailed;
}

void PrintSummary(const std::string& region, std::ostream& err) {
  std::string why;
  RegionPtr r = AttachRegion(region, &why);
  if (r == nullptr) {
    err << "hamictl: summary: " << why << "\n";
  } else {
    err << RenderSummary(Snapshot(*r->header(), region));
  }
}

}  // namespace

int RunCommand(const RunSpec& spec, const Layout& layout, std::ostream& err) {
  std::string lib;
  if (int rc = FindPreloadLibrary(spec, layout, err, &lib); rc != kExitOk) return rc;
  RunPaths paths{lib, layout.sim_dir};
  if (spec.sim && !HaveSimulatedDriver(layout, err)) return kExitRunFailed;

  TempDir temp;
  std::string region;
  if (!ChooseRegion(spec, temp, err, &region)) return kExitRunFailed;

  std::vector<std::string> env = BuildRunEnv(spec, CurrentEnvironment(), paths, region);
  if (spec.sim) MakeSimStateDir(env);

  std::string exe, why;
  if (int rc = ResolveCommand(spec.command[0], SearchPath(env), &exe, &why); rc != kExitOk) {
    err << "hamictl: run: " << why << "\n";
    return rc;
  }
  if (!PrepareRegion(region, ConfigFor(env), err, &why)) {
    err << "hamictl: run: " << why << "\n";
    return spec.region.empty() ? kExitRunFailed : kExitUsage;
  }

  int status = 0;
  if (int rc = SpawnAndWait(spec, exe, env, err, &status); rc != kExitOk) return rc;
  int code = ExitCodeOf(status);
  if (spec.summary) PrintSummary(region, err);
  if (spec.region.empty() && spec.keep_region) {
    temp.Keep();
    err << "hamictl: region kept at " << region << "\n";
  }
  return code;
}

}  // namespace hami::ctl
