#include "net/tls.h"

#include <arpa/inet.h>
#include <openssl/bio.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/rand.h>
#include <openssl/ssl.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>
#include <sys/stat.h>

#include <ctime>
#include <mutex>

#include "common/file_util.h"
#include "common/thread_annotations.h"

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
  Impl() = default;
  // A fixed pair (FromPem), served from the start.
  explicit Impl(std::shared_ptr<KeyPair> fixed) : pair(std::move(fixed)), generation(1) {}

  std::string cert_file, key_file;  // empty for a fixed pair
  mutable Mutex mu;
  FileStamp cert_stamp GUARDED_BY(mu);
  FileStamp key_stamp GUARDED_BY(mu);
  std::shared_ptr<KeyPair> pair GUARDED_BY(mu);
  int generation GUARDED_BY(mu) = 0;
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
  auto impl = std::make_unique<Impl>(std::move(pair));
  return std::shared_ptr<CertificateSource>(new CertificateSource(std::move(impl)));
}

Status CertificateSource::ReloadIfChanged() {
  if (impl_->cert_file.empty()) return OkStatus();
  FileStamp cs = Stamp(impl_->cert_file), ks = Stamp(impl_->key_file);
  {
    MutexLock lock(impl_->mu);
    if (impl_->pair && cs == impl_->cert_stamp && ks == impl_->key_stamp) return OkStatus();
  }
  CertificatePem pem;
  HAMI_ASSIGN_OR_RETURN(pem.cert_pem, ReadFileToString(impl_->cert_file));
  HAMI_ASSIGN_OR_RETURN(pem.key_pem, ReadFileToString(impl_->key_file));
  Result<std::shared_ptr<KeyPair>> pair = ParsePair(pem);
  MutexLock lock(impl_->mu);
  // Remember the stamps even on failure so a half-written rotation is not re-parsed on every
  // handshake; the next change to either file triggers another attempt.
  impl_->cert_stamp = cs;
  impl_->key_stamp = ks;
  if (!pair.ok()) return pair.status().WithContext(impl_->cert_file);
  impl_->pair = std::move(pair).value();
  ++impl_->generation;
  return OkStatus();
}

Status CertificateSource::Replace(const CertificatePem& pem) {
  HAMI_ASSIGN_OR_RETURN(std::shared_ptr<KeyPair> pair, ParsePair(pem));
  MutexLock lock(impl_->mu);
  impl_->pair = std::move(pair);
  ++impl_->generation;
  return OkStatus();
}

int CertificateSource::generation() const {
  MutexLock lock(impl_->mu);
  return impl_->generation;
}

bool CertificateSource::InstallOn(void* ssl_ptr) {
  (void)ReloadIfChanged();  // a failed rotation keeps serving the previous pair
  std::shared_ptr<KeyPair> pair;
  {
    MutexLock lock(impl_->mu);
    pair = impl_->pair;
  }
  if (!pair) return false;
  SSL* ssl = static_cast<SSL*>(ssl_ptr);
  return SSL_use_cert_and_key(ssl, pair->leaf, pair->key, pair->chain, /*override=*/1) == 1;
}

