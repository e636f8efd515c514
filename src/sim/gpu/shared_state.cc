#include "sim/gpu/shared_state.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/futex.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>

#include "sim/gpu/clock.h"
#include "sim/gpu/log.h"
#include "sim/gpu/proc_liveness.h"

namespace hami::sim {
namespace {

constexpr uint64_t kMagic = 0x4d49532d494d4148ull;  // "HAMI-SIM"
// 4: per-device MIG state; 5: memory charged per (process, MIG device), XID instance ids.
constexpr uint32_t kLayoutVersion = 5;

void CopyString(char* dst, size_t cap, const std::string& src) {
  size_t n = std::min(cap - 1, src.size());
  memcpy(dst, src.data(), n);
  dst[n] = '\0';
}

std::string Hex(uint64_t v) {
  char buf[32];
  snprintf(buf, sizeof(buf), "%016llx", static_cast<unsigned long long>(v));
  return buf;
}

// Creates every missing directory of `path`'s parent (mode 01777, like /tmp, so that processes
// of different users on one node can share the state).
void MakeParentDirs(const std::string& path) {
  for (size_t pos = path.find('/', 1); pos != std::string::npos; pos = path.find('/', pos + 1)) {
    std::string dir = path.substr(0, pos);
    if (mkdir(dir.c_str(), 01777) == 0) chmod(dir.c_str(), 01777);
  }
}

void InitHeader(SharedHeader* h, const SimConfig& config) {
  h->layout_version = kLayoutVersion;
  h->device_count = static_cast<uint32_t>(config.devices.size());
  h->fingerprint = ConfigFingerprint(config);
  h->file_size = sizeof(SharedHeader);
  h->created_realtime_ns = RealtimeNs();
  CopyString(h->driver_version, sizeof(h->driver_version), config.driver_version);
  h->cuda_driver_version = config.cuda_driver_version;
  for (size_t i = 0; i < config.devices.size(); ++i) {
    const DeviceSpec& d = config.devices[i];
    SharedDeviceInfo& s = h->devices[i].info;
    CopyString(s.name, sizeof(s.name), d.name);
    CopyString(s.uuid, sizeof(s.uuid), d.uuid);
    s.memory_bytes = d.memory_bytes;
    s.sm_count = d.sm_count;
    s.max_threads_per_sm = d.max_threads_per_sm;
    s.cc_major = d.cc_major;
    s.cc_minor = d.cc_minor;
    s.numa_node = d.numa_node;
    s.pcie_switch = d.pcie_switch;
    s.pci_domain = d.pci_domain;
    s.pci_bus = d.pci_bus;
    s.pci_device = d.pci_device;
    s.pci_device_id = d.pci_device_id;
    s.nvlink_count = static_cast<int32_t>(d.nvlink_peers.size());
    for (size_t k = 0; k < d.nvlink_peers.size(); ++k) s.nvlink_peers[k] = d.nvlink_peers[k];
  }
  pthread_mutexattr_t attr;
  pthread_mutexattr_init(&attr);
  pthread_mutexattr_setpshared(&attr, PTHREAD_PROCESS_SHARED);
  pthread_mutexattr_setrobust(&attr, PTHREAD_MUTEX_ROBUST);
  pthread_mutex_init(&h->mutex, &attr);
  pthread_mutexattr_destroy(&attr);
  // Published last: a reader that sees the magic sees an initialised file.
  std::atomic_thread_fence(std::memory_order_release);
  h->magic = kMagic;
}

// Opens (and if `config` is given, creates/initialises) the file; returns the mapping.
SharedHeader* MapState(const std::string& path, const SimConfig* config, std::string* error) {
  if (config != nullptr) MakeParentDirs(path);
  int fd = open(path.c_str(), O_RDWR | O_CLOEXEC | (config != nullptr ? O_CREAT : 0), 0666);
  if (fd < 0) {
    *error = "cannot open state file " + path + ": " + strerror(errno);
    return nullptr;
  }
  // The first opener initialises the file under an exclusive flock; others wait for it.
  if (flock(fd, LOCK_EX) != 0) {
    *error = "cannot lock state file " + path + ": " + strerror(errno);
    close(fd);
    return nullptr;
  }
  struct stat st;
  fstat(fd, &st);
  bool fresh = st.st_size == 0;
  if (fresh && config == nullptr) {
    *error = "state file " + path + " is empty (no process has initialised it yet)";
    flock(fd, LOCK_UN);
    close(fd);
    return nullptr;
  }
  if (fresh) {
    fchmod(fd, 0666);
    if (ftruncate(fd, sizeof(SharedHeader)) != 0) {
      *error = "cannot size state file " + path + ": " + strerror(errno);
      flock(fd, LOCK_UN);
      close(fd);
      return nullptr;
    }
  } else if (static_cast<size_t>(st.st_size) != sizeof(SharedHeader)) {
    *error = "state file " + path + " has size " + std::to_string(st.st_size) + ", expected " +
             std::to_string(sizeof(SharedHeader)) +
             " (written by another sim version?); run `hami-simctl reset` to discard it";
    flock(fd, LOCK_UN);
    close(fd);
    return nullptr;
  }
  void* p = mmap(nullptr, sizeof(SharedHeader), PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  if (p == MAP_FAILED) {
    *error = "cannot map state file " + path + ": " + strerror(errno);
    flock(fd, LOCK_UN);
    close(fd);
    return nullptr;
  }
  auto* h = static_cast<SharedHeader*>(p);
  if (fresh) InitHeader(h, *config);
  flock(fd, LOCK_UN);
  close(fd);
  const char* why = nullptr;
  if (h->magic != kMagic) {
    why = "is not a hami-sim state file (bad magic)";
  } else if (h->layout_version != kLayoutVersion) {
    why = "was written by another sim version (layout mismatch)";
  } else if (h->device_count == 0 || h->device_count > static_cast<uint32_t>(kMaxDevices)) {
    why = "is corrupt (device count out of range)";
  } else if (config != nullptr && h->fingerprint != ConfigFingerprint(*config)) {
    *error = "state file " + path + " was initialised from a different device config (state " +
             Hex(h->fingerprint) + ", config " + Hex(ConfigFingerprint(*config)) +
             "); run `hami-simctl reset` (with the same HAMI_SIM_STATE) to discard the old state";
  }
  if (why != nullptr) {
    *error = "state file " + path + " " + why + "; run `hami-simctl reset` to discard it";
  }
  if (!error->empty()) {
    munmap(p, sizeof(SharedHeader));
    return nullptr;
  }
  return h;
}

long Futex(const uint32_t* addr, int op, uint32_t val, const timespec* timeout) {
  return syscall(SYS_futex, addr, op, val, timeout, nullptr, 0);
}

}  // namespace

// Scoped holder of the state mutex; repairs the lock if its previous owner died.
class SharedState::Lock {
 public:
  explicit Lock(SharedHeader* h) : h_(h) {
    int rc = pthread_mutex_lock(&h_->mutex);
    if (rc == EOWNERDEAD) {
      SimLogWarn("a process died while holding the shared-state lock; recovering");
      pthread_mutex_consistent(&h_->mutex);
    } else if (rc != 0) {
      // ENOTRECOVERABLE cannot happen since every EOWNERDEAD is made consistent; anything
      // else is a corrupt file, which is an impossible state for a file we created.
      SimLogError("shared-state lock failed: %s", strerror(rc));
      abort();
    }
  }
  ~Lock() { pthread_mutex_unlock(&h_->mutex); }
  Lock(const Lock&) = delete;
  Lock& operator=(const Lock&) = delete;

