// TLS helpers for the HTTP server: a reloadable certificate source and a self-signed certificate
// generator (for tests, the simulated API server and `--self-signed` modes).
//
// CertificateSource owns a certificate chain and private key loaded from PEM files (or PEM text).
// The TLS server asks it for the current pair on every handshake; when the files on disk have
// changed (inode, size or mtime), the new pair is loaded and used from that handshake on, so a
// rotated webhook certificate is picked up without a restart. A rotation that fails to parse keeps
// the previous pair and is reported by last_reload_status().
//
// Thread safety: all methods may be called concurrently from any thread.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "common/status.h"

namespace hami::net {

struct CertificatePem {
  std::string cert_pem;  // leaf certificate first, then any intermediates
  std::string key_pem;   // PKCS#8 or traditional private key
};

// A self-signed ECDSA P-256 certificate valid for `days`, with subjectAltNames `dns_names` and
// `ip_addresses` (e.g. {"localhost"}, {"127.0.0.1"}). It is marked CA:TRUE so that clients can
// use it directly as their trust anchor.
Result<CertificatePem> GenerateSelfSignedCertificate(const std::string& common_name,
                                                     const std::vector<std::string>& dns_names,
                                                     const std::vector<std::string>& ip_addresses,
                                                     int days = 365);

// Writes `text` to `path` atomically (temp file + rename), mode 0600.
Status WriteFileAtomically(const std::string& path, const std::string& text);

class CertificateSource {
 public:
  // Loads the files once; fails if they cannot be read or parsed or do not match.
  static Result<std::shared_ptr<CertificateSource>> FromFiles(std::string cert_file,
                                                              std::string key_file);
  // A fixed pair that never reloads.
  static Result<std::shared_ptr<CertificateSource>> FromPem(const CertificatePem& pem);

  ~CertificateSource();
  CertificateSource(const CertificateSource&) = delete;
  CertificateSource& operator=(const CertificateSource&) = delete;

  // Re-reads the files if they changed since the last load. Returns OK when nothing changed or
  // the new pair was installed; an error (and keeps the old pair) otherwise.
  Status ReloadIfChanged();
  // Number of successful loads so far (1 after construction).
  int generation() const;

  // Installs the current pair on an OpenSSL `SSL*` (passed as void* to keep OpenSSL out of this
  // header). Returns false if the SSL object refused it.
  bool InstallOn(void* ssl);

  struct Impl;

 private:
  explicit CertificateSource(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace hami::net
