// TLS helpers for the HTTP server: a reloadable certificate source, a self-signed certificate
// generator (for tests, the simulated API server and `--self-signed` modes), and the small X.509
// toolbox a self-managed webhook certificate needs (a CA, certificates it issues, what a
// certificate says about itself, chain verification at a given time).
//
// CertificateSource owns a certificate chain and private key loaded from PEM files (or PEM text).
// The TLS server asks it for the current pair on every handshake; when the files on disk have
// changed (inode, size or mtime), the new pair is loaded and used from that handshake on, so a
// rotated webhook certificate is picked up without a restart. A rotation that fails to parse keeps
// the previous pair and is reported by ReloadIfChanged(). A pair held in memory is swapped with
// Replace(), also without a restart.
//
// Keys are ECDSA P-256, signatures SHA-256. Times are whole seconds (X.509 has no finer grain).
//
// Thread safety: all functions and methods may be called concurrently from any thread.
#pragma once

#include <chrono>
#include <memory>
#include <string>
#include <string_view>
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

using CertTime = std::chrono::system_clock::time_point;

// What to put in a certificate. Subject alternative names are what clients check; the common
// name is informational (and names the issuer in the certificates a CA signs).
struct CertificateSpec {
  std::string common_name;
  std::vector<std::string> dns_names;
  std::vector<std::string> ip_addresses;  // "127.0.0.1", "::1"
  CertTime not_before;
  CertTime not_after;
  // Subject O entries. Kubernetes reads a client certificate's organizations as the user's
  // groups (O=system:masters is a cluster administrator).
  std::vector<std::string> organizations = {};
};

// A self-signed certification authority: CA:TRUE (no path length limit), key usage
// keyCertSign/cRLSign/digitalSignature, a subject key identifier (so that several CAs with the
// same name, as during a rollover, are told apart when chains are built).
Result<CertificatePem> GenerateCertificateAuthority(const CertificateSpec& spec);
// A serving certificate signed by `issuer` (a CA pair from GenerateCertificateAuthority or any
// PEM CA with its key): CA:FALSE, digitalSignature, extended key usage serverAuth, the spec's
// subject alternative names, and an authority key identifier naming the issuer's key.
Result<CertificatePem> IssueServingCertificate(const CertificateSpec& spec,
                                               const CertificatePem& issuer);
// A client certificate signed by `issuer`: as a serving certificate, with extended key usage
// clientAuth instead. Kubernetes authenticates it as user CN in the groups of the O entries.
Result<CertificatePem> IssueClientCertificate(const CertificateSpec& spec,
                                              const CertificatePem& issuer);

// What the first certificate of a PEM text says about itself.
struct CertificateInfo {
  std::string common_name;  // subject CN, "" when absent
  std::vector<std::string> organizations;  // subject O entries, in order
  std::vector<std::string> dns_names;
  std::vector<std::string> ip_addresses;  // textual, as inet_ntop writes them
  CertTime not_before;
  CertTime not_after;
  bool is_ca = false;  // basicConstraints CA:TRUE
};
// InvalidArgument when the text holds no parseable certificate.
Result<CertificateInfo> InspectCertificate(std::string_view pem);
// Each certificate of a PEM bundle as its own PEM block, in order. InvalidArgument when the text
// holds none or a block does not parse.
Result<std::vector<std::string>> SplitCertificateBundle(std::string_view pem);
// OK when the first certificate of `cert_pem` chains to a certificate of `trusted_pem` (a PEM
// bundle of trust anchors) with every certificate valid at `at`; InvalidArgument naming the
// verifier's reason otherwise.
Status VerifyCertificate(std::string_view cert_pem, std::string_view trusted_pem, CertTime at);
// OK when `pem.key_pem` is the private key of `pem.cert_pem`'s first certificate.
Status CheckKeyPair(const CertificatePem& pem);


class CertificateSource {
 public:
  // Loads the files once; fails if they cannot be read or parsed or do not match.
  static Result<std::shared_ptr<CertificateSource>> FromFiles(std::string cert_file,
                                                              std::string key_file);
  // A pair held in memory: it changes only through Replace().
  static Result<std::shared_ptr<CertificateSource>> FromPem(const CertificatePem& pem);

  ~CertificateSource();
  CertificateSource(const CertificateSource&) = delete;
  CertificateSource& operator=(const CertificateSource&) = delete;

  // Re-reads the files if they changed since the last load. Returns OK when nothing changed or
  // the new pair was installed; an error (and keeps the old pair) otherwise.
  Status ReloadIfChanged();
  // Installs `pem` for every handshake from now on (connections already established keep the
  // pair they negotiated). InvalidArgument, keeping the current pair, when `pem` does not parse or
  // its key does not match. On a file-backed source a later change of the files replaces it again.
  Status Replace(const CertificatePem& pem);
  // Number of successful loads and replacements so far (1 after construction).
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
