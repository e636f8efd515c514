#include "net/tls.h"

#include <fcntl.h>
#include <openssl/bio.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/ssl.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>
#include <sys/stat.h>
#include <unistd.h>

#include <fstream>
#include <mutex>
#include <sstream>

namespace hami::net {
namespace {

std::string OpenSslError() {
  unsigned long e = ERR_get_error();  // NOLINT(runtime/int)
  if (e == 0) return "unknown OpenSSL error";
  char buf[256];
  ERR_error_string_n(e, buf, sizeof buf);
  ERR_clear_error();
  return buf;
}

struct BioDeleter {
  void operator()(BIO* b) const { BIO_free(b); }
};
using BioPtr = std::unique_ptr<BIO, BioDeleter>;

std::string BioToString(BIO* bio) {
  char* data = nullptr;
  long n = BIO_get_mem_data(bio, &data);  // NOLINT(runtime/int)
  return std::string(data, static_cast<size_t>(n));
}

Result<std::string> ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return NotFoundError("cannot open " + path);
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// Identity of a file's current contents, cheap to compare on every handshake.
struct FileStamp {
  ino_t ino = 0;
  off_t size = -1;
  timespec mtime{};
  bool operator==(const FileStamp& o) const {
    return ino == o.ino && size == o.size && mtime.tv_sec == o.mtime.tv_sec &&
           mtime.tv_nsec == o.mtime.tv_nsec;
  }
};

FileStamp Stamp(const std::string& path) {
  struct stat st {};
  FileStamp s;
  if (::stat(path.c_str(), &st) == 0) {
    s.ino = st.st_ino;
    s.size = st.st_size;
    s.mtime = st.st_mtim;
  }
  return s;
}

// One parsed certificate chain + key. Owns its OpenSSL objects.
struct KeyPair {
  X509* leaf = nullptr;
  STACK_OF(X509) * chain = nullptr;
  EVP_PKEY* key = nullptr;
  KeyPair() = default;
  KeyPair(const KeyPair&) = delete;
  KeyPair& operator=(const KeyPair&) = delete;
  ~KeyPair() {
    X509_free(leaf);
    if (chain) sk_X509_pop_free(chain, X509_free);
    EVP_PKEY_free(key);
  }
};

Result<std::shared_ptr<KeyPair>> ParsePair(const CertificatePem& pem) {
  auto pair = std::make_shared<KeyPair>();
  BioPtr cert_bio(BIO_new_mem_buf(pem.cert_pem.data(), static_cast<int>(pem.cert_pem.size())));
  pair->leaf = PEM_read_bio_X509(cert_bio.get(), nullptr, nullptr, nullptr);
  if (!pair->leaf) return InvalidArgumentError("certificate PEM: " + OpenSslError());
  pair->chain = sk_X509_new_null();
  while (X509* extra = PEM_read_bio_X509(cert_bio.get(), nullptr, nullptr, nullptr)) {
    sk_X509_push(pair->chain, extra);
  }
  ERR_clear_error();  // the loop above ends on a "no start line" error
  BioPtr key_bio(BIO_new_mem_buf(pem.key_pem.data(), static_cast<int>(pem.key_pem.size())));
  pair->key = PEM_read_bio_PrivateKey(key_bio.get(), nullptr, nullptr, nullptr);
  if (!pair->key) return InvalidArgumentError("private key PEM: " + OpenSslError());
  if (X509_check_private_key(pair->leaf, pair->key) != 1) {
    ERR_clear_error();
    return InvalidArgumentError("private key does not match the certificate");
  }
  return pair;
}

}  // namespace

struct CertificateSource::Impl {
  std::string cert_file, key_file;  // empty for a fixed pair
  mutable std::mutex mu;
  FileStamp cert_stamp, key_stamp;  // guarded by mu
  std::shared_ptr<KeyPair> pair;    // guarded by mu
  int generation = 0;               // guarded by mu
};

CertificateSource::CertificateSource(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
CertificateSource::~CertificateSource() = default;

Result<std::shared_ptr<CertificateSource>> CertificateSource::FromFiles(std::string cert_file,
                                                                        std::string key_file) {
  auto impl = std::make_unique<Impl>();
  impl->cert_file = std::move(cert_file);
  impl->key_file = std::move(key_file);
  std::shared_ptr<CertificateSource> src(new CertificateSource(std::move(impl)));
  HAMI_RETURN_IF_ERROR(src->ReloadIfChanged());
  return src;
}

Result<std::shared_ptr<CertificateSource>> CertificateSource::FromPem(const CertificatePem& pem) {
  HAMI_ASSIGN_OR_RETURN(std::shared_ptr<KeyPair> pair, ParsePair(pem));
  auto impl = std::make_unique<Impl>();
  impl->pair = std::move(pair);
  impl->generation = 1;
  return std::shared_ptr<CertificateSource>(new CertificateSource(std::move(impl)));
}

Status CertificateSource::ReloadIfChanged() {
  if (impl_->cert_file.empty()) return OkStatus();
  FileStamp cs = Stamp(impl_->cert_file), ks = Stamp(impl_->key_file);
  {
    std::lock_guard<std::mutex> lock(impl_->mu);
    if (impl_->pair && cs == impl_->cert_stamp && ks == impl_->key_stamp) return OkStatus();
  }
  CertificatePem pem;
  HAMI_ASSIGN_OR_RETURN(pem.cert_pem, ReadFile(impl_->cert_file));
  HAMI_ASSIGN_OR_RETURN(pem.key_pem, ReadFile(impl_->key_file));
  Result<std::shared_ptr<KeyPair>> pair = ParsePair(pem);
  std::lock_guard<std::mutex> lock(impl_->mu);
  // Remember the stamps even on failure so a half-written rotation is not re-parsed on every
  // handshake; the next change to either file triggers another attempt.
  impl_->cert_stamp = cs;
  impl_->key_stamp = ks;
  if (!pair.ok()) return pair.status().WithContext(impl_->cert_file);
  impl_->pair = std::move(pair).value();
  ++impl_->generation;
  return OkStatus();
}

int CertificateSource::generation() const {
  std::lock_guard<std::mutex> lock(impl_->mu);
  return impl_->generation;
}

bool CertificateSource::InstallOn(void* ssl_ptr) {
  (void)ReloadIfChanged();  // a failed rotation keeps serving the previous pair
  std::shared_ptr<KeyPair> pair;
  {
    std::lock_guard<std::mutex> lock(impl_->mu);
    pair = impl_->pair;
  }
  if (!pair) return false;
  SSL* ssl = static_cast<SSL*>(ssl_ptr);
  return SSL_use_cert_and_key(ssl, pair->leaf, pair->key, pair->chain, /*override=*/1) == 1;
}

Result<CertificatePem> GenerateSelfSignedCertificate(const std::string& common_name,
                                                     const std::vector<std::string>& dns_names,
                                                     const std::vector<std::string>& ip_addresses,
                                                     int days) {
  std::unique_ptr<EVP_PKEY, decltype(&EVP_PKEY_free)> key(EVP_EC_gen("P-256"), EVP_PKEY_free);
  if (!key) return InternalError("EC key generation: " + OpenSslError());
  std::unique_ptr<X509, decltype(&X509_free)> x509(X509_new(), X509_free);
  X509_set_version(x509.get(), 2);
  unsigned char serial[16];
  std::ifstream urandom("/dev/urandom", std::ios::binary);
  urandom.read(reinterpret_cast<char*>(serial), sizeof serial);
  serial[0] &= 0x7f;
  BIGNUM* bn = BN_bin2bn(serial, sizeof serial, nullptr);
  BN_to_ASN1_INTEGER(bn, X509_get_serialNumber(x509.get()));
  BN_free(bn);
  X509_gmtime_adj(X509_getm_notBefore(x509.get()), -3600);
  X509_gmtime_adj(X509_getm_notAfter(x509.get()), static_cast<long>(days) * 86400);  // NOLINT
  X509_set_pubkey(x509.get(), key.get());
  X509_NAME* name = X509_get_subject_name(x509.get());
  X509_NAME_add_entry_by_txt(name, "CN", MBSTRING_ASC,
                             reinterpret_cast<const unsigned char*>(common_name.c_str()), -1, -1,
                             0);
  X509_set_issuer_name(x509.get(), name);
  std::string san;
  for (const auto& d : dns_names) san += (san.empty() ? "" : ",") + std::string("DNS:") + d;
  for (const auto& ip : ip_addresses) san += (san.empty() ? "" : ",") + std::string("IP:") + ip;
  X509V3_CTX ctx;
  X509V3_set_ctx_nodb(&ctx);
  X509V3_set_ctx(&ctx, x509.get(), x509.get(), nullptr, nullptr, 0);
  std::vector<std::pair<int, std::string>> exts = {
      {NID_basic_constraints, "critical,CA:TRUE"},
      {NID_key_usage, "critical,digitalSignature,keyEncipherment,keyCertSign"},
      {NID_ext_key_usage, "serverAuth,clientAuth"},
  };
  if (!san.empty()) exts.push_back({NID_subject_alt_name, san});
  for (const auto& [nid, value] : exts) {
    X509_EXTENSION* ext = X509V3_EXT_conf_nid(nullptr, &ctx, nid, value.c_str());
    if (!ext)
      return InvalidArgumentError("certificate extension '" + value + "': " + OpenSslError());
    X509_add_ext(x509.get(), ext, -1);
    X509_EXTENSION_free(ext);
  }
  if (X509_sign(x509.get(), key.get(), EVP_sha256()) == 0) {
    return InternalError("certificate signing: " + OpenSslError());
  }
  CertificatePem out;
  BioPtr cert_bio(BIO_new(BIO_s_mem()));
  PEM_write_bio_X509(cert_bio.get(), x509.get());
  out.cert_pem = BioToString(cert_bio.get());
  BioPtr key_bio(BIO_new(BIO_s_mem()));
  PEM_write_bio_PrivateKey(key_bio.get(), key.get(), nullptr, nullptr, 0, nullptr, nullptr);
  out.key_pem = BioToString(key_bio.get());
  return out;
}

Status WriteFileAtomically(const std::string& path, const std::string& text) {
  std::string tmp = path + ".tmp." + std::to_string(::getpid());
  int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  if (fd < 0) return UnavailableError("cannot create " + tmp);
  size_t off = 0;
  while (off < text.size()) {
    ssize_t n = ::write(fd, text.data() + off, text.size() - off);
    if (n <= 0) {
      ::close(fd);
      ::unlink(tmp.c_str());
      return UnavailableError("cannot write " + tmp);
    }
    off += static_cast<size_t>(n);
  }
  ::close(fd);
  if (::rename(tmp.c_str(), path.c_str()) != 0) {
    ::unlink(tmp.c_str());
    return UnavailableError("cannot rename " + tmp + " to " + path);
  }
  return OkStatus();
}

}  // namespace hami::net
