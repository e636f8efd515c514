// Helpers shared by the hami_k8s unit tests: a temporary directory and a client on a fake
// transport and a fake clock.
//
// Thread safety: test-only; each test owns its helpers.
#pragma once

#include <gtest/gtest.h>
#include <stdlib.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <optional>
#include <string>

#include "common/clock.h"
#include "k8s/fake_transport.h"
#include "k8s/object.h"
#include "k8s/rest_client.h"

namespace hami::k8s::testing {

class TempDir {
 public:
  TempDir() {
    std::string tmpl = ::testing::TempDir() + "/k8s_test_XXXXXX";
    char* p = mkdtemp(tmpl.data());
    EXPECT_NE(p, nullptr);
    path_ = tmpl;
  }
  ~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  const std::string& path() const { return path_; }
  std::string Write(const std::string& name, const std::string& content) const {
    std::string p = path_ + "/" + name;
    std::ofstream(p, std::ios::binary) << content;
    return p;
  }

 private:
  std::string path_;
};

// A RestClient wired to a FakeTransport (owned by the client; `fake` points at it).
struct FakeClient {
  explicit FakeClient(RestConfig cfg = DefaultConfig(), RetryPolicy retry = {}) {
    auto t = std::make_unique<FakeTransport>();
    fake = t.get();
    client = std::make_unique<RestClient>(std::move(cfg), std::move(t), clock, retry);
  }
  static RestConfig DefaultConfig() {
    RestConfig cfg;
    cfg.server = "https://api.test:6443";
    cfg.qps = 0;  // unlimited unless a test asks
    return cfg;
  }
  FakeClock clock;
  FakeTransport* fake = nullptr;
  std::unique_ptr<RestClient> client;
};

inline std::string Header(const HttpRequest& r, const std::string& name) {
  for (const auto& [k, v] : r.headers) {
    if (k == name) return v;
  }
  return "";
}

}  // namespace hami::k8s::testing
