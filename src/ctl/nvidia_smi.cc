#include "ctl/nvidia_smi.h"

#include <algorithm>
#include <ostream>

#include "ctl/format.h"

namespace hami::ctl {
namespace {

constexpr size_t kWidth = 89;  // inside width of the boxes, borders excluded

std::string Pad(std::string s, size_t width, bool right = false) {
  if (s.size() >= width) return s.substr(0, width);
  return right ? std::string(width - s.size(), ' ') + s : s + std::string(width - s.size(), ' ');
}

std::string Line(char fill) { return "+" + std::string(kWidth, fill) + "+\n"; }
std::string Row(const std::string& text) { return "|" + Pad(text, kWidth) + "|\n"; }

std::string VersionText(int v) {
  if (v <= 0) return "N/A";
  return std::to_string(v / 1000) + "." + std::to_string(v % 1000 / 10);
}

std::string Mib(uint64_t bytes) { return std::to_string(ToMiB(bytes)) + "MiB"; }

bool StartsWith(const std::string& s, const char* prefix) { return s.rfind(prefix, 0) == 0; }

std::vector<std::string> SplitComma(const std::string& s) {
  std::vector<std::string> out;
  size_t start = 0;
  while (start <= s.size()) {
    size_t comma = s.find(',', start);
    if (comma == std::string::npos) comma = s.size();
    std::string part = s.substr(start, comma - start);
    part.erase(0, part.find_first_not_of(' '));
    part.erase(part.find_last_not_of(' ') + 1);
    if (!part.empty()) out.push_back(part);
    start = comma + 1;
  }
  return out;
}

constexpr const char* kFields[] = {"index",        "name",        "uuid",
                                   "driver_version", "count",     "memory.total",
                                   "memory.used",  "memory.free", "utilization.gpu"};

}  // namespace

bool ParseNvidiaSmiArgs(const std::vector<std::string>& args, NvidiaSmiArgs* out,
                        std::string* error) {
  NvidiaSmiArgs a;
  bool have_format = false;
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& arg = args[i];
    auto value = [&](const char* name, std::string* v) {
      std::string eq = std::string(name) + "=";
      if (StartsWith(arg, eq.c_str())) {
        *v = arg.substr(eq.size());
        return true;
      }
      if (arg == name && i + 1 < args.size()) {
        *v = args[++i];
        return true;
      }
      return false;
    };
    std::string v;
    if (arg == "-h" || arg == "--help") {
      a.mode = NvidiaSmiArgs::Mode::kHelp;
    } else if (arg == "-L" || arg == "--list-gpus") {
      a.mode = NvidiaSmiArgs::Mode::kList;
    } else if (value("--query-gpu", &v)) {
      a.mode = NvidiaSmiArgs::Mode::kQuery;
      a.fields = SplitComma(v);
    } else if (value("--format", &v)) {
      have_format = true;
      std::vector<std::string> parts = SplitComma(v);
      if (parts.empty() || parts[0] != "csv") {
        *error = "--format must start with csv";
        return false;
      }
      for (size_t k = 1; k < parts.size(); ++k) {
        if (parts[k] == "noheader") {
          a.header = false;
        } else if (parts[k] == "nounits") {
          a.units = false;
        } else {
          *error = "unknown --format option '" + parts[k] + "' (csv, noheader, nounits)";
          return false;
        }
      }
    } else {
      *error = "option '" + arg + "' is not supported by this nvidia-smi (hami-cpp's view of "
               "the container's GPUs); see nvidia-smi --help";
      return false;
    }
  }
  if (a.mode == NvidiaSmiArgs::Mode::kQuery && (a.fields.empty() || !have_format)) {
    *error = "--query-gpu needs a field list and --format=csv";
    return false;
  }
  if (a.mode != NvidiaSmiArgs::Mode::kQuery && have_format) {
    *error = "--format goes with --query-gpu";
    return false;
  }
  *out = std::move(a);
  return true;
}

std::string RenderNvidiaSmiTable(const SmiView& v) {
  std::string out = Line('-');
  out += Row(" NVIDIA-SMI (hami-cpp: the GPUs as this container sees them)");
  out += Row(" Driver Version: " + (v.driver_version.empty() ? "N/A" : v.driver_version) +
             "     CUDA Version: " + VersionText(v.cuda_version));
  out += Line('-');
  // Columns: GPU (5) | name (34) | UUID (...) | memory | util.
  auto cells = [](const std::string& gpu, const std::string& name, const std::string& memory,
                  const std::string& util) {
    return " " + Pad(gpu, 4) + Pad(name, 36) + Pad(memory, 24, true) + Pad(util, 12, true);
  };
  out += Row(cells("GPU", "Name", "Memory-Usage", "GPU-Util"));
  out += Row(" " + Pad("", 4) + "UUID");
  out += Line('=');
  if (v.devices.empty()) out += Row(" No devices were found");
  for (const SmiDevice& d : v.devices) {
    std::string memory = d.memory_known ? Mib(d.memory_used) + " / " + Mib(d.memory_total) : "N/A";
    std::string util = d.gpu_util < 0 ? "N/A" : std::to_string(d.gpu_util) + "%";
    out += Row(cells(std::to_string(d.index), d.name.empty() ? "N/A" : d.name, memory, util));
    out += Row(" " + Pad("", 4) + (d.uuid.empty() ? "N/A" : d.uuid));
    out += Line('-');
  }
  out += "\n" + Line('-');
  out += Row(" Processes:");
  out += Row(" " + Pad("GPU", 6) + Pad("PID", 10, true) + "   " + Pad("Process name", 48) +
             Pad("GPU Memory Usage", 18, true));
  out += Line('=');
  bool any = false;
  for (const SmiDevice& d : v.devices) {
    for (const SmiProcess& p : d.processes) {
      any = true;
      out += Row(" " + Pad(std::to_string(d.index), 6) + Pad(std::to_string(p.pid), 10, true) +
                 "   " + Pad(p.name.empty() ? "N/A" : p.name, 48) +
                 Pad(p.used_known ? Mib(p.used_bytes) : "N/A", 18, true));
    }
  }
  if (!any) out += Row("  No running processes found");
  out += Line('-');
  return out;
}

