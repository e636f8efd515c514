#include "ctl/demo.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <filesystem>
#include <map>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "common/subprocess.h"
#include "ctl/exit_codes.h"
#include "ctl/format.h"
#include "ctl/json.h"
#include "ctl/run_spec.h"

namespace hami::ctl {
namespace {

constexpr uint64_t kMiB = 1ULL << 20;
constexpr uint64_t kGiB = 1ULL << 30;
constexpr uint64_t kQuota = 4 * kGiB;
constexpr uint64_t kChunk = 256 * kMiB;
constexpr int kCudaErrorOutOfMemory = 2;
// How far the measured SM utilisation may sit from the limit and still count as "held".
constexpr double kSmTolerance = 10.0;
constexpr size_t kMaxShownErrLines = 8;

using KV = std::map<std::string, std::string>;

// Every line of `text` that has a "`key`=" token, as key=value maps.
std::vector<KV> Lines(const std::string& text, const std::string& key) {
  std::vector<KV> out;
  std::istringstream in(text);
  std::string line;
  while (std::getline(in, line)) {
    KV kv = KeyValues(line, key);
    if (kv.count(key) != 0) out.push_back(kv);
  }
  return out;
}

bool Uint(const KV& kv, const std::string& key, uint64_t* v) {
  auto it = kv.find(key);
  if (it == kv.end() || it->second.empty()) return false;
  char* end = nullptr;
  *v = strtoull(it->second.c_str(), &end, 10);
  return *end == '\0';
}

bool Real(const KV& kv, const std::string& key, double* v) {
  auto it = kv.find(key);
  if (it == kv.end() || it->second.empty()) return false;
  char* end = nullptr;
  *v = strtod(it->second.c_str(), &end);
  return *end == '\0';
}

int64_t MonoMs() {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<int64_t>(ts.tv_sec) * 1000 + ts.tv_nsec / 1'000'000;
}

struct Check {
  std::string name;
  bool pass;
  std::string detail;
};

class Demo {
 public:
  Demo(const Layout& layout, std::ostream& out) : layout_(layout), out_(out) {}
  ~Demo() {
    if (!dir_.empty()) {
      std::error_code ec;
      std::filesystem::remove_all(dir_, ec);
    }
  }
  Demo(const Demo&) = delete;
  Demo& operator=(const Demo&) = delete;

  bool Setup(std::string* error);
  void QuotaView();
  void FillStopsAtQuota();
  void SharedQuota();
  void SmLimit();
  void SmiUnderQuota();
  int Report();

 private:
  // argv of `hamictl run --sim FLAGS... -- CMD...`.
  std::vector<std::string> Run(const std::vector<std::string>& flags,
                               const std::vector<std::string>& cmd) const;
  std::vector<std::string> Probe(const std::vector<std::string>& args) const;
  std::string Display(const std::vector<std::string>& argv) const;
  void Heading(const std::string& title, const std::string& text);
  void PrintOutput(const std::string& out, const std::string& err);
  ProcessResult Show(const std::vector<std::string>& argv);
  void Add(const std::string& name, bool pass, const std::string& detail) {
    checks_.push_back({name, pass, detail});
  }