 private:
  SharedHeader* h_;
};

SharedState::SharedState(SharedHeader* header, size_t size) : header_(header), size_(size) {}

SharedState::~SharedState() { munmap(header_, size_); }

std::unique_ptr<SharedState> SharedState::Open(const std::string& path, const SimConfig& config,
                                               std::string* error) {
  error->clear();
  SharedHeader* h = MapState(path, &config, error);
  if (h == nullptr) return nullptr;
  return std::unique_ptr<SharedState>(new SharedState(h, sizeof(SharedHeader)));
}

std::unique_ptr<SharedState> SharedState::OpenExisting(const std::string& path,
                                                       std::string* error) {
  error->clear();
  SharedHeader* h = MapState(path, nullptr, error);
  if (h == nullptr) return nullptr;
  return std::unique_ptr<SharedState>(new SharedState(h, sizeof(SharedHeader)));
}

int SharedState::RegisterProcess(pid_t pid, uint64_t start_time) {
  Lock lock(header_);
  int free_slot = -1;
  for (int i = 0; i < kMaxProcesses; ++i) {
    SharedProcess& p = header_->procs[i];
    if (p.pid == pid && p.start_time == start_time) return i;
    if (p.pid == 0 && free_slot < 0) free_slot = i;
  }
  if (free_slot < 0) {
    ReclaimDeadLocked();
    for (int i = 0; i < kMaxProcesses && free_slot < 0; ++i) {
      if (header_->procs[i].pid == 0) free_slot = i;
    }
    if (free_slot < 0) return -1;
  }
  SharedProcess& p = header_->procs[free_slot];
  memset(p.mem, 0, sizeof(p.mem));
  memset(p.contexts, 0, sizeof(p.contexts));
  memset(p.mig_mem, 0, sizeof(p.mig_mem));  // its SharedHeader::mig_mem rows are already zero
  // The busy rings are not cleared (that would touch 1 MiB of the file per process); readers
  // ignore everything before registered_ns instead.
  p.registered_ns = MonotonicNs();
  p.start_time = start_time;
  p.pid = pid;
  return free_slot;
}

void SharedState::AddContext(int slot, int dev, int delta) {
  Lock lock(header_);
  uint32_t& c = header_->procs[slot].contexts[dev];
  if (delta < 0 && c < static_cast<uint32_t>(-delta)) {
    c = 0;
  } else {
    c = static_cast<uint32_t>(static_cast<int64_t>(c) + delta);
  }
}

int SharedState::ReclaimDeadLocked() {
  int reclaimed = 0;
  for (int i = 0; i < kMaxProcesses; ++i) {
    SharedProcess& p = header_->procs[i];
    if (p.pid == 0) continue;
    if (ProcessAlive(p.pid, p.start_time)) continue;
    SimLogDebug("reclaiming state of dead process %d", p.pid);
    p.pid = 0;
    p.start_time = 0;
    memset(p.mem, 0, sizeof(p.mem));
    memset(p.contexts, 0, sizeof(p.contexts));
    for (int dev = 0; dev < kMaxDevices; ++dev) {
      if (p.mig_mem[dev] != 0) {
        memset(header_->mig_mem[i][dev], 0, sizeof(header_->mig_mem[i][dev]));
      }
    }
    memset(p.mig_mem, 0, sizeof(p.mig_mem));
    ++reclaimed;
  }
  return reclaimed;
}

int SharedState::ReclaimDead() {
  Lock lock(header_);
  return ReclaimDeadLocked();
}

uint64_t SharedState::UsedLocked(int dev) const {
  uint64_t sum = 0;
  for (const SharedProcess& p : header_->procs) {
    if (p.pid != 0) sum += p.mem[dev] + p.mig_mem[dev];
  }
  return sum;
}

bool SharedState::Charge(int slot, int dev, uint64_t bytes) {
  Lock lock(header_);
  const uint64_t total = header_->devices[dev].info.memory_bytes;
  uint64_t u = UsedLocked(dev);
  if (bytes > total || u > total - bytes) {
    if (ReclaimDeadLocked() == 0) return false;
    u = UsedLocked(dev);
    if (bytes > total || u > total - bytes) return false;
  }
  header_->procs[slot].mem[dev] += bytes;
  return true;
}

void SharedState::Uncharge(int slot, int dev, uint64_t bytes) {
  Lock lock(header_);
  uint64_t& m = header_->procs[slot].mem[dev];
  m = m > bytes ? m - bytes : 0;
}

uint64_t SharedState::UsedMemory(int dev) {
  Lock lock(header_);
  ReclaimDeadLocked();
  return UsedLocked(dev);
}

uint64_t SharedState::MigUsedLocked(int dev, uint32_t gi_id) const {
  uint64_t sum = 0;
  for (int i = 0; i < kMaxProcesses; ++i) {
    const SharedProcess& p = header_->procs[i];
    if (p.pid == 0 || p.mig_mem[dev] == 0) continue;
    for (uint64_t bytes : header_->mig_mem[i][dev][gi_id]) sum += bytes;
  }
  return sum;
}

bool SharedState::ChargeMig(int slot, const MigChargeTarget& t, uint64_t bytes) {
  if (t.gi_id >= static_cast<uint32_t>(kMigGiIdSpace) ||
      t.ci_id >= static_cast<uint32_t>(kMigCiIdSpace)) {
    return false;
  }
  Lock lock(header_);
  const MigGpuInstanceRecord* gi = MigFindGi(header_->devices[t.dev].mig, t.gi_id);
  const MigComputeInstanceRecord* ci = gi != nullptr ? MigFindCi(*gi, t.ci_id) : nullptr;
  if (ci == nullptr || strcmp(ci->uuid, t.uuid) != 0) return false;
  const uint64_t total = t.gi_memory_bytes;
  uint64_t u = MigUsedLocked(t.dev, t.gi_id);
  if (bytes > total || u > total - bytes) {
    if (ReclaimDeadLocked() == 0) return false;
    u = MigUsedLocked(t.dev, t.gi_id);
    if (bytes > total || u > total - bytes) return false;
  }
  header_->mig_mem[slot][t.dev][t.gi_id][t.ci_id] += bytes;
  header_->procs[slot].mig_mem[t.dev] += bytes;
  return true;
}

void SharedState::UnchargeMig(int slot, const MigChargeTarget& t, uint64_t bytes) {
  if (t.gi_id >= static_cast<uint32_t>(kMigGiIdSpace) ||
      t.ci_id >= static_cast<uint32_t>(kMigCiIdSpace)) {
    return;
  }
  Lock lock(header_);
  uint64_t& m = header_->mig_mem[slot][t.dev][t.gi_id][t.ci_id];
  const uint64_t taken = std::min(m, bytes);
  m -= taken;
  uint64_t& total = header_->procs[slot].mig_mem[t.dev];
  total = total > taken ? total - taken : 0;
}

uint64_t SharedState::MigUsedMemory(int dev, uint32_t gi_id) {
  if (gi_id >= static_cast<uint32_t>(kMigGiIdSpace)) return 0;
  Lock lock(header_);
  ReclaimDeadLocked();
  return MigUsedLocked(dev, gi_id);
}

uint64_t SharedState::MigProcessMemory(pid_t pid, uint64_t start_time, int dev, uint32_t gi_id,
                                       uint32_t ci_id) {
  if (gi_id >= static_cast<uint32_t>(kMigGiIdSpace) ||
      ci_id >= static_cast<uint32_t>(kMigCiIdSpace)) {
    return 0;
  }
  Lock lock(header_);
  for (int i = 0; i < kMaxProcesses; ++i) {
    const SharedProcess& p = header_->procs[i];
    if (p.pid == pid && p.start_time == start_time) return header_->mig_mem[i][dev][gi_id][ci_id];
  }
  return 0;
}

namespace {
class RingSink : public BusySink {
 public:
  RingSink(UtilRing* device, UtilRing* process) : device_(device), process_(process) {}
  void Busy(uint64_t start_ns, uint64_t end_ns) override {
    RingAddBusy(device_, start_ns, end_ns);
    RingAddBusy(process_, start_ns, end_ns);
  }

