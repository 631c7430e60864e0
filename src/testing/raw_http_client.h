// RawHttpClient: a deliberately dumb blocking HTTP/1.1 client over a real socket, for tests of
// HTTP servers: it sends exactly the bytes a test gives it (malformed, partial, pipelined) and
// reads Content-Length framed responses. Every receive has a timeout, so a server bug fails the
// test instead of hanging it. Not thread-safe (one test thread per client).
#ifndef CAIRN_TESTING_RAW_HTTP_CLIENT_H_
#define CAIRN_TESTING_RAW_HTTP_CLIENT_H_

#include <cstdint>
#include <map>
#include <optional>
#include <string>

namespace cairn::testing {

struct RawHttpResponse {
  int status = 0;
  std::map<std::string, std::string> headers;  // Names lower-cased.
  std::string body;
};

class RawHttpClient {
 public:
  // Connects to 127.0.0.1:`port` from `source_ip` (any 127.x.y.z address: a distinct peer to
  // the server), or from the default address when empty.
  explicit RawHttpClient(uint16_t port, const std::string& source_ip = "");
  ~RawHttpClient();
  RawHttpClient(const RawHttpClient&) = delete;
  RawHttpClient& operator=(const RawHttpClient&) = delete;

  bool connected() const { return connected_; }
  bool Send(const std::string& data);
  // Reads one response; nullopt on EOF, timeout or garbage. `head_request`: no body follows.
  std::optional<RawHttpResponse> Read(bool head_request = false);
  // True if the server closes the connection (EOF) with no further bytes within the timeout.
  bool ClosedByPeer();

 private:
  bool Fill();

  int fd_ = -1;
  bool connected_ = false;
  std::string buffer_;
};

// "GET <path> HTTP/1.1" with a Host header and `extra_headers` ("Name: value\r\n"...).
std::string HttpGet(const std::string& path, const std::string& extra_headers = "");

}  // namespace cairn::testing

#endif  // CAIRN_TESTING_RAW_HTTP_CLIENT_H_