namespace {

using X509Ptr = std::unique_ptr<X509, decltype(&X509_free)>;
using KeyPtr = std::unique_ptr<EVP_PKEY, decltype(&EVP_PKEY_free)>;

time_t ToTimeT(CertTime t) { return std::chrono::system_clock::to_time_t(t); }

Result<CertTime> FromAsn1Time(const ASN1_TIME* t) {
  struct tm tm {};
  if (t == nullptr || ASN1_TIME_to_tm(t, &tm) != 1) {
    ERR_clear_error();
    return InvalidArgumentError("certificate has an unreadable validity time");
  }
  return std::chrono::system_clock::from_time_t(timegm(&tm));
}

Result<X509Ptr> ReadCertificate(std::string_view pem) {
  BioPtr bio(BIO_new_mem_buf(pem.data(), static_cast<int>(pem.size())));
  X509Ptr cert(PEM_read_bio_X509(bio.get(), nullptr, nullptr, nullptr), X509_free);
  if (!cert) return InvalidArgumentError("certificate PEM: " + OpenSslError());
  return cert;
}

Result<KeyPtr> ReadKey(std::string_view pem) {
  BioPtr bio(BIO_new_mem_buf(pem.data(), static_cast<int>(pem.size())));
  KeyPtr key(PEM_read_bio_PrivateKey(bio.get(), nullptr, nullptr, nullptr), EVP_PKEY_free);
  if (!key) return InvalidArgumentError("private key PEM: " + OpenSslError());
  return key;
}

// Builds, signs and encodes one certificate for `key`. `issuer`/`issuer_key` null: self-signed.
// `extensions` are OpenSSL config strings by NID, added in order (issuer-dependent ones such as
// authorityKeyIdentifier see the issuer through the X509V3 context).
Result<CertificatePem> BuildCertificate(
    const CertificateSpec& spec, EVP_PKEY* key, X509* issuer, EVP_PKEY* issuer_key,
    const std::vector<std::pair<int, std::string>>& extensions) {
  if (spec.not_after <= spec.not_before) {
    return InvalidArgumentError("certificate validity ends before it starts");
  }
  X509Ptr x509(X509_new(), X509_free);
  X509_set_version(x509.get(), 2);
  // 127 random bits, positive: serials must be unique per issuer and unpredictable.
  unsigned char serial[16];
  if (RAND_bytes(serial, sizeof serial) != 1) return InternalError("RAND_bytes: " + OpenSslError());
  serial[0] &= 0x7f;
  BIGNUM* bn = BN_bin2bn(serial, sizeof serial, nullptr);
  BN_to_ASN1_INTEGER(bn, X509_get_serialNumber(x509.get()));
  BN_free(bn);
  if (!ASN1_TIME_set(X509_getm_notBefore(x509.get()), ToTimeT(spec.not_before)) ||
      !ASN1_TIME_set(X509_getm_notAfter(x509.get()), ToTimeT(spec.not_after))) {
    return InvalidArgumentError("certificate validity out of range: " + OpenSslError());
  }
  X509_set_pubkey(x509.get(), key);
  X509_NAME* name = X509_get_subject_name(x509.get());
  X509_NAME_add_entry_by_txt(name, "CN", MBSTRING_UTF8,
                             reinterpret_cast<const unsigned char*>(spec.common_name.c_str()), -1,
                             -1, 0);
  for (const std::string& o : spec.organizations) {
    X509_NAME_add_entry_by_txt(name, "O", MBSTRING_UTF8,
                               reinterpret_cast<const unsigned char*>(o.c_str()), -1, -1, 0);
  }
  X509* signer = issuer != nullptr ? issuer : x509.get();
  X509_set_issuer_name(x509.get(), X509_get_subject_name(signer));
  std::string san;
  for (const auto& d : spec.dns_names) san += (san.empty() ? "" : ",") + std::string("DNS:") + d;
  for (const auto& ip : spec.ip_addresses) {
    san += (san.empty() ? "" : ",") + std::string("IP:") + ip;
  }
  std::vector<std::pair<int, std::string>> exts = extensions;
  if (!san.empty()) exts.push_back({NID_subject_alt_name, san});
  X509V3_CTX ctx;
  X509V3_set_ctx_nodb(&ctx);
  X509V3_set_ctx(&ctx, signer, x509.get(), nullptr, nullptr, 0);
  for (const auto& [nid, value] : exts) {
    X509_EXTENSION* ext = X509V3_EXT_conf_nid(nullptr, &ctx, nid, value.c_str());
    if (!ext) {
      return InvalidArgumentError("certificate extension '" + value + "': " + OpenSslError());
    }
    X509_add_ext(x509.get(), ext, -1);
    X509_EXTENSION_free(ext);
  }
  if (X509_sign(x509.get(), issuer_key != nullptr ? issuer_key : key, EVP_sha256()) == 0) {
    return InternalError("certificate signing: " + OpenSslError());
  }
  CertificatePem out;
  BioPtr cert_bio(BIO_new(BIO_s_mem()));
  PEM_write_bio_X509(cert_bio.get(), x509.get());
  out.cert_pem = BioToString(cert_bio.get());
  BioPtr key_bio(BIO_new(BIO_s_mem()));
  PEM_write_bio_PrivateKey(key_bio.get(), key, nullptr, nullptr, 0, nullptr, nullptr);
  out.key_pem = BioToString(key_bio.get());
  return out;
}

Result<KeyPtr> NewKey() {
  KeyPtr key(EVP_EC_gen("P-256"), EVP_PKEY_free);
  if (!key) return InternalError("EC key generation: " + OpenSslError());
  return key;
}

}  // namespace

