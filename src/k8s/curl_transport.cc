#include "k8s/curl_transport.h"

// libcurl is loaded at run time, on the first transport: only clients behind a proxy use it, and
// linking it would map libcurl and its dozen dependencies (GnuTLS, Kerberos, LDAP, ...) into every
// process, several MiB of resident memory for node agents that never need them.
#define CURL_DISABLE_TYPECHECK
#include <curl/curl.h>
#include <dlfcn.h>

#include <algorithm>
#include <cctype>
#include <mutex>
#include <vector>

#include "common/thread_annotations.h"

namespace hami::k8s {

namespace {

// The libcurl entry points this file uses.
struct CurlApi {
  decltype(&::curl_global_init) global_init = nullptr;
  decltype(&::curl_easy_init) easy_init = nullptr;
  decltype(&::curl_easy_reset) easy_reset = nullptr;
  decltype(&::curl_easy_cleanup) easy_cleanup = nullptr;
  decltype(&::curl_easy_setopt) easy_setopt = nullptr;
  decltype(&::curl_easy_getinfo) easy_getinfo = nullptr;
  decltype(&::curl_easy_perform) easy_perform = nullptr;
  decltype(&::curl_easy_strerror) easy_strerror = nullptr;
  decltype(&::curl_slist_append) slist_append = nullptr;
  decltype(&::curl_slist_free_all) slist_free_all = nullptr;
  std::string error;  // why it could not be loaded ("" when it was)
};

template <typename Fn>
bool Sym(void* h, const char* name, Fn* out) {
  *out = reinterpret_cast<Fn>(dlsym(h, name));
  return *out != nullptr;
}

const CurlApi& Curl() {
  static const CurlApi api = [] {
    CurlApi a;
    void* h = dlopen("libcurl.so.4", RTLD_NOW | RTLD_LOCAL);
    if (h == nullptr) {
      const char* why = dlerror();
      a.error = std::string(
                    "libcurl.so.4 (needed to reach the API server through a proxy) "
                    "cannot be loaded: ") +
                (why ? why : "unknown");
      return a;
    }
    bool ok = Sym(h, "curl_global_init", &a.global_init) &&
              Sym(h, "curl_easy_init", &a.easy_init) && Sym(h, "curl_easy_reset", &a.easy_reset) &&
              Sym(h, "curl_easy_cleanup", &a.easy_cleanup) &&
              Sym(h, "curl_easy_setopt", &a.easy_setopt) &&
              Sym(h, "curl_easy_getinfo", &a.easy_getinfo) &&
              Sym(h, "curl_easy_perform", &a.easy_perform) &&
              Sym(h, "curl_easy_strerror", &a.easy_strerror) &&
              Sym(h, "curl_slist_append", &a.slist_append) &&
              Sym(h, "curl_slist_free_all", &a.slist_free_all);
    if (!ok) {
      a.error = "libcurl.so.4 lacks an entry point the API client needs";
      return a;
    }
    a.global_init(CURL_GLOBAL_DEFAULT);
    return a;
  }();
  return api;
}

// The rest of this file calls libcurl by its own names (curl.h may define two of them as
// argument-checking macros).
#undef curl_easy_setopt
#undef curl_easy_getinfo
#define curl_easy_init Curl().easy_init
#define curl_easy_reset Curl().easy_reset
#define curl_easy_cleanup Curl().easy_cleanup
#define curl_easy_setopt Curl().easy_setopt
#define curl_easy_getinfo Curl().easy_getinfo
#define curl_easy_perform Curl().easy_perform
#define curl_easy_strerror Curl().easy_strerror
#define curl_slist_append Curl().slist_append
#define curl_slist_free_all Curl().slist_free_all

struct Exchange {
  const HttpRequest* request = nullptr;
  HttpResponse* response = nullptr;
  CURL* easy = nullptr;
  bool decided = false;
  bool streaming = false;
  bool stopped_by_caller = false;
};

size_t OnHeader(char* data, size_t size, size_t n, void* user) {
  auto* ex = static_cast<Exchange*>(user);
  std::string_view line(data, size * n);
  if (line.rfind("HTTP/", 0) == 0) {
    ex->response->headers.clear();  // a new response (after 100-continue or a redirect)
    return size * n;
  }
  size_t colon = line.find(':');
  if (colon != std::string_view::npos) {
    std::string name(line.substr(0, colon));
    std::transform(name.begin(), name.end(), name.begin(),
                   [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
    std::string_view value = line.substr(colon + 1);
    while (!value.empty() && (value.front() == ' ' || value.front() == '\t'))
      value.remove_prefix(1);
    while (!value.empty() &&
           (value.back() == '\r' || value.back() == '\n' || value.back() == ' ')) {
      value.remove_suffix(1);
    }
    ex->response->headers.emplace_back(std::move(name), std::string(value));
  }
  return size * n;
}

size_t OnBody(char* data, size_t size, size_t n, void* user) {
  auto* ex = static_cast<Exchange*>(user);
  size_t len = size * n;
  if (!ex->decided) {
    long code = 0;
    curl_easy_getinfo(ex->easy, CURLINFO_RESPONSE_CODE, &code);
    ex->decided = true;
    ex->streaming = ex->request->on_body && code >= 200 && code < 300;
  }
  if (ex->streaming) {
    if (!ex->request->on_body(std::string_view(data, len))) {
      ex->stopped_by_caller = true;
      return 0;  // aborts the transfer with CURLE_WRITE_ERROR
    }
    return len;
  }
  ex->response->body.append(data, len);
  return len;
}

int OnProgress(void* user, curl_off_t, curl_off_t, curl_off_t, curl_off_t) {
  auto* ex = static_cast<Exchange*>(user);
  return ex->request->cancel != nullptr && ex->request->cancel->cancelled() ? 1 : 0;
}

Status MapCurlError(CURLcode rc, const char* errbuf) {
  std::string msg = std::string(curl_easy_strerror(rc));
  if (errbuf[0] != '\0') msg += ": " + std::string(errbuf);
  switch (rc) {
    case CURLE_COULDNT_RESOLVE_HOST:
    case CURLE_COULDNT_RESOLVE_PROXY:
    case CURLE_COULDNT_CONNECT:
    case CURLE_SSL_CONNECT_ERROR:
      return UnavailableError(msg);
    case CURLE_OPERATION_TIMEDOUT:
      return DeadlineExceededError(msg);
    case CURLE_ABORTED_BY_CALLBACK:
      return Status(StatusCode::kCancelled, msg);
    case CURLE_PEER_FAILED_VERIFICATION:
    case CURLE_SSL_CERTPROBLEM:
    case CURLE_SSL_CIPHER:
    case CURLE_SSL_CACERT_BADFILE:
    case CURLE_URL_MALFORMAT:
    case CURLE_UNSUPPORTED_PROTOCOL:
      return FailedPreconditionError(msg);
    default:
      return Status(StatusCode::kUnknown, msg);
  }
}

}  // namespace

struct CurlTransport::Pool {
  Mutex mu;
  std::vector<CURL*> idle GUARDED_BY(mu);

  CURL* Borrow() {
    {
      MutexLock lock(mu);
      if (!idle.empty()) {
        CURL* h = idle.back();
        idle.pop_back();
        return h;
      }
    }
    return curl_easy_init();
  }
  void Return(CURL* h) {
    curl_easy_reset(h);  // keeps live connections and caches
    MutexLock lock(mu);
    idle.push_back(h);
  }
  ~Pool() {
    for (CURL* h : idle) curl_easy_cleanup(h);
  }
};

Result<std::unique_ptr<CurlTransport>> CurlTransport::Create(CurlOptions options) {
  if (!options.tls.server_name.empty()) {
    return UnimplementedError("tls-server-name is not supported by the curl transport");
  }
  if (options.tls.client_cert_pem.empty() != options.tls.client_key_pem.empty()) {
    return InvalidArgumentError("client certificate and key must be given together");
  }
  if (!Curl().error.empty()) return Status(StatusCode::kUnavailable, Curl().error);
  return std::unique_ptr<CurlTransport>(new CurlTransport(std::move(options)));
}

CurlTransport::CurlTransport(CurlOptions options)
    : options_(std::move(options)), pool_(std::make_unique<Pool>()) {}

CurlTransport::~CurlTransport() = default;

Result<HttpResponse> CurlTransport::Do(const HttpRequest& request) {
  CURL* easy = pool_->Borrow();
  if (easy == nullptr) return InternalError("curl_easy_init failed");
  HttpResponse response;
  Exchange ex;
  ex.request = &request;
  ex.response = &response;
  ex.easy = easy;
  char errbuf[CURL_ERROR_SIZE] = {0};

  curl_easy_setopt(easy, CURLOPT_URL, request.url.c_str());
  curl_easy_setopt(easy, CURLOPT_NOSIGNAL, 1L);
  curl_easy_setopt(easy, CURLOPT_ERRORBUFFER, errbuf);
  curl_easy_setopt(easy, CURLOPT_TCP_KEEPALIVE, 1L);
  curl_easy_setopt(easy, CURLOPT_CONNECTTIMEOUT_MS,
                   static_cast<long>(options_.connect_timeout.count()));
  if (request.timeout.count() > 0) {
    curl_easy_setopt(easy, CURLOPT_TIMEOUT_MS, static_cast<long>(request.timeout.count()));
  }
  if (request.method == "GET") {
    curl_easy_setopt(easy, CURLOPT_HTTPGET, 1L);
  } else if (request.method == "HEAD") {
    curl_easy_setopt(easy, CURLOPT_NOBODY, 1L);
  } else {
    curl_easy_setopt(easy, CURLOPT_CUSTOMREQUEST, request.method.c_str());
    if (!request.body.empty() || request.method != "DELETE") {
      curl_easy_setopt(easy, CURLOPT_POSTFIELDS, request.body.data());
      curl_easy_setopt(easy, CURLOPT_POSTFIELDSIZE_LARGE,
                       static_cast<curl_off_t>(request.body.size()));
    }
  }
  curl_slist* headers = nullptr;
  for (const auto& [k, v] : request.headers) {
    headers = curl_slist_append(headers, (k + ": " + v).c_str());
  }
  headers = curl_slist_append(headers, "Expect:");
  curl_easy_setopt(easy, CURLOPT_HTTPHEADER, headers);

  curl_blob ca{}, cert{}, key{};
  if (!options_.tls.ca_pem.empty()) {
    ca = {const_cast<char*>(options_.tls.ca_pem.data()), options_.tls.ca_pem.size(),
          CURL_BLOB_NOCOPY};
    curl_easy_setopt(easy, CURLOPT_CAINFO_BLOB, &ca);
  }
  if (!options_.tls.client_cert_pem.empty()) {
    cert = {const_cast<char*>(options_.tls.client_cert_pem.data()),
            options_.tls.client_cert_pem.size(), CURL_BLOB_NOCOPY};
    key = {const_cast<char*>(options_.tls.client_key_pem.data()),
           options_.tls.client_key_pem.size(), CURL_BLOB_NOCOPY};
    curl_easy_setopt(easy, CURLOPT_SSLCERT_BLOB, &cert);
    curl_easy_setopt(easy, CURLOPT_SSLCERTTYPE, "PEM");
    curl_easy_setopt(easy, CURLOPT_SSLKEY_BLOB, &key);
    curl_easy_setopt(easy, CURLOPT_SSLKEYTYPE, "PEM");
  }
  if (options_.tls.insecure_skip_verify) {
    curl_easy_setopt(easy, CURLOPT_SSL_VERIFYPEER, 0L);
    curl_easy_setopt(easy, CURLOPT_SSL_VERIFYHOST, 0L);
  }
  curl_easy_setopt(easy, CURLOPT_HEADERFUNCTION, &OnHeader);
  curl_easy_setopt(easy, CURLOPT_HEADERDATA, &ex);
  curl_easy_setopt(easy, CURLOPT_WRITEFUNCTION, &OnBody);
  curl_easy_setopt(easy, CURLOPT_WRITEDATA, &ex);
  if (request.cancel != nullptr) {  // the progress callback is how a watch notices Cancel
    curl_easy_setopt(easy, CURLOPT_NOPROGRESS, 0L);
    curl_easy_setopt(easy, CURLOPT_XFERINFOFUNCTION, &OnProgress);
    curl_easy_setopt(easy, CURLOPT_XFERINFODATA, &ex);
  }

  CURLcode rc = curl_easy_perform(easy);
  long code = 0;
  curl_easy_getinfo(easy, CURLINFO_RESPONSE_CODE, &code);
  curl_slist_free_all(headers);
  pool_->Return(easy);

  if (rc == CURLE_WRITE_ERROR && ex.stopped_by_caller) rc = CURLE_OK;
  if (rc != CURLE_OK) return MapCurlError(rc, errbuf);
  response.status = static_cast<int>(code);
  return response;
}

}  // namespace hami::k8s
