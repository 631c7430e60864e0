#include <arpa/inet.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/sendfile.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <charconv>
#include <cstring>
#include <vector>

#include "common/iovec_writer.h"
#include "net/stream.h"

namespace cairn::net {
namespace {

Status SocketError(int err, std::string_view what, std::string_view peer) {
  std::string m(what);
  m += " ";
  m += peer;
  m += ": ";
  m += std::strerror(err);
  if (err == EAGAIN || err == EWOULDBLOCK || err == ETIMEDOUT) return DeadlineExceededError(m);
  return UnavailableError(m);
}

class TcpStream : public Stream {
 public:
  TcpStream(int fd, std::string peer)
      : fd_(fd), peer_(std::move(peer)), on_this_host_(SameHost(fd)) {
    int one = 1;
    setsockopt(fd_, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    int buf = 4 << 20;
    setsockopt(fd_, SOL_SOCKET, SO_SNDBUF, &buf, sizeof(buf));
    setsockopt(fd_, SOL_SOCKET, SO_RCVBUF, &buf, sizeof(buf));
  }
  ~TcpStream() override { close(fd_); }

  Status ReadFull(std::span<char> out) override {
    size_t done = 0;
    while (done < out.size()) {
      ssize_t n = recv(fd_, out.data() + done, out.size() - done, 0);
      if (n > 0) {
        done += static_cast<size_t>(n);
        continue;
      }
      if (n == 0) return UnavailableError("connection closed by " + peer_);
      if (errno == EINTR) continue;
      return SocketError(errno, "read from", peer_);
    }
    return Status::Ok();
  }

  Status WriteAll(std::span<const std::span<const char>> buffers) override {
    return Send(buffers, 0);
  }

  Status SendFile(std::span<const std::span<const char>> head, int fd, uint64_t offset,
                  uint64_t length) override {
    // MSG_MORE holds the head back until sendfile's bytes join it (the last sendfile call,
    // without the flag, pushes the segment out; TCP_NODELAY would otherwise send the head alone).
    CAIRN_RETURN_IF_ERROR(Send(head, length > 0 ? MSG_MORE : 0));
    off_t off = static_cast<off_t>(offset);
    uint64_t left = length;
    while (left > 0) {
      ssize_t n = sendfile(fd_, fd, &off, left);
      if (n < 0) {
        if (errno == EINTR) continue;
        return SocketError(errno, "sendfile to", peer_);
      }
      if (n == 0) return IoError("sendfile: source file shorter than expected (truncated page)");
      left -= static_cast<uint64_t>(n);
    }
    return Status::Ok();
  }

  void SetReadTimeout(std::chrono::milliseconds timeout) override {
    SetTimeout(SO_RCVTIMEO, timeout);
  }
  void SetWriteTimeout(std::chrono::milliseconds timeout) override {
    SetTimeout(SO_SNDTIMEO, timeout);
  }

  void Shutdown() override {
    if (!shut_.exchange(true)) shutdown(fd_, SHUT_RDWR);
  }

  std::string PeerName() const override { return peer_; }
  int NativeHandle() const override { return fd_; }
  bool PeerOnThisHost() const override { return on_this_host_; }

 private:
  // Writes every byte of `buffers` with sendmsg `flags` (besides MSG_NOSIGNAL).
  Status Send(std::span<const std::span<const char>> buffers, int flags) {
    std::vector<iovec> iov;
    iov.reserve(buffers.size());
    for (auto b : buffers) {
      if (!b.empty()) iov.push_back({const_cast<char*>(b.data()), b.size()});
    }
    const int error = WriteAllIovecs(iov, [&](const iovec* first, int count) {
      msghdr msg{};
      msg.msg_iov = const_cast<iovec*>(first);
      msg.msg_iovlen = static_cast<size_t>(count);
      return sendmsg(fd_, &msg, MSG_NOSIGNAL | flags);
    });
    if (error != 0) return SocketError(error, "write to", peer_);
    return Status::Ok();
  }

  void SetTimeout(int option, std::chrono::milliseconds timeout) {
    timeval tv{};
    tv.tv_sec = timeout.count() / 1000;
    tv.tv_usec = (timeout.count() % 1000) * 1000;
    setsockopt(fd_, SOL_SOCKET, option, &tv, sizeof(tv));
  }

  // Both ends share an address (a connection to one of this host's own addresses, loopback
  // included), or the socket is a Unix socket.
  static bool SameHost(int fd) {
    sockaddr_storage local{}, remote{};
    socklen_t ll = sizeof(local), rl = sizeof(remote);
    if (getsockname(fd, reinterpret_cast<sockaddr*>(&local), &ll) != 0 ||
        getpeername(fd, reinterpret_cast<sockaddr*>(&remote), &rl) != 0) {
      return false;
    }
    if (local.ss_family == AF_UNIX) return true;
    if (local.ss_family != remote.ss_family) return false;
    if (local.ss_family == AF_INET) {
      auto* a = reinterpret_cast<const sockaddr_in*>(&local);
      auto* b = reinterpret_cast<const sockaddr_in*>(&remote);
      return a->sin_addr.s_addr == b->sin_addr.s_addr || (ntohl(b->sin_addr.s_addr) >> 24) == 127;
    }
    if (local.ss_family == AF_INET6) {
      auto* a = reinterpret_cast<const sockaddr_in6*>(&local);
      auto* b = reinterpret_cast<const sockaddr_in6*>(&remote);
      return std::memcmp(&a->sin6_addr, &b->sin6_addr, sizeof(in6_addr)) == 0 ||
             IN6_IS_ADDR_LOOPBACK(&b->sin6_addr);
    }
    return false;
  }

  int fd_;
  std::string peer_;
  const bool on_this_host_;
  std::atomic<bool> shut_{false};
};

std::string FormatPeer(const sockaddr_storage& ss) {
  char host[INET6_ADDRSTRLEN] = "?";
  uint16_t port = 0;
  if (ss.ss_family == AF_INET) {
    auto* a = reinterpret_cast<const sockaddr_in*>(&ss);
    inet_ntop(AF_INET, &a->sin_addr, host, sizeof(host));
    port = ntohs(a->sin_port);
  } else if (ss.ss_family == AF_INET6) {
    auto* a = reinterpret_cast<const sockaddr_in6*>(&ss);
    inet_ntop(AF_INET6, &a->sin6_addr, host, sizeof(host));
    port = ntohs(a->sin6_port);
  }
  return std::string(host) + ":" + std::to_string(port);
}

StatusOr<addrinfo*> Resolve(const std::string& host, uint16_t port, bool passive) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  if (passive) hints.ai_flags = AI_PASSIVE;
  addrinfo* res = nullptr;
  std::string port_str = std::to_string(port);
  int rc = getaddrinfo(host.empty() ? nullptr : host.c_str(), port_str.c_str(), &hints, &res);
  if (rc != 0) {
    return UnavailableError("cannot resolve '" + host + "': " + gai_strerror(rc));
  }
  return res;
}

}  // namespace

StatusOr<std::pair<std::unique_ptr<Stream>, std::unique_ptr<Stream>>> StreamPair() {
  int fds[2];
  if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, fds) != 0) {
    return UnavailableError(std::string("socketpair: ") + std::strerror(errno));
  }
  return std::make_pair(std::unique_ptr<Stream>(new TcpStream(fds[0], "pair-a")),
                        std::unique_ptr<Stream>(new TcpStream(fds[1], "pair-b")));
}