Result<CertificatePem> GenerateSelfSignedCertificate(const std::string& common_name,
                                                     const std::vector<std::string>& dns_names,
                                                     const std::vector<std::string>& ip_addresses,
                                                     int days) {
  HAMI_ASSIGN_OR_RETURN(KeyPtr key, NewKey());
  CertTime now = std::chrono::system_clock::now();
  CertificateSpec spec{common_name, dns_names, ip_addresses, now - std::chrono::hours(1),
                       now + std::chrono::hours(24) * days};
  return BuildCertificate(
      spec, key.get(), nullptr, nullptr,
      {
          {NID_basic_constraints, "critical,CA:TRUE"},
          {NID_key_usage, "critical,digitalSignature,keyEncipherment,keyCertSign"},
          {NID_ext_key_usage, "serverAuth,clientAuth"},
      });
}

Result<CertificatePem> GenerateCertificateAuthority(const CertificateSpec& spec) {
  HAMI_ASSIGN_OR_RETURN(KeyPtr key, NewKey());
  return BuildCertificate(spec, key.get(), nullptr, nullptr,
                          {
                              {NID_basic_constraints, "critical,CA:TRUE"},
                              {NID_key_usage, "critical,digitalSignature,keyCertSign,cRLSign"},
                              {NID_subject_key_identifier, "hash"},
                          });
}

namespace {

// A leaf certificate signed by `issuer` with the given extended key usage.
Result<CertificatePem> IssueLeaf(const CertificateSpec& spec, const CertificatePem& issuer,
                                 const char* ext_key_usage) {
  HAMI_ASSIGN_OR_RETURN(X509Ptr ca, ReadCertificate(issuer.cert_pem));
  HAMI_ASSIGN_OR_RETURN(KeyPtr ca_key, ReadKey(issuer.key_pem));
  if (X509_check_private_key(ca.get(), ca_key.get()) != 1) {
    ERR_clear_error();
    return InvalidArgumentError("the issuer's private key does not match its certificate");
  }
  if (X509_check_ca(ca.get()) == 0) {
    return InvalidArgumentError("the issuer certificate is not a CA");
  }
  HAMI_ASSIGN_OR_RETURN(KeyPtr key, NewKey());
  return BuildCertificate(spec, key.get(), ca.get(), ca_key.get(),
                          {
                              {NID_basic_constraints, "critical,CA:FALSE"},
                              {NID_key_usage, "critical,digitalSignature"},
                              {NID_ext_key_usage, ext_key_usage},
                              {NID_authority_key_identifier, "keyid:always"},
                          });
}

}  // namespace

Result<CertificatePem> IssueServingCertificate(const CertificateSpec& spec,
                                               const CertificatePem& issuer) {
  return IssueLeaf(spec, issuer, "serverAuth");
}

Result<CertificatePem> IssueClientCertificate(const CertificateSpec& spec,
                                              const CertificatePem& issuer) {
  return IssueLeaf(spec, issuer, "clientAuth");
}

