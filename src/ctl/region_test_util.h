// Test helper: a real region file in a fresh temp dir, with slots the tests fill by hand.
//
// Thread safety: one TestRegion per test.
#pragma once

#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <string>

#include "ctl/region_ops.h"
#include "vgpu/region.h"

namespace hami::ctl::testing {

class TestRegion {
 public:
  explicit TestRegion(const vgpu::RegionInit& init) {
    char tmpl[] = "/tmp/hamictl-region-test-XXXXXX";
    if (mkdtemp(tmpl) == nullptr) return;
    dir_ = tmpl;
    path_ = dir_ + "/vgpu.cache";
    char err[256] = {};
    region_.reset(vgpu::Region::Open(path_.c_str(), init, err, sizeof(err)));
    error_ = err;
  }
  ~TestRegion() {
    region_.reset();
    if (!dir_.empty()) std::filesystem::remove_all(dir_);
  }
  TestRegion(const TestRegion&) = delete;
  TestRegion& operator=(const TestRegion&) = delete;

  vgpu::Region* get() { return region_.get(); }
  vgpu::RegionHeader* header() { return region_->header(); }
  const std::string& path() const { return path_; }
  const std::string& dir() const { return dir_; }
  const std::string& error() const { return error_; }

  // Writes a slot by hand, as a process that registered and then exited would have left it.
  void FakeSlot(int slot, int pid, uint64_t start_time, int dev, uint64_t used) {
    vgpu::RegionSlot& s = header()->slots[slot];
    s.start_time = start_time;
    s.status.store(vgpu::kSlotRunning);
    s.used[dev].store(used);
    s.used_by_kind[dev][static_cast<int>(vgpu::MemKind::kData)].store(used);
    s.pid.store(pid);
    header()->slot_pid[slot].store(pid);
    header()->proc_count.fetch_add(1);
  }

 private:
  std::string dir_;
  std::string path_;
  std::string error_;
  RegionPtr region_;
};

// The pid of a process that has exited and been reaped.
inline int DeadPid() {
  pid_t pid = fork();
  if (pid == 0) _exit(0);
  int status = 0;
  waitpid(pid, &status, 0);
  return static_cast<int>(pid);
}

}  // namespace hami::ctl::testing
