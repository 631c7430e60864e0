#include "tls/certificates.h"

#include <gtest/gtest.h>

namespace cairn::tls {
namespace {

using std::chrono::hours;
using std::chrono::seconds;

TEST(CertificatesTest, IssuesLeavesThatNameTheirPrincipalAndExpireWhenAsked) {
  auto ca = CreateCertificateAuthority("cluster-ca", hours(48));
  ASSERT_TRUE(ca.ok()) << ca.status().ToString();
  EXPECT_EQ(*CertificateCommonName(ca->cert_pem), "cluster-ca");
  EXPECT_NE(ca->key_pem.find("PRIVATE KEY"), std::string::npos);

  CertSpec node;
  node.common_name = "worker-7";
  node.hosts = {"10.0.0.7", "worker-7.cairn.internal", "::1"};
  node.valid_for = hours(24);
  auto leaf = IssueCertificate(*ca, node);
  ASSERT_TRUE(leaf.ok()) << leaf.status().ToString();
  EXPECT_EQ(*CertificateCommonName(leaf->cert_pem), "worker-7");
  int64_t left = *CertificateSecondsLeft(leaf->cert_pem);
  EXPECT_GT(left, 24 * 3600 - 120);
  EXPECT_LE(left, 24 * 3600);

  CertSpec expired;
  expired.common_name = "team-a";
  expired.role = CertRole::kClient;
  expired.not_before_offset = -hours(2);
  expired.valid_for = hours(1);
  auto old = IssueCertificate(*ca, expired);
  ASSERT_TRUE(old.ok()) << old.status().ToString();
  EXPECT_LT(*CertificateSecondsLeft(old->cert_pem), -3000);
}

TEST(CertificatesTest, RefusesBadNamesHostsAndIssuers) {
  auto ca = CreateCertificateAuthority("ca", hours(1));
  ASSERT_TRUE(ca.ok());
  EXPECT_EQ(CreateCertificateAuthority("", hours(1)).status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(CreateCertificateAuthority(std::string(65, 'x'), hours(1)).status().code(),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(CreateCertificateAuthority("ca", seconds(0)).status().code(),
            StatusCode::kInvalidArgument);

  CertSpec spec;
  spec.common_name = "worker";
  EXPECT_EQ(IssueCertificate(*ca, spec).status().code(), StatusCode::kInvalidArgument)
      << "a node certificate without a host";
  spec.hosts = {"bad host name"};
  EXPECT_EQ(IssueCertificate(*ca, spec).status().code(), StatusCode::kInvalidArgument);
  spec.hosts = {"a..b"};
  EXPECT_EQ(IssueCertificate(*ca, spec).status().code(), StatusCode::kInvalidArgument);
  spec.hosts = {"localhost"};
  spec.common_name = "line\nbreak";
  EXPECT_EQ(IssueCertificate(*ca, spec).status().code(), StatusCode::kInvalidArgument);
  spec.common_name = "worker";

  // A leaf cannot sign, garbage does not parse, and a key must match its certificate.
  auto leaf = IssueCertificate(*ca, spec);
  ASSERT_TRUE(leaf.ok());
  EXPECT_EQ(IssueCertificate(*leaf, spec).status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(IssueCertificate({"junk", "junk"}, spec).status().code(), StatusCode::kInvalidArgument);
  auto other = CreateCertificateAuthority("other", hours(1));
  ASSERT_TRUE(other.ok());
  EXPECT_EQ(IssueCertificate({other->key_pem, ca->cert_pem}, spec).status().code(),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(CertificateCommonName("not a certificate").status().code(),
            StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace cairn::tls