Result<CertificateInfo> InspectCertificate(std::string_view pem) {
  HAMI_ASSIGN_OR_RETURN(X509Ptr cert, ReadCertificate(pem));
  CertificateInfo info;
  HAMI_ASSIGN_OR_RETURN(info.not_before, FromAsn1Time(X509_get0_notBefore(cert.get())));
  HAMI_ASSIGN_OR_RETURN(info.not_after, FromAsn1Time(X509_get0_notAfter(cert.get())));
  char cn[256] = {};
  if (X509_NAME_get_text_by_NID(X509_get_subject_name(cert.get()), NID_commonName, cn, sizeof cn) >
      0) {
    info.common_name = cn;
  }
  const X509_NAME* subject = X509_get_subject_name(cert.get());
  for (int i = X509_NAME_get_index_by_NID(subject, NID_organizationName, -1); i >= 0;
       i = X509_NAME_get_index_by_NID(subject, NID_organizationName, i)) {
    const ASN1_STRING* o = X509_NAME_ENTRY_get_data(X509_NAME_get_entry(subject, i));
    info.organizations.emplace_back(reinterpret_cast<const char*>(ASN1_STRING_get0_data(o)),
                                    ASN1_STRING_length(o));
  }
  info.is_ca = (X509_get_extension_flags(cert.get()) & EXFLAG_CA) != 0;
  auto* names = static_cast<GENERAL_NAMES*>(
      X509_get_ext_d2i(cert.get(), NID_subject_alt_name, nullptr, nullptr));
  for (int i = 0; names != nullptr && i < sk_GENERAL_NAME_num(names); ++i) {
    const GENERAL_NAME* gn = sk_GENERAL_NAME_value(names, i);
    if (gn->type == GEN_DNS) {
      const ASN1_IA5STRING* s = gn->d.dNSName;
      info.dns_names.emplace_back(reinterpret_cast<const char*>(ASN1_STRING_get0_data(s)),
                                  static_cast<size_t>(ASN1_STRING_length(s)));
    } else if (gn->type == GEN_IPADD) {
      const ASN1_OCTET_STRING* s = gn->d.iPAddress;
      int len = ASN1_STRING_length(s);
      char text[INET6_ADDRSTRLEN] = {};
      int family = len == 4 ? AF_INET : len == 16 ? AF_INET6 : 0;
      if (family != 0 && inet_ntop(family, ASN1_STRING_get0_data(s), text, sizeof text)) {
        info.ip_addresses.emplace_back(text);
      }
    }
  }
  GENERAL_NAMES_free(names);
  ERR_clear_error();
  return info;
}

Result<std::vector<std::string>> SplitCertificateBundle(std::string_view pem) {
  std::vector<std::string> out;
  BioPtr bio(BIO_new_mem_buf(pem.data(), static_cast<int>(pem.size())));
  while (X509* cert = PEM_read_bio_X509(bio.get(), nullptr, nullptr, nullptr)) {
    BioPtr one(BIO_new(BIO_s_mem()));
    PEM_write_bio_X509(one.get(), cert);
    out.push_back(BioToString(one.get()));
    X509_free(cert);
  }
  // The loop ends on "no start line" at the end of the text; anything else is a broken block.
  unsigned long err = ERR_peek_last_error();  // NOLINT(runtime/int)
  bool clean_end = err == 0 || ERR_GET_REASON(err) == PEM_R_NO_START_LINE;
  std::string why = clean_end ? "" : OpenSslError();
  ERR_clear_error();
  if (!clean_end) return InvalidArgumentError("certificate bundle: " + why);
  if (out.empty()) return InvalidArgumentError("certificate bundle holds no certificate");
  return out;
}

Status VerifyCertificate(std::string_view cert_pem, std::string_view trusted_pem, CertTime at) {
  HAMI_ASSIGN_OR_RETURN(X509Ptr cert, ReadCertificate(cert_pem));
  HAMI_ASSIGN_OR_RETURN(std::vector<std::string> anchors, SplitCertificateBundle(trusted_pem));
  std::unique_ptr<X509_STORE, decltype(&X509_STORE_free)> store(X509_STORE_new(), X509_STORE_free);
  for (const std::string& a : anchors) {
    HAMI_ASSIGN_OR_RETURN(X509Ptr anchor, ReadCertificate(a));
    X509_STORE_add_cert(store.get(), anchor.get());  // takes its own reference
  }
  std::unique_ptr<X509_STORE_CTX, decltype(&X509_STORE_CTX_free)> ctx(X509_STORE_CTX_new(),
                                                                      X509_STORE_CTX_free);
  if (X509_STORE_CTX_init(ctx.get(), store.get(), cert.get(), nullptr) != 1) {
    return InternalError("X509_STORE_CTX_init: " + OpenSslError());
  }
  X509_STORE_CTX_set_time(ctx.get(), 0, ToTimeT(at));
  if (X509_verify_cert(ctx.get()) != 1) {
    int err = X509_STORE_CTX_get_error(ctx.get());
    ERR_clear_error();
    return InvalidArgumentError(std::string("certificate does not verify: ") +
                                X509_verify_cert_error_string(err));
  }
  return OkStatus();
}

Status CheckKeyPair(const CertificatePem& pem) { return ParsePair(pem).status(); }

}  // namespace hami::net
