// What the Volcano end-to-end tests share: where Volcano's binaries are, the simulated GPUs'
// UUIDs, the queue of document 004, what `hamictl smi --json` printed in a container, and the
// logs to show when a test fails. Header-only, for tests that define HAMI_VOLCANO_BIN.
#pragma once

#include <gtest/gtest.h>

#include <cstdlib>
#include <fstream>
#include <initializer_list>
#include <iostream>
#include <iterator>
#include <string>

#include "k8s/object.h"
#include "sim/world/world.h"

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
  return {{"apiVersion", "scheduling.volcano.sh/v1beta1"},
          {"kind", "Queue"},
          {"metadata", {{"name", "training"}}},
          {"spec", {{"weight", 1}, {"reclaimable", true}}}};
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

}  // namespace hami::e2e::volcano
