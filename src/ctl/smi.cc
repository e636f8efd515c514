#include "ctl/smi.h"

#include <stdio.h>
#include <string.h>

#include <fstream>
#include <nlohmann/json.hpp>

#include "ctl/format.h"
#include "ctl/json.h"
#include "nvml/library.h"

namespace hami::ctl {
namespace {

constexpr unsigned long long kNvmlValueNotAvailable = ~0ULL;

std::string ProcessName(unsigned pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/comm");
  std::string name;
  std::getline(in, name);
  return name;
}

std::vector<SmiProcess> Processes(const nvml::Api& api, nvmlDevice_t dev) {
  std::vector<SmiProcess> out;
  std::vector<nvmlProcessInfo_t> infos(64);
  for (int attempt = 0; attempt < 4; ++attempt) {
    unsigned count = static_cast<unsigned>(infos.size());
    nvmlReturn_t rc;
    if (api.processes_v3 != nullptr) {
      rc = api.processes_v3(dev, &count, infos.data());
    } else if (api.processes_v2 != nullptr) {
      // v2 records have the same layout as nvmlProcessInfo_t.
      rc = api.processes_v2(dev, &count, reinterpret_cast<nvmlProcessInfo_v2_t*>(infos.data()));
    } else {
      return out;
    }
    if (rc == NVML_ERROR_INSUFFICIENT_SIZE) {
      infos.resize(count + 16);
      continue;
    }
    if (rc != NVML_SUCCESS) return out;
    for (unsigned i = 0; i < count && i < infos.size(); ++i) {
      SmiProcess p;
      p.pid = infos[i].pid;
      p.used_known = infos[i].usedGpuMemory != kNvmlValueNotAvailable;
      p.used_bytes = p.used_known ? infos[i].usedGpuMemory : 0;
      p.name = ProcessName(p.pid);
      out.push_back(p);
    }
    return out;
  }
  return out;
}

std::string CudaVersionText(int v) {
  if (v <= 0) return "N/A";
  return std::to_string(v / 1000) + "." + std::to_string(v % 1000 / 10);
}

}  // namespace

bool CollectSmi(SmiView* view, std::string* error) {
  *view = SmiView();
  Result<const nvml::Library*> lib = nvml::Library::Load("libnvidia-ml.so.1");
  if (!lib.ok()) {
    *error = "NVML is not available: " + lib.status().message() +
             "; on a machine without an NVIDIA driver use the simulated GPU: "
             "hamictl run --sim -- hamictl smi";
    return false;
  }
  // Everything else is optional: smi shows N/A for what an older driver cannot report.
  if (Status s = (*lib)->Require(
          {"nvmlInit_v2", "nvmlDeviceGetCount_v2", "nvmlDeviceGetHandleByIndex_v2"}, "hamictl smi");
      !s.ok()) {
    *error = s.message();
    return false;
  }
  const nvml::Api& api = (*lib)->api();
  if (nvmlReturn_t rc = api.init(); rc != NVML_SUCCESS) {
    *error = "nvmlInit failed: " + api.ErrorText(rc);
    return false;
  }
  char buf[256];
  if (api.driver_version != nullptr && api.driver_version(buf, sizeof(buf)) == NVML_SUCCESS) {
    view->driver_version = std::string(buf, strnlen(buf, sizeof(buf)));
  }
  if (api.cuda_driver_version != nullptr) {
    int v = 0;
    if (api.cuda_driver_version(&v) == NVML_SUCCESS) view->cuda_version = v;
  }
  unsigned count = 0;
  if (nvmlReturn_t rc = api.count(&count); rc != NVML_SUCCESS) {
    *error = "nvmlDeviceGetCount failed: " + api.ErrorText(rc);
    if (api.shutdown != nullptr) api.shutdown();
    return false;
  }
  for (unsigned i = 0; i < count; ++i) {
    SmiDevice d;
    d.index = i;
    nvmlDevice_t dev;
    if (api.by_index(i, &dev) != NVML_SUCCESS) {
      view->devices.push_back(d);
      continue;
    }
    if (api.name != nullptr && api.name(dev, buf, sizeof(buf)) == NVML_SUCCESS) {
      d.name = std::string(buf, strnlen(buf, sizeof(buf)));
    }
    if (api.uuid != nullptr && api.uuid(dev, buf, sizeof(buf)) == NVML_SUCCESS) {
      d.uuid = std::string(buf, strnlen(buf, sizeof(buf)));
    }
    nvmlMemory_v2_t m2 = {};
    m2.version = nvmlMemory_v2;
    nvmlMemory_t m1 = {};
    if (api.memory_v2 != nullptr && api.memory_v2(dev, &m2) == NVML_SUCCESS) {
      d.memory_known = true;
      d.memory_total = m2.total;
      d.memory_used = m2.used;
    } else if (api.memory != nullptr && api.memory(dev, &m1) == NVML_SUCCESS) {
      d.memory_known = true;
      d.memory_total = m1.total;
      d.memory_used = m1.used;
    }
    nvmlUtilization_t u = {};
    if (api.utilization != nullptr && api.utilization(dev, &u) == NVML_SUCCESS) {
      d.gpu_util = static_cast<int>(u.gpu);
    }
    d.processes = Processes(api, dev);
    view->devices.push_back(d);
  }
  if (api.shutdown != nullptr) api.shutdown();
  return true;
}

std::string RenderSmiText(const SmiView& v) {
  std::string out = "hamictl smi   driver " +
                    (v.driver_version.empty() ? std::string("N/A") : v.driver_version) +
                    "   CUDA " + CudaVersionText(v.cuda_version) + "\n\n";
  if (v.devices.empty()) return out + "no devices found\n";
  std::vector<std::vector<std::string>> rows = {
      {"GPU", "NAME", "UUID", "MEMORY-USAGE", "GPU-UTIL"}};
  for (const auto& d : v.devices) {
    rows.push_back({std::to_string(d.index), d.name.empty() ? "N/A" : d.name,
                    d.uuid.empty() ? "N/A" : d.uuid,
                    d.memory_known ? std::to_string(ToMiB(d.memory_used)) + "MiB / " +
                                         std::to_string(ToMiB(d.memory_total)) + "MiB"
                                   : "N/A",
                    d.gpu_util < 0 ? "N/A" : std::to_string(d.gpu_util) + "%"});
  }
  out += RenderTable(rows);
  out += "\nProcesses:\n";
  rows = {{"GPU", "PID", "NAME", "GPU-MEMORY"}};
  for (const auto& d : v.devices) {
    for (const auto& p : d.processes) {
      rows.push_back({std::to_string(d.index), std::to_string(p.pid), p.name.empty() ? "-" : p.name,
                      p.used_known ? std::to_string(ToMiB(p.used_bytes)) + "MiB" : "N/A"});
    }
  }
  out += rows.size() == 1 ? "no running compute processes\n" : RenderTable(rows);
  return out;
}

std::string RenderSmiJson(const SmiView& v) {
  using Ordered = nlohmann::ordered_json;
  auto known = [](bool is_known, uint64_t value) { return is_known ? Ordered(value) : Ordered(); };
  Ordered doc;
  doc["driver_version"] = v.driver_version;
  doc["cuda_version"] = v.cuda_version;
  Ordered& devices = doc["devices"] = Ordered::array();
  for (const auto& d : v.devices) {
    Ordered o;
    o["index"] = d.index;
    o["name"] = d.name;
    o["uuid"] = d.uuid;
    o["memory_used_bytes"] = known(d.memory_known, d.memory_used);
    o["memory_total_bytes"] = known(d.memory_known, d.memory_total);
    o["memory_used_mib"] = known(d.memory_known, ToMiB(d.memory_used));
    o["memory_total_mib"] = known(d.memory_known, ToMiB(d.memory_total));
    o["gpu_util_percent"] = d.gpu_util >= 0 ? Ordered(d.gpu_util) : Ordered();
    Ordered& processes = o["processes"] = Ordered::array();
    for (const auto& p : d.processes) {
      Ordered po;
      po["pid"] = p.pid;
      po["name"] = p.name;
      po["used_bytes"] = known(p.used_known, p.used_bytes);
      processes.push_back(std::move(po));
    }
    devices.push_back(std::move(o));
  }
  return DumpJson(doc);
}

}  // namespace hami::ctl
