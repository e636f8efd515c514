#include "monitor/monitor.h"

#include <sys/stat.h>

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <set>
#include <sstream>
#include <system_error>

#include "common/log.h"
#include "monitor/feedback.h"
#include "monitor/mig_reservations.h"
#include "monitor/region_access.h"

namespace hami::monitor {

namespace fs = std::filesystem;

namespace {
// How far back the first look at a GPU's per-process samples reaches.
constexpr uint64_t kFirstSampleWindowUs = 5'000'000;

uint64_t EpochUs(std::chrono::system_clock::time_point t) {
  return static_cast<uint64_t>(
      std::chrono::duration_cast<std::chrono::microseconds>(t.time_since_epoch()).count());
}
}  // namespace

namespace {

// A log line built while the container table is locked and written after it is released: a
// stalled log pipe must never hold up /metrics.
class Defer {
 public:
  Defer(UpdateResult* r, LogLevel level) : r_(r), level_(level) {}
  ~Defer() { r_->logs.push_back({level_, out_.str()}); }
  template <typename T>
  Defer& operator<<(const T& v) {
    out_ << v;
    return *this;
  }

 private:
  UpdateResult* r_;
  LogLevel level_;
  std::ostringstream out_;
};

}  // namespace

std::optional<ContainerDirName> ParseContainerDirName(const std::string& name) {
  size_t sep = name.find('_');
  if (sep == std::string::npos || sep == 0 || sep + 1 >= name.size()) return std::nullopt;
  return ContainerDirName{name.substr(0, sep), name.substr(sep + 1)};
}

struct Monitor::Tracked {
  std::string name, path;
  ContainerDirName id;
  std::unique_ptr<RegionAccess> region;
  std::string region_path;
  off_t region_size = 0;
  FileId file;
  std::string attach_error;       // the last reason the region could not be mapped
  std::map<int, double> sm_util;  // container device index -> percent (last update)

