// TestPki: a private CA and certificates written to a temp folder, for tests of TLS on either
// end of a connection (real OpenSSL, real files: what an operator's `cairn cert` output is).
// Thread-safety: one test's; the files may be read from any thread.
#ifndef CAIRN_TESTING_TEST_PKI_H_
#define CAIRN_TESTING_TEST_PKI_H_

#include <chrono>
#include <string>
#include <vector>

#include "testing/test_util.h"
#include "tls/certificates.h"
#include "tls/tls_context.h"

namespace cairn::testing {

class TestPki {
 public:
  // Files of one certificate under the PKI's folder.
  struct Files {
    std::string cert;
    std::string key;
  };

  explicit TestPki(std::string ca_name = "test-ca");
  const std::string& ca_file() const { return ca_file_; }
  const tls::KeyAndCert& ca() const { return ca_; }

  // Issues and writes `name`.crt / `name`.key (aborts the test binary on an OpenSSL failure,
  // which would make every TLS test meaningless).
  Files Issue(const std::string& name, tls::CertSpec spec);
  // A node certificate for 127.0.0.1 and localhost, valid for a day.
  Files Node(const std::string& name);
  // A client certificate, valid for a day.
  Files ClientCert(const std::string& name);

  // TLS options for a server or client using `files` and trusting this CA.
  tls::TlsOptions Options(const Files& files) const;
  std::string dir() const { return dir_.str(); }

 private:
  TempDir dir_;
  tls::KeyAndCert ca_;
  std::string ca_file_;
};

// Writes `text` to `path` (replacing it through a rename, as a certificate manager would).
void WriteFileAtomically(const std::string& path, const std::string& text);

}  // namespace cairn::testing

#endif  // CAIRN_TESTING_TEST_PKI_H_
