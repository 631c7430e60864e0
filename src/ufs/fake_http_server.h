// FakeHttpServer (tests only): a tiny HTTP/1.1 server on 127.0.0.1, port 0, that records every
// request and answers with whatever a test's handler returns. Lets unit tests see exactly what
// the S3 client puts on the wire (signatures, encodings, headers) and feed it any response
// (errors, servers that ignore Range or If-Match, slow answers) without a real S3.
//
// One thread per connection, keep-alive supported, "Expect: 100-continue" answered.
// Thread-safety: requests() may be called while the server runs; the handler is called from
// connection threads (concurrently when the client opens several connections).
#ifndef CAIRN_UFS_FAKE_HTTP_SERVER_H_
#define CAIRN_UFS_FAKE_HTTP_SERVER_H_

#include <functional>
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "common/status.h"
#include "common/thread_annotations.h"

namespace cairn::ufs::testing {

struct RecordedRequest {
  std::string method;
  std::string path;                            // Raw, as sent (still percent-encoded).
  std::string query;                           // Raw, without '?'.
  std::map<std::string, std::string> headers;  // Lowercased names.
  std::string body;
  std::string Header(const std::string& name) const {
    auto it = headers.find(name);
    return it == headers.end() ? "" : it->second;
  }
};

class FakeHttpServer {
 public:
  // Returns the complete raw response ("HTTP/1.1 200 OK\r\n..."), or "" to drop the connection
  // without answering (the request was received; its answer is lost on the way).
  using Handler = std::function<std::string(const RecordedRequest&)>;

  static StatusOr<std::unique_ptr<FakeHttpServer>> Start(Handler handler);
  ~FakeHttpServer();

  int port() const { return port_; }
  std::string endpoint() const { return "http://127.0.0.1:" + std::to_string(port_); }
  std::vector<RecordedRequest> requests() const EXCLUDES(mu_);

  // Builds a response with Content-Length; for a HEAD answer pass head=true (no body is sent,
  // but Content-Length still gives body.size()).
  static std::string Response(int status, const std::map<std::string, std::string>& headers,
                              const std::string& body, bool head = false);

 private:
  FakeHttpServer(int listen_fd, int port, Handler handler)
      : listen_fd_(listen_fd), port_(port), handler_(std::move(handler)) {}
  void AcceptLoop();
  void Serve(int fd);

  const int listen_fd_;
  const int port_;
  const Handler handler_;
  std::thread acceptor_;
  mutable Mutex mu_;
  std::vector<RecordedRequest> requests_ GUARDED_BY(mu_);
  std::vector<int> conn_fds_ GUARDED_BY(mu_);
  std::vector<std::thread> conn_threads_ GUARDED_BY(mu_);
  bool stopping_ GUARDED_BY(mu_) = false;
};

}  // namespace cairn::ufs::testing

#endif  // CAIRN_UFS_FAKE_HTTP_SERVER_H_
