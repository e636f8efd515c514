#include "sim/gpu/config.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/env_limits.h"

namespace hami::sim {
namespace {

std::string Trim(const std::string& s) {
  size_t b = 0, e = s.size();
  while (b < e && (s[b] == ' ' || s[b] == '\t' || s[b] == '\r')) ++b;
  while (e > b && (s[e - 1] == ' ' || s[e - 1] == '\t' || s[e - 1] == '\r')) --e;
  return s.substr(b, e - b);
}

// Strict decimal (or 0x hex) integer in [lo, hi].
bool ParseInt(const std::string& s, long long lo, long long hi, long long* out) {
  if (s.empty()) return false;
  errno = 0;
  char* end = nullptr;
  long long v = strtoll(s.c_str(), &end, 0);
  if (errno != 0 || end == s.c_str() || *end != '\0' || v < lo || v > hi) return false;
  // Reject octal surprises such as "010".
  if (s.size() > 1 && s[0] == '0' && s[1] != 'x' && s[1] != 'X') return false;
  *out = v;
  return true;
}

uint64_t Fnv1a(uint64_t h, const void* data, size_t n) {
  const unsigned char* p = static_cast<const unsigned char*>(data);
  for (size_t i = 0; i < n; ++i) {
    h ^= p[i];
    h *= 0x100000001b3ull;
  }
  return h;
}
uint64_t Fnv1a(uint64_t h, const std::string& s) {
  return Fnv1a(Fnv1a(h, s.data(), s.size()), "|", 1);
}
uint64_t Fnv1a(uint64_t h, uint64_t v) { return Fnv1a(h, &v, sizeof(v)); }

// Stable per (node, index); without a node name, per index alone (every such node's device 0
// has the same UUID).
std::string DerivedUuid(const std::string& node, int index) {
  uint64_t a = Fnv1a(0xcbf29ce484222325ull, std::string("hami-sim-gpu-a"));
  if (!node.empty()) a = Fnv1a(a, "node:" + node);
  a = Fnv1a(a, static_cast<uint64_t>(index));
  uint64_t b = Fnv1a(a, std::string("hami-sim-gpu-b"));
  char buf[64];
  snprintf(buf, sizeof(buf), "GPU-%08x-%04x-%04x-%04x-%012llx", static_cast<unsigned>(a >> 32),
           static_cast<unsigned>((a >> 16) & 0xffff), static_cast<unsigned>(a & 0xffff),
           static_cast<unsigned>(b >> 48), static_cast<unsigned long long>(b & 0xffffffffffffull));
  return buf;
}

int HexValue(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

// Applies derived values and cross-device checks once every section has been read.
bool Finalize(SimConfig* config, std::string* error) {
  static const uint32_t kBuses[] = {0x07, 0x0F, 0x47, 0x4E, 0x87, 0x90, 0xB7, 0xBD};
  auto& devs = config->devices;
  if (devs.empty()) {
    *error = "no [device] section: the node needs at least one device";
    return false;
  }
  if (devs.size() > static_cast<size_t>(kMaxDevices)) {
    *error = "too many devices (" + std::to_string(devs.size()) + "); the sim supports at most " +
             std::to_string(kMaxDevices);
    return false;
  }
  int n = static_cast<int>(devs.size());
  for (int i = 0; i < n; ++i) {
    DeviceSpec& d = devs[i];
    if (d.uuid.empty()) d.uuid = DerivedUuid(config->node, i);
    if (d.pci_bus == 0) d.pci_bus = i < 8 ? kBuses[i] : static_cast<uint32_t>(0xC0 + i);
    for (int peer : d.nvlink_peers) {
      if (peer < 0 || peer >= n || peer == i) {
        *error = "device " + std::to_string(i) + ": nvlink peer " + std::to_string(peer) +
                 " is not another device index (0.." + std::to_string(n - 1) + ")";
        return false;
      }
    }
  }
  for (int i = 0; i < n; ++i) {
    for (int j = i + 1; j < n; ++j) {
      if (devs[i].uuid == devs[j].uuid) {
        *error = "devices " + std::to_string(i) + " and " + std::to_string(j) + " share uuid " +
                 devs[i].uuid;
        return false;
      }
      if (devs[i].pci_domain == devs[j].pci_domain && devs[i].pci_bus == devs[j].pci_bus &&
          devs[i].pci_device == devs[j].pci_device) {
        *error =
            "devices " + std::to_string(i) + " and " + std::to_string(j) + " share a PCI bus id";
        return false;
      }
      int ij = 0, ji = 0;
      for (int p : devs[i].nvlink_peers) ij += p == j;
      for (int p : devs[j].nvlink_peers) ji += p == i;
      if (ij != ji) {
        *error = "nvlink between devices " + std::to_string(i) + " and " + std::to_string(j) +
                 " is asymmetric (" + std::to_string(ij) + " vs " + std::to_string(ji) +
                 " links); declare it on both devices";
        return false;
      }
    }
  }
  return true;
}

// Applies a [device] section's "compute_capability = MAJOR.MINOR" value.
bool ApplyComputeCapabilityKey(const std::string& value, DeviceSpec* d, std::string* reason) {
  size_t dot = value.find('.');
  long long major = 0, minor = 0;
  if (dot == std::string::npos || !ParseInt(value.substr(0, dot), 1, 20, &major) ||
      !ParseInt(value.substr(dot + 1), 0, 9, &minor)) {
    *reason = "compute_capability must look like 8.0";
    return false;
  }
  d->cc_major = static_cast<int>(major);
  d->cc_minor = static_cast<int>(minor);
  return true;
}

// Applies a [device] section's "nvlink = PEER[:LINKS], ..." value, replacing any earlier list.
bool ApplyNvLinkKey(const std::string& value, DeviceSpec* d, std::string* reason) {
  d->nvlink_peers.clear();
  size_t start = 0;
  while (start <= value.size()) {
    size_t comma = value.find(',', start);
    std::string item =
        Trim(value.substr(start, comma == std::string::npos ? std::string::npos : comma - start));
    if (!item.empty()) {
      size_t colon = item.find(':');
      long long peer = 0, links = 1;
      if (!ParseInt(Trim(item.substr(0, colon)), 0, kMaxDevices - 1, &peer) ||
          (colon != std::string::npos &&
           !ParseInt(Trim(item.substr(colon + 1)), 1, kMaxNvLinks, &links))) {
        *reason = "nvlink must be a comma list of PEER[:LINKS], e.g. \"1:12, 2:6\"";
        return false;
      }
      for (long long k = 0; k < links; ++k) d->nvlink_peers.push_back(static_cast<int>(peer));
    }
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  if (d->nvlink_peers.size() > static_cast<size_t>(kMaxNvLinks)) {
    *reason = "more than " + std::to_string(kMaxNvLinks) + " nvlinks on one device";
    return false;
  }
  return true;
}

// Applies one "key = value" line of a [device] section.
bool ApplyDeviceKey(const std::string& key, const std::string& value, DeviceSpec* d,
                    std::string* reason) {
  long long v = 0;
  if (key == "name") {
    if (value.empty() || value.size() >= 64) {
      *reason = "name must be 1..63 characters";
      return false;
    }
    d->name = value;
  } else if (key == "uuid") {
    unsigned char bytes[16];
    if (!ParseUuidBytes(value, bytes)) {
      *reason = "uuid must look like GPU-xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx (32 hex digits)";
      return false;
    }
    d->uuid = value;
  } else if (key == "memory") {
    uint64_t bytes = 0;
    const char* why = hami::ParseByteSize(value.c_str(), &bytes);
    if (why != nullptr) {
      *reason = std::string("memory: ") + why;
      return false;
    }
    if (bytes == 0) {
      *reason = "memory must be positive";
      return false;
    }
    d->memory_bytes = bytes;
  } else if (key == "sm_count") {
    if (!ParseInt(value, 1, 1024, &v)) {
      *reason = "sm_count must be an integer in 1..1024";
      return false;
    }
    d->sm_count = static_cast<int>(v);
  } else if (key == "max_threads_per_sm") {
    if (!ParseInt(value, 32, 4096, &v)) {
      *reason = "max_threads_per_sm must be an integer in 32..4096";
      return false;
    }
    d->max_threads_per_sm = static_cast<int>(v);
  } else if (key == "compute_capability") {
    return ApplyComputeCapabilityKey(value, d, reason);
  } else if (key == "numa_node") {
    if (!ParseInt(value, 0, 1023, &v)) {
      *reason = "numa_node must be an integer in 0..1023";
      return false;
    }
    d->numa_node = static_cast<int>(v);
  } else if (key == "pcie_switch") {
    if (!ParseInt(value, -1, 1023, &v)) {
      *reason = "pcie_switch must be an integer in -1..1023";
      return false;
    }
    d->pcie_switch = static_cast<int>(v);
  } else if (key == "pci_bus_id") {
    if (!ParsePciBusId(value, &d->pci_domain, &d->pci_bus, &d->pci_device) || d->pci_bus == 0) {
      *reason = "pci_bus_id must look like 00000000:07:00.0 (bus 01..ff)";
      return false;
    }
  } else if (key == "pci_device_id") {
    if (!ParseInt(value, 1, 0xFFFFFFFFll, &v)) {
      *reason = "pci_device_id must be a 32-bit number such as 0x20B510DE";
      return false;
    }
    d->pci_device_id = static_cast<uint32_t>(v);
  } else if (key == "nvlink") {
    return ApplyNvLinkKey(value, d, reason);
  } else {
    *reason = "unknown device key '" + key + "'";
    return false;
  }
  return true;
}

}  // namespace

SimConfig DefaultConfig() {
  SimConfig c;
  c.devices.resize(2);
  c.devices[1].numa_node = 1;
  c.devices[0].nvlink_peers.assign(12, 1);
  c.devices[1].nvlink_peers.assign(12, 0);
  std::string unused;
  Finalize(&c, &unused);
  return c;
}

bool ParseConfig(const std::string& text, SimConfig* config, std::string* error) {
  SimConfig c;
  bool in_device = false;
  int line_no = 0;
  size_t pos = 0;
  while (pos <= text.size()) {
    size_t nl = text.find('\n', pos);
    std::string raw = text.substr(pos, nl == std::string::npos ? std::string::npos : nl - pos);
    pos = nl == std::string::npos ? text.size() + 1 : nl + 1;
    ++line_no;
    size_t hash = raw.find('#');
    std::string line = Trim(hash == std::string::npos ? raw : raw.substr(0, hash));
    if (line.empty()) continue;
    std::string where = "line " + std::to_string(line_no) + ": ";
    if (line[0] == '[') {
      if (line != "[device]") {
        *error = where + "unknown section " + line + " (only [device] exists)";
        return false;
      }
      c.devices.emplace_back();
      in_device = true;
      continue;
    }
    size_t eq = line.find('=');
    if (eq == std::string::npos) {
      *error = where + "expected 'key = value' or '[device]'";
      return false;
    }
    std::string key = Trim(line.substr(0, eq));
    std::string value = Trim(line.substr(eq + 1));
    std::string reason;
    if (in_device) {
      if (!ApplyDeviceKey(key, value, &c.devices.back(), &reason)) {
        *error = where + reason;
        return false;
      }
    } else if (key == "node") {
      if (value.empty() || value.size() > 253) {
        *error = where + "node must be a node name of 1..253 characters";
        return false;
      }
      c.node = value;
    } else if (key == "driver_version") {
      if (value.empty() || value.size() >= 64) {
        *error = where + "driver_version must be 1..63 characters";
        return false;
      }
      c.driver_version = value;
    } else if (key == "cuda_driver_version") {
      long long v = 0;
      if (!ParseInt(value, 1000, 99990, &v)) {
        *error = where + "cuda_driver_version must be an integer like 12040";
        return false;
      }
      c.cuda_driver_version = static_cast<int>(v);
    } else if (key == "nvml_sample_ms" || key == "max_queued_ms") {
      const bool sampling = key == "nvml_sample_ms";  // 0 allowed: exact, on demand
      long long v = 0;
      if (!ParseInt(value, sampling ? 0 : 1, 60000, &v)) {
        *error = where + key + " must be an integer number of milliseconds (" +
                 (sampling ? "0" : "1") + "..60000)";
        return false;
      }
      (sampling ? c.nvml_sample_ms : c.max_queued_ms) = static_cast<int>(v);
    } else {
      *error = where + "unknown key '" + key + "' before the first [device] section";
      return false;
    }
  }
  std::string reason;
  if (!Finalize(&c, &reason)) {
    *error = reason;
    return false;
  }
  *config = std::move(c);
  return true;
}

bool LoadConfigFile(const std::string& path, SimConfig* config, std::string* error) {
  FILE* f = fopen(path.c_str(), "re");
  if (f == nullptr) {
    *error = path + ": cannot open: " + strerror(errno);
    return false;
  }
  std::string text;
  char buf[4096];
  size_t n;
  while ((n = fread(buf, 1, sizeof(buf), f)) > 0) {
    text.append(buf, n);
    if (text.size() > (1u << 20)) {
      fclose(f);
      *error = path + ": larger than 1 MiB; not a device config";
      return false;
    }
  }
  fclose(f);
  std::string why;
  if (!ParseConfig(text, config, &why)) {
    *error = path + ": " + why;
    return false;
  }
  return true;
}

uint64_t ConfigFingerprint(const SimConfig& c) {
  uint64_t h = 0xcbf29ce484222325ull;
  h = Fnv1a(h, c.node);
  h = Fnv1a(h, c.driver_version);
  h = Fnv1a(h, static_cast<uint64_t>(c.cuda_driver_version));
  h = Fnv1a(h, static_cast<uint64_t>(c.nvml_sample_ms));
  h = Fnv1a(h, static_cast<uint64_t>(c.max_queued_ms));
  for (const DeviceSpec& d : c.devices) {
    h = Fnv1a(h, d.name);
    h = Fnv1a(h, d.uuid);
    h = Fnv1a(h, d.memory_bytes);
    for (uint64_t v : {uint64_t(d.sm_count), uint64_t(d.max_threads_per_sm), uint64_t(d.cc_major),
                       uint64_t(d.cc_minor), uint64_t(d.numa_node), uint64_t(d.pcie_switch + 1),
                       uint64_t(d.pci_domain), uint64_t(d.pci_bus), uint64_t(d.pci_device),
                       uint64_t(d.pci_device_id), uint64_t(d.nvlink_peers.size())}) {
      h = Fnv1a(h, v);
    }
    for (int p : d.nvlink_peers) h = Fnv1a(h, static_cast<uint64_t>(p));
  }
  return h;
}

bool ParseUuidBytes(const std::string& uuid, unsigned char out[16]) {
  if (uuid.size() < 4 || uuid.compare(0, 4, "GPU-") != 0) return false;
  int nibbles = 0;
  unsigned char bytes[16] = {};
  for (size_t i = 4; i < uuid.size(); ++i) {
    if (uuid[i] == '-') continue;
    int v = HexValue(uuid[i]);
    if (v < 0 || nibbles >= 32) return false;
    bytes[nibbles / 2] =
        static_cast<unsigned char>(bytes[nibbles / 2] | (v << ((nibbles % 2) ? 0 : 4)));
    ++nibbles;
  }
  if (nibbles != 32) return false;
  memcpy(out, bytes, 16);
  return true;
}

bool ParsePciBusId(const std::string& text, uint32_t* domain, uint32_t* bus, uint32_t* device) {
  unsigned long long dom = 0;
  unsigned b = 0, d = 0, fn = 0;
  int consumed = 0;
  std::string t = Trim(text);
  if (sscanf(t.c_str(), "%llx:%x:%x.%x%n", &dom, &b, &d, &fn, &consumed) == 4 &&
      static_cast<size_t>(consumed) == t.size()) {
  } else if (sscanf(t.c_str(), "%llx:%x:%x%n", &dom, &b, &d, &consumed) == 3 &&
             static_cast<size_t>(consumed) == t.size()) {
  } else {
    return false;
  }
  if (dom > 0xFFFFFFFFull || b > 0xFF || d > 0x1F) return false;
  *domain = static_cast<uint32_t>(dom);
  *bus = b;
  *device = d;
  return true;
}

}  // namespace hami::sim