std::string RenderNvidiaSmiList(const SmiView& v) {
  std::string out;
  for (const SmiDevice& d : v.devices) {
    out += "GPU " + std::to_string(d.index) + ": " + (d.name.empty() ? "N/A" : d.name) +
           " (UUID: " + (d.uuid.empty() ? "N/A" : d.uuid) + ")\n";
  }
  return out;
}

bool RenderNvidiaSmiQuery(const SmiView& v, const NvidiaSmiArgs& a, std::string* out,
                          std::string* error) {
  for (const std::string& f : a.fields) {
    if (std::find(std::begin(kFields), std::end(kFields), f) == std::end(kFields)) {
      std::string known;
      for (const char* k : kFields) known += (known.empty() ? "" : ", ") + std::string(k);
      *error = "field \"" + f + "\" is not a valid field to query (known here: " + known + ")";
      return false;
    }
  }
  auto unit = [&](const std::string& f) -> std::string {
    if (StartsWith(f, "memory.")) return "MiB";
    if (f == "utilization.gpu") return "%";
    return "";
  };
  std::string text;
  if (a.header) {
    for (size_t i = 0; i < a.fields.size(); ++i) {
      std::string u = unit(a.fields[i]);
      text += (i ? ", " : "") + a.fields[i] + (a.units && !u.empty() ? " [" + u + "]" : "");
    }
    text += "\n";
  }
  for (const SmiDevice& d : v.devices) {
    for (size_t i = 0; i < a.fields.size(); ++i) {
      const std::string& f = a.fields[i];
      std::string value;
      if (f == "index") {
        value = std::to_string(d.index);
      } else if (f == "name") {
        value = d.name.empty() ? "[N/A]" : d.name;
      } else if (f == "uuid") {
        value = d.uuid.empty() ? "[N/A]" : d.uuid;
      } else if (f == "driver_version") {
        value = v.driver_version.empty() ? "[N/A]" : v.driver_version;
      } else if (f == "count") {
        value = std::to_string(v.devices.size());
      } else if (f == "utilization.gpu") {
        value = d.gpu_util < 0 ? "[N/A]" : std::to_string(d.gpu_util) + (a.units ? " %" : "");
      } else {
        uint64_t bytes = f == "memory.total" ? d.memory_total
                         : f == "memory.used"
                             ? d.memory_used
                             : d.memory_total - std::min(d.memory_used, d.memory_total);
        value = !d.memory_known ? "[N/A]"
                                : std::to_string(ToMiB(bytes)) + (a.units ? " MiB" : "");
      }
      text += (i ? ", " : "") + value;
    }
    text += "\n";
  }
  *out = std::move(text);
  return true;
}

std::string NvidiaSmiHelp() {
  return "nvidia-smi (hami-cpp): the GPUs as this container sees them, through NVML.\n"
         "\n"
         "  nvidia-smi                     summary of GPUs (memory used / the container's quota)\n"
         "                                 and their processes\n"
         "  nvidia-smi -L, --list-gpus     one line per GPU with its UUID\n"
         "  nvidia-smi --query-gpu=FIELDS --format=csv[,noheader][,nounits]\n"
         "      FIELDS: index, name, uuid, driver_version, count, memory.total, memory.used,\n"
         "              memory.free, utilization.gpu\n";
}

int NvidiaSmiMain(const std::vector<std::string>& args, std::ostream& out, std::ostream& err) {
  NvidiaSmiArgs a;
  std::string why;
  if (!ParseNvidiaSmiArgs(args, &a, &why)) {
    err << "nvidia-smi: " << why << "\n";
    return 2;
  }
  if (a.mode == NvidiaSmiArgs::Mode::kHelp) {
    out << NvidiaSmiHelp();
    return 0;
  }
  SmiView v;
  if (!CollectSmi(&v, &why)) {
    err << "NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver ("
        << why << ")\n";
    return 9;
  }
  switch (a.mode) {
    case NvidiaSmiArgs::Mode::kList:
      out << RenderNvidiaSmiList(v);
      return 0;
    case NvidiaSmiArgs::Mode::kQuery: {
      std::string text;
      if (!RenderNvidiaSmiQuery(v, a, &text, &why)) {
        err << "nvidia-smi: " << why << "\n";
        return 2;
      }
      out << text;
      return 0;
    }
    default:
      out << RenderNvidiaSmiTable(v);
      return 0;
  }
}

}  // namespace hami::ctl