bool IsLoopbackHost(std::string_view host) {
  if (host == "localhost" || host == "::1") return true;
  in_addr a{};
  const std::string h(host);
  return inet_pton(AF_INET, h.c_str(), &a) == 1 && (ntohl(a.s_addr) >> 24) == 127;
}

Status ParseHostPort(std::string_view text, std::string* host, uint16_t* port) {
  size_t colon = text.rfind(':');
  if (colon == std::string_view::npos || colon == 0 || colon + 1 == text.size()) {
    return InvalidArgumentError("invalid address '" + std::string(text) + "' (expected host:port)");
  }
  std::string_view h = text.substr(0, colon);
  if (h.size() >= 2 && h.front() == '[' && h.back() == ']') h = h.substr(1, h.size() - 2);
  std::string_view p = text.substr(colon + 1);
  unsigned value = 0;
  auto [ptr, ec] = std::from_chars(p.data(), p.data() + p.size(), value);
  if (ec != std::errc() || ptr != p.data() + p.size() || value > 65535) {
    return InvalidArgumentError("invalid port in '" + std::string(text) + "'");
  }
  *host = std::string(h);
  *port = static_cast<uint16_t>(value);
  return Status::Ok();
}

StatusOr<std::unique_ptr<Stream>> ConnectTcp(std::string_view host_port,
                                             std::chrono::milliseconds timeout) {
  std::string host;
  uint16_t port = 0;
  CAIRN_RETURN_IF_ERROR(ParseHostPort(host_port, &host, &port));
  CAIRN_ASSIGN_OR_RETURN(addrinfo * res, Resolve(host, port, false));
  Status last = UnavailableError("no address for " + std::string(host_port));
  for (addrinfo* ai = res; ai != nullptr; ai = ai->ai_next) {
    int fd = socket(ai->ai_family, ai->ai_socktype | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    if (fd < 0) {
      last = SocketError(errno, "socket for", host_port);
      continue;
    }
    int rc = connect(fd, ai->ai_addr, ai->ai_addrlen);
    if (rc < 0 && errno == EINPROGRESS) {
      pollfd pfd{fd, POLLOUT, 0};
      rc = poll(&pfd, 1, static_cast<int>(timeout.count()));
      if (rc == 0) {
        close(fd);
        last = DeadlineExceededError("connect to " + std::string(host_port) + " timed out");
        continue;
      }
      int err = 0;
      socklen_t len = sizeof(err);
      getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len);
      rc = err == 0 ? 0 : -1;
      errno = err;
    }
    if (rc < 0) {
      last = SocketError(errno, "connect to", host_port);
      close(fd);
      continue;
    }
    int flags = fcntl(fd, F_GETFL);
    fcntl(fd, F_SETFL, flags & ~O_NONBLOCK);
    freeaddrinfo(res);
    return std::unique_ptr<Stream>(new TcpStream(fd, std::string(host_port)));
  }
  freeaddrinfo(res);
  return last;
}

