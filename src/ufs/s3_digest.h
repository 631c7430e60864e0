// Digests S3 requests carry: the SHA-256 of a payload that SigV4 signs (x-amz-content-sha256), the
// MD5 that Content-MD5 carries (the server refuses a body that arrived damaged), and the ETags S3
// derives from MD5s. Pure functions over OpenSSL's EVP; thread-safe.
#ifndef CAIRN_UFS_S3_DIGEST_H_
#define CAIRN_UFS_S3_DIGEST_H_

#include <array>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace cairn::ufs::s3 {

// SHA-256 of the empty string: the payload hash of every bodiless request. Signing the real
// (empty) payload hash, rather than "UNSIGNED-PAYLOAD", is accepted by every SigV4 verifier.
inline constexpr std::string_view kEmptySha256 =
    "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855";

using Md5Digest = std::array<unsigned char, 16>;

std::string Sha256Hex(std::span<const char> data);
Md5Digest Md5(std::span<const char> data);
std::string Hex(std::span<const unsigned char> bytes);
std::string Base64(std::span<const unsigned char> bytes);

// The ETag S3 gives an object assembled from parts with these MD5s: the MD5 of their
// concatenated digests, in hex, then "-<count>" ("d41d...-3"). Servers that encrypt with KMS, and
// some S3-compatible ones (s3rver: a plain MD5 of the whole object), give other ETags.
std::string MultipartETag(const std::vector<Md5Digest>& part_md5s);

}  // namespace cairn::ufs::s3

#endif  // CAIRN_UFS_S3_DIGEST_H_
