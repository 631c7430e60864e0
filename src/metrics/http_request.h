// Parsing of HTTP/1.x request heads for the metrics HttpServer. Kept apart from the socket code so
// that the grammar (and every way a request can be malformed) is unit-tested without a network.
//
// Accepted: "METHOD SP target SP HTTP/1.0|HTTP/1.1" then header fields "name: value", lines ended
// by CRLF (a bare LF is tolerated, RFC 9112 section 2.2), empty lines before the request line are
// skipped. Rejected as malformed: anything else, including whitespace before a header colon,
// obsolete line folding, control characters, and a bad or conflicting Content-Length.
// Pure functions; thread-safe.
#ifndef CAIRN_METRICS_HTTP_REQUEST_H_
#define CAIRN_METRICS_HTTP_REQUEST_H_

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace cairn::metrics {

struct HttpRequest {
  std::string method;      // "GET", as sent (methods are case-sensitive).
  std::string path;        // The target without its "?query"; "/metrics".
  int minor_version = 1;   // HTTP/1.<minor_version>.
  bool keep_alive = true;  // From the version and the Connection header.
  uint64_t content_length = 0;
  bool has_transfer_encoding = false;  // A body of unknown length this server does not accept.
};

struct HeadParse {
  enum class State {
    kIncomplete,  // No end of head yet and still under the size limit: read more.
    kComplete,    // `request` is filled and the head took `head_size` bytes of the buffer.
    kMalformed,   // Answer 400 and close; `error` says why.
    kTooLarge,    // The head exceeds the limit: answer 431 and close.
  };
  State state = State::kIncomplete;
  HttpRequest request;
  size_t head_size = 0;
  std::string error;
};

// Parses the request head at the front of `buffer` (which may also hold the body or further
// pipelined requests). `max_head_bytes` bounds the head including its blank line.
HeadParse ParseRequestHead(std::string_view buffer, size_t max_head_bytes);

}  // namespace cairn::metrics

#endif  // CAIRN_METRICS_HTTP_REQUEST_H_