  // Lets go of a mapped region whose file was replaced, shrank or no longer reads as a region:
  // the file is writable from inside the container. Attach opens it again.
  void DropChangedRegion(UpdateResult* result);
  // Maps the directory's one region file when it can. A new reason it cannot is logged and
  // reported once; an empty file (libvgpu still creating it) is looked at again next time.
  void Attach(UpdateResult* result);
};

void Monitor::Tracked::DropChangedRegion(UpdateResult* result) {
  struct stat st {};
  std::string why;
  if (stat(region_path.c_str(), &st) != 0 || st.st_size != region_size ||
      FileIdOf(st.st_dev, st.st_ino) != file || !region->Refresh(&why)) {
    Defer(result, LogLevel::kWarning)
        << region_path << " changed size, was replaced or cannot be read"
        << (why.empty() ? "" : " (" + why + ")") << "; opening it again";
    region.reset();
    attach_error.clear();
  }
}

void Monitor::Tracked::Attach(UpdateResult* result) {
  std::error_code ec;
  std::vector<std::string> caches;
  for (fs::directory_iterator f(path, ec), end; !ec && f != end; f.increment(ec)) {
    if (f->path().extension() == ".cache" && f->is_regular_file(ec)) {
      caches.push_back(f->path().string());
    }
  }
  std::string why;
  if (caches.size() > 1) {
    why = std::to_string(caches.size()) + " region files (*.cache); expected one";
  } else if (caches.size() == 1) {
    struct stat st {};
    if (stat(caches[0].c_str(), &st) == 0 && st.st_size == 0) {
      // libvgpu is creating it; look again next time.
    } else if (std::unique_ptr<RegionAccess> r = OpenRegion(caches[0], &why); r != nullptr) {
      region = std::move(r);
      region_path = caches[0];
      region_size = st.st_size;
      file = FileIdOf(st.st_dev, st.st_ino);
      ++result->mapped_now;
      Defer(result, LogLevel::kInfo)
          << "watching " << caches[0] << " (" << region->Format() << " region; pod "
          << id.pod_uid << ", container " << id.container << ")";
    }
  }
  if (!why.empty() && why != attach_error) {
    Defer(result, LogLevel::kWarning) << path << ": " << why << "; not monitored";
    result->problems.push_back(path + ": " + why);
  }
  attach_error = why;
}

namespace {

// Time since the directory was last modified; 0 when it cannot be read.
std::chrono::seconds DirectoryAge(const std::string& path,
                                  std::chrono::system_clock::time_point now) {
  struct stat st {};
  auto age = std::chrono::seconds(0);
  if (stat(path.c_str(), &st) == 0) {
    age = std::chrono::duration_cast<std::chrono::seconds>(
        now - std::chrono::system_clock::from_time_t(st.st_mtime));
  }
  return age;
}

}  // namespace

Monitor::Monitor(MonitorOptions options, GpuStats* gpus, const PodDirectory* pods, ProcFs procfs)
    : options_(std::move(options)), gpus_(gpus), pods_(pods), procfs_(std::move(procfs)) {}

Monitor::~Monitor() = default;

UpdateResult Monitor::Update(std::chrono::system_clock::time_point now) {
  UpdateResult result;
  std::vector<HostGpu> gpus;
  if (gpus_ != nullptr) {
    Result<std::vector<HostGpu>> g = gpus_->Gpus();
    if (g.ok()) {
      gpus = std::move(*g);
    } else {
      result.problems.push_back("reading the GPUs: " + g.status().message());
    }
  }
  std::vector<MigReservation> migs = ReadMigReservations(&result);
  {
    MutexLock lock(mu_);
    last_gpus_ = gpus;
    mig_reservations_ = std::move(migs);
    Rescan(now, &result);
    MapHostPids(gpus, &result);
    MeasureSm(gpus, now);
    if (options_.feedback) Feedback(&result);
    result.containers = static_cast<int>(tracked_.size());
  }
  for (const auto& [level, text] : result.logs) {
    switch (level) {
      case LogLevel::kWarning:
        HAMI_LOG(Warning) << text;
        break;
      case LogLevel::kInfo:
        HAMI_LOG(Info) << text;
        break;
      case LogLevel::kVerbose:
        HAMI_VLOG(1) << text;
        break;
    }
  }
  return result;
}

std::vector<MigReservation> Monitor::ReadMigReservations(UpdateResult* result) {
  std::vector<MigReservation> out;
  std::map<std::string, PodRef> pods;
  if (pods_ != nullptr) pods = pods_->MigPods();
  // Forget pods that left or lost the annotation: a later bad one is logged again.
  for (auto it = bad_mig_annotations_.begin(); it != bad_mig_annotations_.end();) {
    it = pods.count(it->first) == 0 ? bad_mig_annotations_.erase(it) : std::next(it);
  }
  for (const auto& [uid, pod] : pods) {
    Result<std::vector<MigReservation>> r = RealisedMigReservations(pod);
    if (!r.ok()) {
      auto [bad, inserted] = bad_mig_annotations_.try_emplace(uid, pod.mig_allocations);
      if (inserted || bad->second != pod.mig_allocations) {
        bad->second = pod.mig_allocations;
        Defer(result, LogLevel::kVerbose)
            << "pod " << pod.ns << "/" << pod.name << ": hami.io/vgpu-mig-allocations is unusable ("
            << r.status().message() << "); its MIG devices are not exported";
      }
      continue;
    }
    bad_mig_annotations_.erase(uid);
    out.insert(out.end(), std::make_move_iterator(r->begin()), std::make_move_iterator(r->end()));
  }
  return out;
}

void Monitor::Rescan(std::chrono::system_clock::time_point now, UpdateResult* result) {
  std::set<std::string> seen;
  std::error_code ec;
  for (fs::directory_iterator it(options_.containers_dir, ec), end; !ec && it != end;
       it.increment(ec)) {
    std::string name = it->path().filename().string();
    std::optional<ContainerDirName> id = ParseContainerDirName(name);
    if (!id || !it->is_directory(ec)) continue;
    seen.insert(name);
    auto& slot = tracked_[name];
    if (slot == nullptr) {
      slot = std::make_unique<Tracked>();
      slot->name = name;
      slot->path = it->path().string();
      slot->id = *id;
    }
  }
  for (auto it = tracked_.begin(); it != tracked_.end();) {
    if (seen.count(it->first) == 0) {
      Defer(result, LogLevel::kVerbose) << "container directory " << it->second->path << " is gone";
      it = tracked_.erase(it);
    } else {
      ++it;
    }
  }
  const bool synced = pods_ != nullptr && pods_->Synced();
  for (auto it = tracked_.begin(); it != tracked_.end();) {
    Tracked& t = *it->second;
    if (t.region != nullptr) t.DropChangedRegion(result);
    if (t.region == nullptr) t.Attach(result);
    // A directory whose pod has left the node: removed once it is old enough and unused.
    if (synced && !pods_->Find(t.id.pod_uid)) {
      if (DirectoryAge(t.path, now) >= options_.resync_delay && !AnyProcessAlive(t)) {
        const std::string path = t.path, uid = t.id.pod_uid;
        it = tracked_.erase(it);  // unmaps first
        fs::remove_all(path, ec);
        if (ec) {
          result->problems.push_back("cannot remove " + path + ": " + ec.message());
        } else {
          ++result->removed;
          Defer(result, LogLevel::kInfo)
              << "removed " << path << ": pod " << uid << " is no longer on this node";
        }
        continue;
      }
    }
    ++it;
  }
}

bool Monitor::AnyProcessAlive(const Tracked& t) const {
  if (t.region == nullptr) return false;
  for (int i = 0; i < t.region->SlotCount(); ++i) {
    RegionSlotView v = t.region->Slot(i);
    if (v.pid == 0 || v.host_pid == 0) continue;
    if (v.start_time != 0 ? procfs_.Alive(v.host_pid, v.start_time)
                          : procfs_.StartTime(v.host_pid).has_value()) {
      return true;
    }
  }
  return false;
}

void Monitor::MapHostPids(const std::vector<HostGpu>& gpus, UpdateResult* result) {
  std::set<int> pids;
  for (const HostGpu& g : gpus) {
    Result<std::vector<GpuProcess>> procs = gpus_->Processes(g.uuid);
    if (!procs.ok()) {
      result->problems.push_back("processes of " + g.uuid + ": " + procs.status().message());
      continue;
    }
    for (const GpuProcess& p : *procs) pids.insert(p.pid);
  }
  // Forget processes that left the GPU; and when a region was mapped just now, the processes
  // found to belong to no region yet, which may be its.
  for (auto it = host_pids_.begin(); it != host_pids_.end();) {
    bool drop = pids.count(it->first) == 0 || (result->mapped_now > 0 && it->second.dir.empty());
    it = drop ? host_pids_.erase(it) : std::next(it);
  }
  std::map<FileId, Tracked*> by_file;
  for (auto& [name, t] : tracked_) {
    if (t->region != nullptr) by_file[t->file] = t.get();
  }
  for (int pid : pids) {
    std::optional<uint64_t> start = procfs_.StartTime(pid);
    if (!start) continue;  // gone already, or a zombie
    auto cached = host_pids_.find(pid);
    if (cached != host_pids_.end() && cached->second.start_time == *start) {
      const Resolved& r = cached->second;
      if (r.dir.empty()) continue;  // not a container process of ours
      auto t = tracked_.find(r.dir);
      if (t != tracked_.end() && t->second->region != nullptr) {
        RegionAccess& region = *t->second->region;
        RegionSlotView v = region.Slot(r.slot);
        if (v.pid == r.inner && (v.start_time == 0 || v.start_time == *start)) {
          if (v.host_pid != pid) {
            region.SetHostPid(r.slot, pid);
            ++result->host_pids_written;
          }
          continue;
        }
      }
    }
    // Which region does it map, and which slot of it is this process?
    Resolved r;
    r.start_time = *start;
    std::vector<int> ns_pids = procfs_.NsPids(pid);
    const int inner = ns_pids.empty() ? pid : ns_pids.back();
    Tracked* owner = nullptr;
    for (const FileId& f : ParseMappedFiles(procfs_.Maps(pid))) {
      auto hit = by_file.find(f);
      if (hit != by_file.end()) {
        owner = hit->second;
        break;
      }
    }
    if (owner != nullptr) {
      RegionAccess& region = *owner->region;
      for (int s = 0; s < region.SlotCount(); ++s) {
        RegionSlotView v = region.Slot(s);
        // A layout without start times (HAMi-core's) is matched by PID alone: the mapped file
        // already says which container, and a PID is unique within it.
        if (v.pid != inner || (v.start_time != 0 && v.start_time != *start)) continue;
        r.dir = owner->name;
        r.slot = s;
        r.inner = inner;
        if (v.host_pid != pid) {
          region.SetHostPid(s, pid);
          ++result->host_pids_written;
          Defer(result, LogLevel::kVerbose)
              << "host PID " << pid << " is PID " << inner << " of container "
              << owner->id.container << " (pod " << owner->id.pod_uid << ")";
        }
        break;
      }
      // Mapped but not registered yet (libvgpu is starting): look again next time.
      if (r.dir.empty()) continue;
    }
    host_pids_[pid] = std::move(r);
  }
}

void Monitor::MeasureSm(const std::vector<HostGpu>& gpus,
                        std::chrono::system_clock::time_point now) {
  for (auto& [name, t] : tracked_) t->sm_util.clear();
  for (const HostGpu& g : gpus) {
    uint64_t& since = last_sample_us_[g.uuid];
    if (since == 0) since = EpochUs(now) - kFirstSampleWindowUs;
    Result<std::vector<ProcessSample>> samples = gpus_->Samples(g.uuid, since);
    if (!samples.ok() || samples->empty()) continue;
    // A driver may hold several samples of one process since the last look: average them.
    std::map<int, std::pair<double, int>> per_pid;
    for (const ProcessSample& s : *samples) {
      if (s.timestamp_us <= since) continue;
      auto& [sum, n] = per_pid[s.pid];
      sum += s.sm_util;
      ++n;
    }
    for (const ProcessSample& s : *samples) since = std::max(since, s.timestamp_us);
    for (const auto& [pid, acc] : per_pid) {
      auto r = host_pids_.find(pid);
      if (r == host_pids_.end() || r->second.dir.empty()) continue;
      auto t = tracked_.find(r->second.dir);
      if (t == tracked_.end() || t->second->region == nullptr) continue;
      int dev = t->second->region->FindDevice(g.uuid);
      if (dev >= 0) t->second->sm_util[dev] += acc.first / acc.second;
    }
  }
}

void Monitor::Feedback(UpdateResult* result) {
  std::vector<FeedbackIn> in;
  std::vector<Tracked*> order;
  for (auto& [name, t] : tracked_) {
    if (t->region == nullptr) continue;
    const RegionAccess& region = *t->region;
    FeedbackIn f;
    f.priority = region.Priority();
    f.recent_kernel = region.RecentKernel();
    for (int i = 0; i < region.DeviceCount(); ++i) f.uuids.push_back(region.Uuid(i));
    in.push_back(std::move(f));
    order.push_back(t.get());
  }
  std::vector<FeedbackOut> out = ComputeFeedback(in);
  for (size_t i = 0; i < out.size(); ++i) {
    RegionAccess& region = *order[i]->region;
    // A launch may have marked the container active since the read: it wins.
    if (out[i].recent_kernel != in[i].recent_kernel &&
        region.ReplaceRecentKernel(in[i].recent_kernel, out[i].recent_kernel)) {
      if (out[i].recent_kernel < 0) {
        Defer(result, LogLevel::kInfo)
            << "container " << order[i]->id.container << " of pod " << order[i]->id.pod_uid
            << " waits: a higher-priority task is active on its GPU";
      } else if (in[i].recent_kernel < 0) {
        Defer(result, LogLevel::kInfo) << "container " << order[i]->id.container << " of pod "
                                       << order[i]->id.pod_uid << " resumes";
      }
    }
    if (region.UtilizationSwitch() != out[i].utilization_switch) {
      region.SetUtilizationSwitch(out[i].utilization_switch);
      Defer(result, LogLevel::kVerbose)
          << "container " << order[i]->id.container << " of pod " << order[i]->id.pod_uid
          << ": SM limit "
          << (out[i].utilization_switch ? "enforced (its GPU is contended)"
                                        : "relaxed (its GPU is not contended)");
    }
  }
}

MonitorSnapshot Monitor::Snapshot() const {
  MonitorSnapshot snap;
  MutexLock lock(mu_);
  snap.gpus = last_gpus_;
  snap.mig_reservations = mig_reservations_;
  for (const auto& [name, tp] : tracked_) {
    const Tracked& t = *tp;
    ContainerUsage c;
    c.pod_uid = t.id.pod_uid;
    c.container = t.id.container;
    if (pods_ != nullptr) c.pod = pods_->Find(t.id.pod_uid);
    std::string why;
    if (t.region != nullptr && t.region->Refresh(&why)) {  // figures as of this request
      const RegionAccess& region = *t.region;
      c.last_kernel_time = region.LastKernelTime();
      c.priority = region.Priority();
      c.utilization_switch = region.UtilizationSwitch();
      c.recent_kernel = region.RecentKernel();
      for (int i = 0; i < region.DeviceCount(); ++i) {
        ContainerDeviceUsage d;
        static_cast<RegionDeviceFigures&>(d) = region.Device(i);
        d.index = i;
        auto u = t.sm_util.find(i);
        d.sm_util = u == t.sm_util.end() ? 0 : std::min(100.0, u->second);
        c.devices.push_back(std::move(d));
      }
      for (int s = 0; s < region.SlotCount(); ++s) {
        RegionSlotView v = region.Slot(s);
        if (v.pid == 0) continue;
        ++c.processes;
        if (v.host_pid != 0) ++c.host_pids_known;
      }
    }
    snap.containers.push_back(std::move(c));
  }
  return snap;
}

}  // namespace hami::monitor