 private:
  UtilRing* device_;
  UtilRing* process_;
};
}  // namespace

uint64_t SharedState::ScheduleKernel(int slot, int dev, int sm_first, int sm_count,
                                     uint64_t t0_ns, uint64_t blocks, uint64_t duration_ns) {
  Lock lock(header_);
  SharedDevice& d = header_->devices[dev];
  // Callers derive the range from the device (MigSmRange clamps to it); keep it inside anyway.
  sm_first = std::max(0, std::min(sm_first, d.info.sm_count - 1));
  sm_count = std::max(1, std::min(sm_count, d.info.sm_count - sm_first));
  RingSink sink(&d.util, &header_->proc_util[slot][dev]);
  return ScheduleBlocks(d.sm_free_ns + sm_first, sm_count, t0_ns, blocks, duration_ns, &sink);
}

std::vector<ProcessUsage> SharedState::Processes(int dev, uint64_t from_ns, uint64_t to_ns) {
  Lock lock(header_);
  ReclaimDeadLocked();
  std::vector<ProcessUsage> out;
  for (int i = 0; i < kMaxProcesses; ++i) {
    const SharedProcess& p = header_->procs[i];
    if (p.pid == 0) continue;
    double busy = RingBusyNs(header_->proc_util[i][dev], std::max(from_ns, p.registered_ns), to_ns);
    if (p.mem[dev] == 0 && p.contexts[dev] == 0 && busy == 0) continue;
    out.push_back(ProcessUsage{p.pid, p.mem[dev], p.contexts[dev], busy});
  }
  return out;
}

double SharedState::DeviceBusyNs(int dev, uint64_t from_ns, uint64_t to_ns) {
  Lock lock(header_);
  return RingBusyNs(header_->devices[dev].util, from_ns, to_ns);
}

void SharedState::InjectXid(int dev, uint64_t xid, uint32_t gi_id, uint32_t ci_id) {
  {
    Lock lock(header_);
    SharedDevice& d = header_->devices[dev];
    uint64_t seq = ++d.xid_seq;
    d.xids[seq % kXidRing] = XidRecord{seq, xid, RealtimeNs(), gi_id, ci_id};
    __atomic_add_fetch(&header_->xid_futex, 1, __ATOMIC_SEQ_CST);
  }
  Futex(&header_->xid_futex, FUTEX_WAKE, INT32_MAX, nullptr);
}

uint64_t SharedState::LatestXidSeq(int dev) {
  Lock lock(header_);
  return header_->devices[dev].xid_seq;
}

bool SharedState::NextXid(int dev, uint64_t after_seq, XidRecord* out) {
  Lock lock(header_);
  const SharedDevice& d = header_->devices[dev];
  if (d.xid_seq <= after_seq) return false;
  uint64_t first = d.xid_seq > kXidRing ? d.xid_seq - kXidRing + 1 : 1;
  uint64_t seq = std::max(after_seq + 1, first);
  *out = d.xids[seq % kXidRing];
  return true;
}

uint32_t SharedState::XidGeneration() const {
  return __atomic_load_n(&header_->xid_futex, __ATOMIC_SEQ_CST);
}

void SharedState::WaitXidChange(uint32_t seen, uint64_t deadline_monotonic_ns) const {
  for (;;) {
    if (XidGeneration() != seen) return;
    uint64_t now = MonotonicNs();
    if (now >= deadline_monotonic_ns) return;
    uint64_t left = deadline_monotonic_ns - now;
    timespec ts{static_cast<time_t>(left / 1000000000ull), static_cast<long>(left % 1000000000ull)};
    Futex(&header_->xid_futex, FUTEX_WAIT, seen, &ts);
  }
}

MigDeviceState SharedState::MigSnapshot(int dev) {
  Lock lock(header_);
  return header_->devices[dev].mig;
}

nvmlReturn_t SharedState::UpdateMig(int dev, const MigUpdate& fn) {
  Lock lock(header_);
  ReclaimDeadLocked();
  bool busy = false;
  for (const SharedProcess& p : header_->procs) {
    if (p.pid != 0 && (p.mem[dev] != 0 || p.contexts[dev] != 0)) busy = true;
  }
  return fn(header_->devices[dev].mig, busy);
}

uint64_t SharedState::MigUuidSeed(int dev) const {
  uint64_t h = 0xcbf29ce484222325ull;  // FNV-1a over the device UUID and the file's birth time
  for (const char* c = header_->devices[dev].info.uuid; *c != '\0'; ++c) {
    h = (h ^ static_cast<unsigned char>(*c)) * 0x100000001b3ull;
  }
  return (h ^ header_->created_realtime_ns) * 0x100000001b3ull;
}

std::string StatePathFromEnv() {
  const char* env = getenv("HAMI_SIM_STATE");
  if (env != nullptr && env[0] != '\0') return env;
  return "/tmp/hami-sim/state";
}

}  // namespace hami::sim
