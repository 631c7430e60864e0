// Fuzzes the parsers of names that arrive from flags, etcd and peers: source URIs, host:port
// addresses, principals and path prefixes of the authorization policy, and job tokens (decoded
// before their signature is checked). Any bytes must parse or fail cleanly; a parsed URI must
// print to a string that parses back to the same URI.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>

#include "auth/policy.h"
#include "auth/token.h"
#include "common/uri.h"
#include "net/stream.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view text(reinterpret_cast<const char*>(data), size);
  if (auto uri = cairn::ParseUri(text); uri.ok()) {
    auto again = cairn::ParseUri(uri->ToString());
    if (!again.ok() || again->scheme != uri->scheme || again->authority != uri->authority ||
        again->path != uri->path) {
      std::abort();
    }
  }
  std::string host;
  uint16_t port = 0;
  (void)cairn::net::ParseHostPort(text, &host, &port);
  (void)cairn::auth::ValidatePrincipal(text);
  (void)cairn::auth::DecodeTokenUnverified(text);
  const std::string_view prefix = text.substr(0, size / 2);
  const std::string_view path = text.substr(size / 2);
  if (cairn::auth::PrefixCovers(prefix, path) && prefix != "/" && !path.starts_with(prefix)) {
    std::abort();  // A prefix covers only paths that start with it.
  }
  return 0;
}
