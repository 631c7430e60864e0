#include "ufs/s3_digest.h"

#include <openssl/evp.h>

namespace cairn::ufs::s3 {

std::string Hex(std::span<const unsigned char> bytes) {
  static constexpr char kHex[] = "0123456789abcdef";
  std::string out;
  out.reserve(bytes.size() * 2);
  for (unsigned char b : bytes) {
    out += kHex[b >> 4];
    out += kHex[b & 0xf];
  }
  return out;
}

std::string Sha256Hex(std::span<const char> data) {
  unsigned char md[EVP_MAX_MD_SIZE];
  unsigned int len = 0;
  EVP_Digest(data.data(), data.size(), md, &len, EVP_sha256(), nullptr);
  return Hex(std::span<const unsigned char>(md, len));
}

Md5Digest Md5(std::span<const char> data) {
  Md5Digest out{};
  unsigned int len = 0;
  EVP_Digest(data.data(), data.size(), out.data(), &len, EVP_md5(), nullptr);
  return out;
}

std::string Base64(std::span<const unsigned char> bytes) {
  std::string out(4 * ((bytes.size() + 2) / 3), '\0');
  int n = EVP_EncodeBlock(reinterpret_cast<unsigned char*>(out.data()), bytes.data(),
                          static_cast<int>(bytes.size()));
  out.resize(n < 0 ? 0 : static_cast<size_t>(n));
  return out;
}

std::string MultipartETag(const std::vector<Md5Digest>& part_md5s) {
  std::string joined;
  joined.reserve(part_md5s.size() * 16);
  for (const Md5Digest& d : part_md5s) joined.append(reinterpret_cast<const char*>(d.data()), 16);
  Md5Digest whole = Md5(joined);
  return Hex(whole) + "-" + std::to_string(part_md5s.size());
}

}  // namespace cairn::ufs::s3
