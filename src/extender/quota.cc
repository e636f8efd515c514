#include "extender/quota.h"

#include <algorithm>

#include "device/resource_quantity.h"
#include "k8s/object.h"

namespace hami::extender {

using scheduler::Charge;
using scheduler::Ledger;
using scheduler::LedgerDevice;
using scheduler::LedgerNode;
using scheduler::LedgerPod;
using scheduler::QuotaRoom;

namespace {

struct Effective {
  std::optional<int64_t> mem, cores;
  std::string mem_resource, cores_resource;
};

}  // namespace

Status QuotaBook::Upsert(const k8s::Object& quota) {
  std::string ns = k8s::Namespace(quota);
  std::string name = k8s::Name(quota);
  std::vector<QuotaLimit> limits;
  std::string problems;
  const nlohmann::json* hard = nullptr;
  nlohmann::json::json_pointer ptr("/spec/hard");
  if (quota.is_object() && quota.contains(ptr)) hard = &quota.at(ptr);
  if (hard != nullptr && hard->is_object()) {
    for (const auto& v : vendors_.vendors()) {
      const device::ResourceNames& rn = v->resource_names();
      for (int which = 0; which < 2; ++which) {
        const std::string& res = which == 0 ? rn.memory : rn.core;
        if (res.empty()) continue;
        std::string key = "limits." + res;
        auto it = hard->find(key);
        if (it == hard->end()) continue;
        std::string text = it->is_string() ? it->get<std::string>() : it->dump();
        Result<int64_t> n = device::ParseIntegerQuantity(text);
        if (!n.ok() || *n < 0) {
          problems += (problems.empty() ? "" : "; ") + key + "=\"" + text +
                      "\" is not a non-negative integer";
          continue;
        }
        QuotaLimit l;
        l.vendor = std::string(v->Key());
        l.resource = key;
        l.memory = which == 0;
        l.limit = l.memory ? *n * std::max(1, rn.memory_factor) : *n;
        limits.push_back(std::move(l));
      }
    }
  }
  auto& by_name = quotas_[ns];
  if (limits.empty()) {
    by_name.erase(name);
    if (by_name.empty()) quotas_.erase(ns);
  } else {
    by_name[name] = std::move(limits);
  }
  if (!problems.empty()) {
    return InvalidArgumentError("resourcequota " + ns + "/" + name + ": " + problems);
  }
  return OkStatus();
}

void QuotaBook::Remove(std::string_view ns, std::string_view name) {
  auto it = quotas_.find(ns);
  if (it == quotas_.end()) return;
  it->second.erase(std::string(name));
  if (it->second.empty()) quotas_.erase(it);
}

bool QuotaBook::HasQuota(std::string_view ns) const { return quotas_.find(ns) != quotas_.end(); }

std::map<std::string, std::pair<int64_t, int64_t>> QuotaBook::Usage(
    const Ledger& ledger, std::string_view ns, std::string_view exclude_uid) const {
  std::map<std::string, std::pair<int64_t, int64_t>> out;
  const device::VendorRegistry& vendors = ledger.vendors();
  for (const LedgerNode& node : ledger.nodes()) {
    for (uint32_t slot : node.pods) {
      const LedgerPod* pod = ledger.FindPodSlot(slot);
      if (pod == nullptr || pod->name_space != ns || pod->uid == exclude_uid) continue;
      for (const Charge& c : pod->charges) {
        for (const LedgerDevice& d : node.devices) {
          if (d.uuid != c.uuid) continue;
          auto& u = out[std::string(vendors.vendors()[d.vendor]->Key())];
          u.first += c.mem;
          u.second += c.cores;
          break;
        }
      }
    }
  }
  return out;
}

std::vector<QuotaRoom> QuotaBook::Room(const Ledger& ledger, std::string_view ns,
                                       std::string_view exclude_uid) const {
  std::vector<QuotaRoom> out;
  auto it = quotas_.find(ns);
  if (it == quotas_.end()) return out;
  std::map<std::string, Effective> eff;
  for (const auto& [name, limits] : it->second) {
    for (const QuotaLimit& l : limits) {
      Effective& e = eff[l.vendor];
      std::optional<int64_t>& slot = l.memory ? e.mem : e.cores;
      slot = slot ? std::min(*slot, l.limit) : l.limit;
    }
  }
  auto usage = Usage(ledger, ns, exclude_uid);
  for (const auto& [vendor, e] : eff) {
    QuotaRoom r;
    r.vendor = vendor;
    auto u = usage.find(vendor);
    int64_t used_mem = u == usage.end() ? 0 : u->second.first;
    int64_t used_cores = u == usage.end() ? 0 : u->second.second;
    if (e.mem) r.mem_mib = std::max<int64_t>(0, *e.mem - used_mem);
    if (e.cores) r.cores = std::max<int64_t>(0, *e.cores - used_cores);
    out.push_back(std::move(r));
  }
  return out;
}

Status QuotaBook::Check(const Ledger& ledger, std::string_view ns, std::string_view vendor,
                        int64_t mem_mib, int64_t cores) const {
  auto it = quotas_.find(ns);
  if (it == quotas_.end()) return OkStatus();
  auto usage = Usage(ledger, ns);
  auto u = usage.find(std::string(vendor));
  int64_t used_mem = u == usage.end() ? 0 : u->second.first;
  int64_t used_cores = u == usage.end() ? 0 : u->second.second;
  for (const auto& [name, limits] : it->second) {
    for (const QuotaLimit& l : limits) {
      if (l.vendor != vendor) continue;
      int64_t used = l.memory ? used_mem : used_cores;
      int64_t want = l.memory ? mem_mib : cores;
      if (want > 0 && used + want > l.limit) {
        return ResourceExhaustedError("resourcequota " + std::string(ns) + "/" + name + ": " +
                                      l.resource + " used " + std::to_string(used) +
                                      " + requested " + std::to_string(want) + " > limit " +
                                      std::to_string(l.limit));
      }
    }
  }
  return OkStatus();
}

std::vector<QuotaUsageLine> QuotaBook::Lines(const Ledger& ledger) const {
  std::vector<QuotaUsageLine> out;
  for (const auto& [ns, by_name] : quotas_) {
    auto usage = Usage(ledger, ns);
    for (const auto& [name, limits] : by_name) {
      for (const QuotaLimit& l : limits) {
        auto u = usage.find(l.vendor);
        int64_t used = u == usage.end() ? 0 : (l.memory ? u->second.first : u->second.second);
        out.push_back(QuotaUsageLine{ns, name, l.resource, used, l.limit});
      }
    }
  }
  return out;
}

}  // namespace hami::extender
