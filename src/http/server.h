// http::Server: an HTTP/1.1 server on Boost.Beast over Asio, plaintext or TLS 1.3, for Cairn's
// operator endpoints (metrics, health) and the S3 gateway to come. Beast parses; this file owns
// the connection policy: limits, timeouts, TLS, and who may hold a connection.
//
// Requests are read whole (head <= max_header_bytes, body <= max_body_bytes; chunked bodies are
// accepted and count against the same bound) and handed to one Handler; its Response is written
// back. Keep-alive and pipelining work. What the server answers itself, closing afterwards:
//   400  malformed request; and, on a TLS server, a request sent in plaintext ("TLS required")
//   408  the request did not arrive whole within request_timeout of its first byte (plaintext;
//        a TLS connection is closed instead: its stream state is unknown after a cut read)
//   413  body over max_body_bytes        431  head over max_header_bytes
//   500  the handler threw (no exception leaves the server)
//   503  no room: every connection (or every one of this peer's) is in the middle of a request
//
// Who holds a connection: at most max_connections in all and max_connections_per_peer from one
// address. A new connection over either cap closes the connection (of that peer, for the
// per-peer cap) that has waited longest without a request in progress, so that silent or idle
// keep-alive connections cannot lock probes and scrapes out; only when all of them are busy
// (bounded by request_timeout) is the new one answered 503. A connection waits at most
// idle_timeout for a request's first byte (and for its TLS handshake to begin), a request must
// arrive whole within request_timeout, and a response must drain within request_timeout.
//
// TLS: with `tls` set (a server tls::TlsContext), every connection must speak TLS 1.3; the
// certificates are re-read when their files change (tls_context.h). A client certificate, when
// the context asks for one and the client sends one, is verified against the context's CA and
// its identity given to the handler (Peer::principal); an invalid one fails the handshake.
//
// Threads: `threads` I/O threads run every connection; the handler runs on them, concurrently
// for different connections, and must be thread-safe. Keep it short (it delays other
// connections on its thread); requests of one connection are handled one at a time, in order.
// Stop() cuts every connection and joins the threads.
#ifndef CAIRN_HTTP_SERVER_H_
#define CAIRN_HTTP_SERVER_H_

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "common/status.h"

namespace cairn::tls {
class TlsContext;
}

namespace cairn::http {

// Who sent a request, as the connection established it.
struct Peer {
  std::string address;  // "ip:port" ("[v6]:port").
  bool encrypted = false;
  // The common name of a client certificate verified against the server's CA; empty without
  // one (or on plaintext).
  std::string principal;
  // The verified certificate is a cluster node's (extended key usage serverAuth).
  bool cluster_node = false;
};

struct Request {
  std::string method;  // As sent ("GET"); methods are case-sensitive.
  std::string target;  // As sent: "/metrics?x=1".
  std::string path;    // The target up to '?': "/metrics".
  std::string query;   // After '?' (without it); empty when none.
  int version = 11;    // 10 or 11.
  bool keep_alive = true;
  // Header fields in arrival order, names as sent (compare them case-insensitively).
  std::vector<std::pair<std::string, std::string>> headers;
  std::string body;
  Peer peer;

  // The first field named `name` (case-insensitive), or empty.
  std::string_view Header(std::string_view name) const;
};

struct Response {
  int status = 200;
  std::string content_type = "text/plain; charset=utf-8";
  std::string body;
  // Further header fields (Content-Length, Content-Type and Connection are set by the server).
  std::vector<std::pair<std::string, std::string>> headers;
  // Close the connection after this response.
  bool close = false;

  static Response Text(int status, std::string body);
};

// Runs on an I/O thread (see above). For a HEAD request, return what GET would: the server sends
// the head with its Content-Length and no body.
using Handler = std::function<Response(const Request&)>;

struct ServerOptions {
  // Address to bind: a numeric IPv4/IPv6 address or a host name; "0.0.0.0" (or "") for every
  // IPv4 interface, "::" for every IPv6 one.
  std::string host = "0.0.0.0";
  uint16_t port = 0;  // 0: an ephemeral port (see Server::port()).
  Handler handler;    // Required.
  // Optional: serve TLS only. A server-role context; shared with whoever else uses it.
  std::shared_ptr<tls::TlsContext> tls;
  size_t max_connections = 64;
  size_t max_connections_per_peer = 16;
  size_t max_header_bytes = 16 * 1024;
  size_t max_body_bytes = 16 * 1024;
  std::chrono::milliseconds request_timeout{10'000};
  std::chrono::milliseconds idle_timeout{60'000};
  int threads = 1;
};

class Server {
 public:
  // Binds, listens and starts serving.
  // Errors: InvalidArgument for a missing handler, zero limits, timeouts or threads, a
  // per-peer cap above the total, or a host that does not resolve; the errno-derived status
  // (IoError, PermissionDenied, ...) when the socket cannot be bound (port in use); Internal if
  // a thread cannot be started.
  static StatusOr<std::unique_ptr<Server>> Start(ServerOptions options);

  Server(const Server&) = delete;
  Server& operator=(const Server&) = delete;
  ~Server();  // Stops.

  // Stops accepting, closes every connection (responses in flight are cut) and joins the
  // threads. Idempotent and thread-safe; must not be called from the handler.
  void Stop();

  uint16_t port() const;
  // Open client connections (for tests and a gauge). Thread-safe.
  size_t open_connections() const;

 private:
  class Impl;
  explicit Server(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

namespace internal {

// Parses one whole request from `bytes` with the server's grammar and limits, converting it as
// the server would (for the fuzz target and unit tests). Returns the number of bytes it took, 0
// when `bytes` holds no complete request yet. Errors: InvalidArgument (malformed: 400),
// ResourceExhausted (a head or body over its limit: 431/413).
StatusOr<size_t> ParseRequest(std::string_view bytes, size_t max_header_bytes,
                              size_t max_body_bytes, Request* out);

}  // namespace internal

}  // namespace cairn::http

#endif  // CAIRN_HTTP_SERVER_H_
