// Helpers shared by the simulated API server tests: a temp dir and a small JSON client over
// cpp-httplib (plain or TLS) that speaks to a running ApiServer.
//
// Thread safety: one object per thread.
#pragma once

#include <httplib.h>
#include <stdlib.h>

#include <filesystem>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "sim/apiserver/api_server.h"

namespace hami::sim::testing {

class TempDir {
 public:
  TempDir() {
    std::string tmpl = (std::filesystem::temp_directory_path() / "hami_api_XXXXXX").string();
    path_ = ::mkdtemp(tmpl.data());
  }
  ~TempDir() { std::filesystem::remove_all(path_); }
  const std::string& path() const { return path_; }
  std::string File(const std::string& name) const { return path_ + "/" + name; }

 private:
  std::string path_;
};

struct Reply {
  int status = 0;
  nlohmann::json body;  // discarded value when the body is not JSON
  std::string raw;
};

class Client {
 public:
  explicit Client(const ApiServer& server, std::string token = "") : token_(std::move(token)) {
    if (server.tls()) {
      auto tls = std::make_unique<httplib::SSLClient>("127.0.0.1", server.port());
      X509_STORE* store = X509_STORE_new();
      BIO* bio = BIO_new_mem_buf(server.ca_pem().data(), static_cast<int>(server.ca_pem().size()));
      X509* ca = PEM_read_bio_X509(bio, nullptr, nullptr, nullptr);
      BIO_free(bio);
      X509_STORE_add_cert(store, ca);
      X509_free(ca);
      tls->set_ca_cert_store(store);
      tls->enable_server_certificate_verification(true);
      cli_ = std::move(tls);
    } else {
      cli_ = std::make_unique<httplib::ClientImpl>("127.0.0.1", server.port());
    }
    cli_->set_read_timeout(20);
  }

  Reply Do(const std::string& method, const std::string& path, const std::string& body = "",
           const std::string& content_type = "application/json", httplib::Headers headers = {}) {
    if (!token_.empty()) headers.emplace("Authorization", "Bearer " + token_);
    auto send = [&]() -> httplib::Result {
      if (method == "GET") return cli_->Get(path, headers);
      if (method == "POST") return cli_->Post(path, headers, body, content_type);
      if (method == "PUT") return cli_->Put(path, headers, body, content_type);
      if (method == "PATCH") return cli_->Patch(path, headers, body, content_type);
      return cli_->Delete(path, headers, body, content_type);
    };
    httplib::Result r = send();
    Reply out;
    if (!r) {
      out.raw = "transport error: " + httplib::to_string(r.error());
      return out;
    }
    out.status = r->status;
    out.raw = r->body;
    out.body = nlohmann::json::parse(r->body, nullptr, false);
    return out;
  }
  Reply Get(const std::string& path) { return Do("GET", path); }
  Reply Post(const std::string& path, const nlohmann::json& body) {
    return Do("POST", path, body.dump());
  }
  Reply Put(const std::string& path, const nlohmann::json& body) {
    return Do("PUT", path, body.dump());
  }
  Reply Patch(const std::string& path, const std::string& body, const std::string& type) {
    return Do("PATCH", path, body, type);
  }
  Reply Delete(const std::string& path) { return Do("DELETE", path); }

  // Opens a watch and returns its first `n` events (fewer if the stream ends first).
  std::vector<nlohmann::json> Watch(const std::string& path, size_t n, int* status = nullptr) {
    std::vector<nlohmann::json> events;
    std::string buffer;
    httplib::Headers headers;
    if (!token_.empty()) headers.emplace("Authorization", "Bearer " + token_);
    auto r = cli_->Get(path, headers, [&](const char* data, size_t len) {
      buffer.append(data, len);
      size_t nl;
      while ((nl = buffer.find('\n')) != std::string::npos) {
        events.push_back(nlohmann::json::parse(buffer.substr(0, nl), nullptr, false));
        buffer.erase(0, nl + 1);
      }
      return events.size() < n;
    });
    if (status) *status = r ? r->status : 0;
    if (r && r->status != 200 && events.empty()) {
      events.push_back(nlohmann::json::parse(buffer, nullptr, false));
    }
    return events;
  }

 private:
  std::string token_;
  std::unique_ptr<httplib::ClientImpl> cli_;
};

inline nlohmann::json PodJson(const std::string& name,
                              nlohmann::json labels = nlohmann::json::object()) {
  return {{"apiVersion", "v1"},
          {"kind", "Pod"},
          {"metadata", {{"name", name}, {"labels", labels}}},
          {"spec", {{"containers", {{{"name", "c"}, {"image", "busybox"}}}}}}};
}

}  // namespace hami::sim::testing
