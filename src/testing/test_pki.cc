#include "testing/test_pki.h"

#include <cstdio>
#include <cstdlib>
#include <fstream>

namespace cairn::testing {

void WriteFileAtomically(const std::string& path, const std::string& text) {
  const std::string tmp = path + ".tmp";
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    out << text;
    if (!out) {
      std::fprintf(stderr, "cannot write %s\n", tmp.c_str());
      std::abort();
    }
  }
  std::rename(tmp.c_str(), path.c_str());
}

TestPki::TestPki(std::string ca_name) : dir_("pki") {
  auto ca = tls::CreateCertificateAuthority(ca_name, std::chrono::hours(24));
  if (!ca.ok()) {
    std::fprintf(stderr, "test CA: %s\n", ca.status().ToString().c_str());
    std::abort();
  }
  ca_ = std::move(ca).value();
  ca_file_ = dir_.str() + "/" + ca_name + ".crt";
  WriteFileAtomically(ca_file_, ca_.cert_pem);
}

TestPki::Files TestPki::Issue(const std::string& name, tls::CertSpec spec) {
  auto issued = tls::IssueCertificate(ca_, spec);
  if (!issued.ok()) {
    std::fprintf(stderr, "test certificate %s: %s\n", name.c_str(),
                 issued.status().ToString().c_str());
    std::abort();
  }
  Files f{dir_.str() + "/" + name + ".crt", dir_.str() + "/" + name + ".key"};
  WriteFileAtomically(f.key, issued->key_pem);
  WriteFileAtomically(f.cert, issued->cert_pem);
  return f;
}

TestPki::Files TestPki::Node(const std::string& name) {
  tls::CertSpec spec;
  spec.common_name = name;
  spec.hosts = {"127.0.0.1", "localhost"};
  spec.valid_for = std::chrono::hours(24);
  return Issue(name, spec);
}

TestPki::Files TestPki::ClientCert(const std::string& name) {
  tls::CertSpec spec;
  spec.common_name = name;
  spec.role = tls::CertRole::kClient;
  spec.valid_for = std::chrono::hours(24);
  return Issue(name, spec);
}

tls::TlsOptions TestPki::Options(const Files& files) const {
  tls::TlsOptions o;
  o.cert_file = files.cert;
  o.key_file = files.key;
  o.ca_file = ca_file_;
  return o;
}

}  // namespace cairn::testing
