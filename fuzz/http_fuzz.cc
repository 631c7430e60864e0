// Fuzzes what an HTTP peer sends the operator endpoints (and, later, the S3 gateway): the request
// grammar, header and body limits and the conversion the server hands its handler. Any bytes
// must parse to a request or an error (never a crash, a hang or UB); a parsed request took no
// more bytes than it was given, its path is the target's start, and its body fits the limit.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include "http/server.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view bytes(reinterpret_cast<const char*>(data), size);
  constexpr size_t kMaxHeader = 2048;
  constexpr size_t kMaxBody = 4096;
  cairn::http::Request request;
  auto used = cairn::http::internal::ParseRequest(bytes, kMaxHeader, kMaxBody, &request);
  if (!used.ok() || *used == 0) return 0;
  if (*used > size) std::abort();
  if (request.target.compare(0, request.path.size(), request.path) != 0) std::abort();
  if (request.body.size() > kMaxBody) std::abort();
  (void)request.Header("content-length");
  return 0;
}
