// What the Volcano end-to-end tests share: where Volcano's binaries are, the simulated GPUs'
// UUIDs, the queue of document 004, what `hamictl smi --json` printed in a container, the logs
// to show when a test fails, and the one world a test binary's suite runs on (VolcanoSuite).
// Header-only, for tests that define HAMI_VOLCANO_BIN, HAMI_BUILD_DIR and HAMI_KUBE_BIN.
#pragma once

#include <gtest/gtest.h>

#include <cstdlib>
#include <fstream>
#include <initializer_list>
#include <iostream>
#include <iterator>
#include <string>
#include <utility>
#include <vector>

#include "k8s/object.h"
#include "sim/world/manifests.h"
#include "sim/world/volcano_examples.h"
#include "sim/world/world.h"
#include "tests/kube_bin.h"

namespace hami::e2e::volcano {

inline const k8s::Resource kQueues{"scheduling.volcano.sh/v1beta1", "queues", false};

// scripts/volcano-tools.sh's folder: $HAMI_VOLCANO_BIN when set, else the build's.
inline std::string BinDir() {
  const char* env = std::getenv("HAMI_VOLCANO_BIN");
  return env != nullptr && *env != '\0' ? env : HAMI_VOLCANO_BIN;
}

// "GPU-0000000<tag>-0000-4000-8000-00000000000<i>" (`tag` a hex digit, one per node).
inline std::string Uuid(char tag, int i) {
  return "GPU-0000000" + std::string(1, tag) + "-0000-4000-8000-00000000000" + std::to_string(i);
}

// `count` simulated GPUs named `model` with `memory` each, their UUIDs Uuid(tag, i).
inline std::string GpuConfig(const std::string& model, const std::string& memory, int count,
                             char tag) {
  std::string out;
  for (int i = 0; i < count; ++i) {
    out += "[device]\nname = " + model + "\nuuid = " + Uuid(tag, i) + "\nmemory = " + memory + "\n";
  }
  return out;
}

// Document 004's queue `training`.
inline k8s::Object TrainingQueue() {
  return sim::YamlToJson(sim::volcano_examples::kTrainingQueue).value();
}

// What `hamictl smi --json` printed in the container (an expectation fails when it is not that).
inline k8s::Object Smi(sim::World& world, const std::string& pod, const std::string& container) {
  std::string log = world.Logs("default", pod, container).value_or("");
  k8s::Object smi = k8s::Object::parse(log, nullptr, false);
  EXPECT_TRUE(smi.is_object() && smi.contains("devices")) << pod << ": " << log;
  return smi.is_object() ? smi : k8s::Object::object();
}

// The last 3000 bytes of each process's log and of vc-scheduler's, on stderr.
inline void DumpLogs(sim::World& world, std::initializer_list<const char*> processes) {
  auto dump = [](const std::string& name, const std::string& path) {
    std::ifstream in(path);
    std::string log((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    std::cerr << "---- " << name << " (last 3000 bytes)\n"
              << (log.size() > 3000 ? log.substr(log.size() - 3000) : log) << "\n";
  };
  for (const char* p : processes) dump(p, world.LogFile(p));
  if (sim::LoggedProcess* s = world.real_control_plane()->Process("vc-scheduler")) {
    dump("vc-scheduler", s->log());
  }
}

// The fixture base of a Volcano suite: one world per test binary, with the real control plane
// and vc-scheduler beside it. A derived fixture's SetUpTestSuite calls StartWorld with its nodes
// and scheduler configuration; without both tool builds its tests skip, and a world that failed
// to start fails each of them with the reason.
class VolcanoSuite : public ::testing::Test {
 protected:
  static void StartWorld(std::vector<sim::WorldNode> nodes, const char* scheduler_conf) {
    volcano_bin_ = BinDir();
    if (volcano_bin_.empty() || kube_pin::BinDir().empty()) return;
    sim::WorldOptions o;
    o.build_dir = HAMI_BUILD_DIR;
    o.control_plane = sim::ControlPlaneKind::kReal;
    o.kube_bin_dir = kube_pin::BinDir();
    o.register_interval = "2s";  // what a plugin publishes shows fast
    o.nodes = std::move(nodes);
    Result<std::unique_ptr<sim::World>> w = sim::World::Start(o);
    if (!w.ok()) {
      start_error_ = w.status().ToString();
      return;
    }
    world_ = w->release();
    Status v = world_->real_control_plane()->StartVolcano(volcano_bin_, scheduler_conf);
    if (!v.ok()) start_error_ = "Volcano: " + v.ToString();
  }
  static void TearDownTestSuite() {
    delete world_;
    world_ = nullptr;
    start_error_.clear();
  }
  void SetUp() override {
    if (world_ == nullptr && start_error_.empty()) {
      GTEST_SKIP() << "needs both scripts/kube-tools.sh and scripts/volcano-tools.sh builds";
    }
    ASSERT_TRUE(start_error_.empty()) << start_error_;
  }
  // For TearDown: the ends of `processes`' logs (and vc-scheduler's) when the test failed.
  void DumpLogsOnFailure(std::initializer_list<const char*> processes) {
    if (HasFailure() && world_ != nullptr) DumpLogs(*world_, processes);
  }

  static k8s::RestClient& Client() { return world_->client(); }

  inline static sim::World* world_ = nullptr;
  inline static std::string start_error_;
  inline static std::string volcano_bin_;  // scripts/volcano-tools.sh's folder
};

}  // namespace hami::e2e::volcano