  Layout layout_;
  std::ostream& out_;
  std::string dir_;
  std::vector<std::string> env_;
  std::vector<Check> checks_;
  uint64_t card_total_ = 0;  // device 0 as an unlimited process sees it
};

bool Demo::Setup(std::string* error) {
  std::vector<std::string> missing;
  auto need = [&](const std::string& path, const std::string& what, const std::string& target) {
    if (access(path.c_str(), R_OK) != 0) {
      missing.push_back(path + " (" + what + "; build it with `cmake --build <build> --target " +
                        target + "`)");
    }
  };
  need(layout_.probe, "the demo workload", "vgpu_probe");
  need(layout_.lib, "the enforcement library", "vgpu");
  need(layout_.sim_dir + "/libcuda.so.1", "the simulated CUDA driver", "hami_sim_cuda");
  need(layout_.sim_dir + "/libnvidia-ml.so.1", "the simulated NVML", "hami_sim_nvml");
  if (!missing.empty()) {
    *error = "hamictl demo: cannot start, missing:\n";
    for (const auto& m : missing) *error += "  " + m + "\n";
    *error += "(build everything with `bash scripts/build.sh`, or point --build-dir at a build)";
    return false;
  }
  const char* tmp = getenv("TMPDIR");
  std::string pattern =
      std::string(tmp != nullptr && *tmp != '\0' ? tmp : "/tmp") + "/hamictl-demo-XXXXXX";
  std::vector<char> buf(pattern.begin(), pattern.end());
  buf.push_back('\0');
  if (mkdtemp(buf.data()) == nullptr) {
    *error = "hamictl demo: cannot create " + pattern + ": " + strerror(errno);
    return false;
  }
  dir_ = buf.data();
  // A fresh simulated node with the default devices: our own state file, no custom config.
  for (const auto& e : CurrentEnvironment()) {
    if (e.rfind("HAMI_SIM_STATE=", 0) == 0 || e.rfind("HAMI_SIM_CONFIG=", 0) == 0) continue;
    env_.push_back(e);
  }
  env_.push_back("HAMI_SIM_STATE=" + dir_ + "/sim-state");
  out_ << "hamictl demo: GPU sharing on a simulated node (2 x NVIDIA A100 80GB, no real GPU "
          "needed)\n"
       << "$TMP = " << dir_ << " (simulator state and regions; removed at the end)\n";
  return true;
}

std::vector<std::string> Demo::Run(const std::vector<std::string>& flags,
                                   const std::vector<std::string>& cmd) const {
  std::vector<std::string> argv = {layout_.hamictl, "run", "--sim"};
  argv.insert(argv.end(), flags.begin(), flags.end());
  argv.push_back("--");
  argv.insert(argv.end(), cmd.begin(), cmd.end());
  return argv;
}

std::vector<std::string> Demo::Probe(const std::vector<std::string>& args) const {
  std::vector<std::string> argv = {layout_.probe};
  argv.insert(argv.end(), args.begin(), args.end());
  return argv;
}

std::string Demo::Display(const std::vector<std::string>& argv) const {
  std::string line = "$";
  for (const auto& a : argv) {
    std::string shown = a;
    if (a == layout_.hamictl) {
      shown = "hamictl";
    } else if (a == layout_.probe) {
      shown = "vgpu_probe";
    } else if (a.rfind(dir_, 0) == 0) {
      shown = "$TMP" + a.substr(dir_.size());
    }
    line += " " + shown;
  }
  return line;
}

void Demo::Heading(const std::string& title, const std::string& text) {
  out_ << "\n== " << title << " ==\n" << text << "\n";
}

void Demo::PrintOutput(const std::string& out, const std::string& err) {
  std::istringstream o(out);
  std::string line;
  while (std::getline(o, line)) out_ << "    " << line << "\n";
  std::istringstream e(err);
  size_t shown = 0, total = 0;
  while (std::getline(e, line)) {
    if (++total <= kMaxShownErrLines) {
      out_ << "    " << line << "\n";
      ++shown;
    }
  }
  if (total > shown) out_ << "    ... (" << total - shown << " more lines on stderr)\n";
}

ProcessResult Demo::Show(const std::vector<std::string>& argv) {
  out_ << Display(argv) << "\n";
  out_.flush();
  ProcessResult r = RunProcess(argv, env_);
  PrintOutput(r.out, r.err);
  if (r.exit_code != 0) out_ << "    (exit status " << r.exit_code << ")\n";
  return r;
}

void Demo::QuotaView() {
  Heading("(a) The quota is what the process sees",
          "vgpu_probe asks the driver how much memory each GPU has (cuDeviceTotalMem, "
          "cuMemGetInfo).\nWithout a limit it sees the whole card; under --mem 4Gi libvgpu "
          "answers with the quota.");
  ProcessResult free_run = Show(Run({}, Probe({"info"})));
  ProcessResult limited = Show(Run({"--mem", "4Gi"}, Probe({"info"})));
  auto unl = Lines(free_run.out, "device");
  auto lim = Lines(limited.out, "device");
  bool ok = free_run.exit_code == 0 && limited.exit_code == 0 && !unl.empty() &&
            lim.size() == unl.size() && Uint(unl[0], "total", &card_total_) && card_total_ > kQuota;
  std::string detail;
  for (size_t i = 0; ok && i < lim.size(); ++i) {
    uint64_t total = 0, visible = 0, free_b = 0;
    ok = Uint(lim[i], "total", &total) && Uint(lim[i], "visible_total", &visible) &&
         Uint(lim[i], "free", &free_b) && total == kQuota && visible == kQuota && free_b <= kQuota;
  }
  if (ok) {
    detail = "without a limit device 0 has " + FormatBytes(card_total_) + "; under --mem 4Gi " +
             "every device reports " + FormatBytes(kQuota) + " (cuDeviceTotalMem and cuMemGetInfo)";
  } else {
    detail = "expected every device to report exactly 4 GiB under --mem 4Gi and more without it";
  }
  Add("(a) quota view", ok, detail);
}

void Demo::FillStopsAtQuota() {
  Heading("(b) Allocations stop at the quota",
          "vgpu_probe allocates 256 MiB chunks until the driver refuses. The card has room for "
          "many more,\nbut libvgpu refuses the allocation that would cross 4 GiB with "
          "CUDA_ERROR_OUT_OF_MEMORY (2).\n--summary prints the region's record afterwards.");
  ProcessResult r = Show(Run({"--mem", "4Gi", "--summary"}, Probe({"fill", "--chunk", "256Mi"})));
  auto fill = Lines(r.out, "allocated");
  uint64_t allocated = 0, error = 0;
  bool parsed = r.exit_code == 0 && !fill.empty() && Uint(fill[0], "allocated", &allocated) &&
                Uint(fill[0], "error", &error);
  bool ok = parsed && error == kCudaErrorOutOfMemory && allocated <= kQuota &&
            allocated + kChunk > kQuota && card_total_ >= allocated + kChunk;
  Add("(b) fill stops at the quota", ok,
      parsed ? "allocated " + FormatBytes(allocated) + ", then CUresult " + std::to_string(error) +
                   " although the card has " + FormatBytes(card_total_)
             : "no allocated= line from vgpu_probe fill");
}

void Demo::SharedQuota() {
  Heading("(c) Processes of one container share its quota",
          "Two processes are started together on one region (as two processes of one pod "
          "are) and each\nfills memory and holds it. In whatever order they run, together "
          "they get the 4 GiB quota,\nnot 4 GiB each.");
  const std::string region = dir_ + "/shared.cache";
  std::vector<std::unique_ptr<Subprocess>> procs;
  std::vector<std::string> outs;
  for (int i = 0; i < 2; ++i) {
    auto argv =
        Run({"--mem", "4Gi", "--region", region}, Probe({"fill", "--chunk", "256Mi", "--hold"}));
    out_ << Display(argv) << " &\n";
    procs.push_back(std::make_unique<Subprocess>(argv, env_));
  }
  out_.flush();
  uint64_t sum = 0;
  bool ok = true;
  std::string detail;
  for (size_t i = 0; i < procs.size(); ++i) {
    std::string text = procs[i]->ReadUntil("allocated=");
    // The line is complete once its newline has arrived.
    if (text.find('\n', text.find("allocated=")) == std::string::npos) {
      text = procs[i]->ReadUntil("\n");
    }
    auto fill = Lines(text, "allocated");
    uint64_t allocated = 0, error = 0;
    if (fill.empty() || !Uint(fill[0], "allocated", &allocated) ||
        !Uint(fill[0], "error", &error)) {
      ok = false;
      out_ << "    process " << i + 1 << ": no allocated= line\n";
      continue;
    }
    out_ << "    process " << i + 1 << ": allocated=" << allocated << " (" << FormatBytes(allocated)
         << ") error=" << error << "\n";
    ok = ok && error == kCudaErrorOutOfMemory;
    sum += allocated;
    detail += (detail.empty() ? "" : " + ") + FormatBytes(allocated);
  }
  out_ << "While both hold their memory, the region shows two processes and the shared "
          "total:\n";
  Show({layout_.hamictl, "region", "show", region});
  for (size_t i = 0; i < procs.size(); ++i) {
    ProcessResult r = procs[i]->Wait();
    if (r.exit_code != 0) {
      ok = false;
      out_ << "    process " << i + 1 << " exited with " << r.exit_code << "\n";
      PrintOutput("", r.err);
    }
  }
  ok = ok && sum <= kQuota && sum + kChunk > kQuota;
  Add("(c) shared quota", ok,
      detail + " = " + FormatBytes(sum) + " together (quota " + FormatBytes(kQuota) + ")");
}

void Demo::SmLimit() {
  Heading("(d) The SM limiter holds a saturating workload near its limit",
          "vgpu_probe launches back-to-back kernels that occupy all 108 SMs for 1 ms each and "
          "reports its\nSM utilisation as NVML measures it over 3 s (after a 1 s warm-up in "
          "which the limiter\ncalibrates itself on the workload). --cores sets the limit; "
          "--policy force enforces it\neven when the GPU is otherwise idle.");
  const std::vector<std::string> spin = {"spin",       "--blocks",      "108",
                                         "--block-ns", "1000000",       "--warmup-ms",
                                         "1000",       "--duration-ms", "3000"};
  struct Case {
    std::vector<std::string> flags;
    int limit;  // 0 = none
  };
  const Case cases[] = {{{}, 0},
                        {{"--cores", "30", "--policy", "force"}, 30},
                        {{"--cores", "60", "--policy", "force"}, 60}};
  for (const auto& c : cases) {
    ProcessResult r = Show(Run(c.flags, Probe(spin)));
    auto line = Lines(r.out, "launches");
    double util = 0;
    bool parsed = r.exit_code == 0 && !line.empty() && Real(line[0], "sm_util", &util);
    char measured[64];
    snprintf(measured, sizeof(measured), "%.1f%%", util);
    if (c.limit == 0) {
      Add("(d) no limit runs at full speed", parsed && util >= 90.0,
          parsed ? std::string("measured ") + measured + " (expected at least 90%)"
                 : "no sm_util= from vgpu_probe spin");
    } else {
      bool near = parsed && util >= c.limit - kSmTolerance && util <= c.limit + kSmTolerance;
      Add("(d) --cores " + std::to_string(c.limit), near,
          parsed ? std::string("measured ") + measured + " (limit " + std::to_string(c.limit) +
                       "%, accepted within " + std::to_string(static_cast<int>(kSmTolerance)) +
                       " points)"
                 : "no sm_util= from vgpu_probe spin");
    }
  }
}

void Demo::SmiUnderQuota() {
  Heading("(e) nvidia-smi's view from inside the quota",
          "A process of the container holds 1 GiB; `hamictl smi` reads NVML like nvidia-smi "
          "does, and\nunder the container's limits NVML reports the quota and the container's "
          "usage.");
  const std::string region = dir_ + "/smi.cache";
  auto holder_argv =
      Run({"--mem", "4Gi", "--region", region}, Probe({"alloc", "--bytes", "1Gi", "--hold"}));
  out_ << Display(holder_argv) << " &\n";
  Subprocess holder(holder_argv, env_);
  std::string held = holder.ReadUntil("after_alloc");
  if (held.find('\n', held.find("after_alloc")) == std::string::npos) {
    held = holder.ReadUntil("\n");
  }
  PrintOutput(held, "");
  ProcessResult table = Show(Run({"--mem", "4Gi", "--region", region}, {layout_.hamictl, "smi"}));
  ProcessResult json = RunProcess(
      Run({"--mem", "4Gi", "--region", region}, {layout_.hamictl, "smi", "--json"}), env_);
  ProcessResult h = holder.Wait();

  auto totals = JsonScalars(json.out, "memory_total_mib");
  auto used = JsonScalars(json.out, "memory_used_mib");
  bool ok = table.exit_code == 0 && json.exit_code == 0 && h.exit_code == 0 && !totals.empty() &&
            used.size() == totals.size();
  for (const auto& t : totals) ok = ok && t == std::to_string(kQuota >> 20);
  uint64_t used0 = used.empty() ? 0 : strtoull(used[0].c_str(), nullptr, 10);
  ok = ok && used0 >= 1024;
  Add("(e) smi under the quota", ok,
      ok ? "every GPU shows " + std::to_string(kQuota >> 20) + " MiB total; GPU 0 shows " +
               std::to_string(used0) + " MiB used by the container"
         : "expected " + std::to_string(kQuota >> 20) +
               " MiB total per GPU and >= 1024 MiB used on GPU 0 (checked with smi --json)");
}

int Demo::Report() {
  out_ << "\n== Results ==\n";
  int failed = 0;
  for (const auto& c : checks_) {
    out_ << (c.pass ? "PASS  " : "FAIL  ") << c.name << ": " << c.detail << "\n";
    failed += c.pass ? 0 : 1;
  }
  out_ << (failed == 0 ? "demo: all " + std::to_string(checks_.size()) + " checks passed\n"
                       : "demo: " + std::to_string(failed) + " of " +
                             std::to_string(checks_.size()) + " checks failed\n");
  return failed == 0 ? kExitOk : kExitFailure;
}

}  // namespace

int RunDemo(const Layout& layout, std::ostream& out, std::ostream& err) {
  const int64_t start = MonoMs();
  Demo demo(layout, out);
  std::string error;
  if (!demo.Setup(&error)) {
    err << error << "\n";
    return kExitFailure;
  }
  demo.QuotaView();
  demo.FillStopsAtQuota();
  demo.SharedQuota();
  demo.SmLimit();
  demo.SmiUnderQuota();
  int rc = demo.Report();
  out << "demo took " << (MonoMs() - start) / 1000.0 << " s\n";
  return rc;
}

}  // namespace hami::ctl