StatusOr<std::unique_ptr<Listener>> Listener::Bind(const std::string& host, uint16_t port) {
  CAIRN_ASSIGN_OR_RETURN(addrinfo * res, Resolve(host, port, true));
  int fd = socket(res->ai_family, res->ai_socktype | SOCK_CLOEXEC, 0);
  if (fd < 0) {
    freeaddrinfo(res);
    return SocketError(errno, "socket for", host);
  }
  int one = 1;
  setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
  if (bind(fd, res->ai_addr, res->ai_addrlen) < 0 || listen(fd, 1024) < 0) {
    int err = errno;
    freeaddrinfo(res);
    close(fd);
    std::string where = host + ":" + std::to_string(port);
    if (err == EACCES) return PermissionDeniedError("cannot listen on " + where);
    return UnavailableError("cannot listen on " + where + ": " + std::strerror(err));
  }
  freeaddrinfo(res);
  sockaddr_storage ss{};
  socklen_t len = sizeof(ss);
  getsockname(fd, reinterpret_cast<sockaddr*>(&ss), &len);
  uint16_t bound = ss.ss_family == AF_INET ? ntohs(reinterpret_cast<sockaddr_in*>(&ss)->sin_port)
                                           : ntohs(reinterpret_cast<sockaddr_in6*>(&ss)->sin6_port);
  return std::unique_ptr<Listener>(new Listener(fd, bound));
}

Listener::~Listener() {
  Shutdown();
  close(fd_);
}

StatusOr<std::unique_ptr<Stream>> Listener::Accept() {
  while (true) {
    sockaddr_storage ss{};
    socklen_t len = sizeof(ss);
    int fd = accept4(fd_, reinterpret_cast<sockaddr*>(&ss), &len, SOCK_CLOEXEC);
    if (fd >= 0) return std::unique_ptr<Stream>(new TcpStream(fd, FormatPeer(ss)));
    if (errno == EINTR || errno == ECONNABORTED) continue;
    if (errno == EMFILE || errno == ENFILE) {
      usleep(10000);  // Out of descriptors: back off instead of spinning.
      return UnavailableError("accept: out of file descriptors");
    }
    return UnavailableError(std::string("listener closed: ") + std::strerror(errno));
  }
}

void Listener::Shutdown() { shutdown(fd_, SHUT_RDWR); }

StatusOr<uint16_t> PickFreeLoopbackPort() {
  CAIRN_ASSIGN_OR_RETURN(std::unique_ptr<Listener> probe, Listener::Bind("127.0.0.1", 0));
  return probe->port();
}

}  // namespace cairn::net
