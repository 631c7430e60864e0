#include "ufs/s3_sigv4.h"

#include <openssl/evp.h>
#include <openssl/hmac.h>

#include <algorithm>
#include <cctype>
#include <ctime>
#include <map>

#include "ufs/s3_digest.h"

namespace cairn::ufs::s3 {
namespace {

std::string Lower(std::string_view s) {
  std::string out(s);
  for (char& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

std::string_view Trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
  return s;
}

// Lower-cased name -> trimmed value (a repeated name joins its values with ',', as SigV4 says).
std::map<std::string, std::string> ParseHeaders(const std::vector<std::string>& headers) {
  std::map<std::string, std::string> out;
  for (const std::string& line : headers) {
    size_t colon = line.find(':');
    if (colon == std::string::npos) continue;
    std::string name = Lower(Trim(std::string_view(line).substr(0, colon)));
    std::string value(Trim(std::string_view(line).substr(colon + 1)));
    auto [it, inserted] = out.emplace(name, value);
    if (!inserted) it->second += "," + value;
  }
  return out;
}

std::string Hmac(std::string_view key, std::string_view data) {
  unsigned char out[EVP_MAX_MD_SIZE];
  unsigned int len = 0;
  HMAC(EVP_sha256(), key.data(), static_cast<int>(key.size()),
       reinterpret_cast<const unsigned char*>(data.data()), data.size(), out, &len);
  return std::string(reinterpret_cast<const char*>(out), len);
}

std::string HexOf(std::string_view bytes) {
  static constexpr char kHex[] = "0123456789abcdef";
  std::string out;
  out.reserve(bytes.size() * 2);
  for (unsigned char c : bytes) {
    out += kHex[c >> 4];
    out += kHex[c & 0xf];
  }
  return out;
}

}  // namespace

bool CurlMisordersHeaders(const std::vector<std::string>& headers) {
  std::vector<std::string> names;
  for (const auto& [name, value] : ParseHeaders(headers)) names.push_back(name);
  for (const std::string& a : names) {
    for (const std::string& b : names) {
      if (b.size() > a.size() && b.starts_with(a) && b[a.size()] < ':') return true;
    }
  }
  return false;
}

StatusOr<std::vector<std::string>> SignV4(const SigV4Input& in) {
  size_t scheme = in.url.find("://");
  if (scheme == std::string::npos) return InvalidArgumentError("URL without a scheme");
  size_t path_start = in.url.find('/', scheme + 3);
  std::string host = in.url.substr(
      scheme + 3, path_start == std::string::npos ? std::string::npos : path_start - scheme - 3);
  if (host.empty()) return InvalidArgumentError("URL without a host");
  std::string path = path_start == std::string::npos ? "/" : in.url.substr(path_start);
  std::string query;
  if (size_t q = path.find('?'); q != std::string::npos) {
    query = path.substr(q + 1);
    path.resize(q);
  }
  std::map<std::string, std::string> headers = ParseHeaders(in.headers);
  auto payload = headers.find("x-amz-content-sha256");
  if (payload == headers.end()) return InvalidArgumentError("no x-amz-content-sha256 header");
  const std::string payload_hash = payload->second;

  std::time_t t = static_cast<std::time_t>(in.unix_seconds);
  std::tm tm{};
  gmtime_r(&t, &tm);
  char amz_date[17];
  std::strftime(amz_date, sizeof(amz_date), "%Y%m%dT%H%M%SZ", &tm);
  const std::string date(amz_date, 8);
  headers["host"] = host;
  headers["x-amz-date"] = amz_date;

  std::string canonical_headers;
  std::string signed_headers;
  for (const auto& [name, value] : headers) {  // std::map: sorted by name.
    canonical_headers += name + ":" + value + "\n";
    signed_headers += (signed_headers.empty() ? "" : ";") + name;
  }
  const std::string canonical = in.method + "\n" + path + "\n" + query + "\n" + canonical_headers +
                                "\n" + signed_headers + "\n" + payload_hash;
  const std::string scope = date + "/" + in.region + "/" + in.service + "/aws4_request";
  const std::string to_sign = "AWS4-HMAC-SHA256\n" + std::string(amz_date) + "\n" + scope + "\n" +
                              Sha256Hex(std::span<const char>(canonical.data(), canonical.size()));
  std::string key = Hmac("AWS4" + in.secret_key, date);
  key = Hmac(key, in.region);
  key = Hmac(key, in.service);
  key = Hmac(key, "aws4_request");
  const std::string signature = HexOf(Hmac(key, to_sign));
  return std::vector<std::string>{"Host: " + host, std::string("x-amz-date: ") + amz_date,
                                  "Authorization: AWS4-HMAC-SHA256 Credential=" + in.access_key +
                                      "/" + scope + ", SignedHeaders=" + signed_headers +
                                      ", Signature=" + signature};
}

}  // namespace cairn::ufs::s3
