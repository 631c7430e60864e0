#include "ufs/fake_http_server.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cctype>
#include <cerrno>

namespace cairn::ufs::testing {
namespace {

bool SendAll(int fd, const std::string& data) {
  size_t done = 0;
  while (done < data.size()) {
    ssize_t n = ::send(fd, data.data() + done, data.size() - done, MSG_NOSIGNAL);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    done += static_cast<size_t>(n);
  }
  return true;
}

// Reads more bytes into `buf`; false on EOF or error.
bool ReadMore(int fd, std::string& buf) {
  char chunk[16384];
  while (true) {
    ssize_t n = ::recv(fd, chunk, sizeof(chunk), 0);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    buf.append(chunk, static_cast<size_t>(n));
    return true;
  }
}

const char* Reason(int status) {
  switch (status) {
    case 200:
      return "OK";
    case 204:
      return "No Content";
    case 206:
      return "Partial Content";
    case 400:
      return "Bad Request";
    case 403:
      return "Forbidden";
    case 404:
      return "Not Found";
    case 412:
      return "Precondition Failed";
    case 416:
      return "Range Not Satisfiable";
    case 500:
      return "Internal Server Error";
    case 503:
      return "Service Unavailable";
    default:
      return "Status";
  }
}

}  // namespace

StatusOr<std::unique_ptr<FakeHttpServer>> FakeHttpServer::Start(Handler handler) {
  int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return ErrnoToStatus(errno, "socket");
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof(addr);
  if (::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0 || ::listen(fd, 64) != 0 ||
      ::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) != 0) {
    int err = errno;
    ::close(fd);
    return ErrnoToStatus(err, "listen on 127.0.0.1:0");
  }
  std::unique_ptr<FakeHttpServer> server(
      new FakeHttpServer(fd, ntohs(addr.sin_port), std::move(handler)));
  server->acceptor_ = std::thread([s = server.get()] { s->AcceptLoop(); });
  return server;
}

FakeHttpServer::~FakeHttpServer() {
  std::vector<std::thread> threads;
  {
    MutexLock lock(&mu_);
    stopping_ = true;
    for (int fd : conn_fds_) ::shutdown(fd, SHUT_RDWR);
  }
  ::shutdown(listen_fd_, SHUT_RDWR);
  acceptor_.join();
  ::close(listen_fd_);
  {
    MutexLock lock(&mu_);
    threads.swap(conn_threads_);
  }
  for (auto& t : threads) t.join();
  MutexLock lock(&mu_);
  // Closed only now: closing earlier could let a reused fd number be shut down above.
  for (int fd : conn_fds_) ::close(fd);
}

std::vector<RecordedRequest> FakeHttpServer::requests() const {
  MutexLock lock(&mu_);
  return requests_;
}

std::string FakeHttpServer::Response(int status, const std::map<std::string, std::string>& headers,
                                     const std::string& body, bool head) {
  std::string out = "HTTP/1.1 " + std::to_string(status) + " " + Reason(status) + "\r\n";
  for (const auto& [name, value] : headers) out += name + ": " + value + "\r\n";
  out += "Content-Length: " + std::to_string(body.size()) + "\r\n\r\n";
  if (!head) out += body;
  return out;
}

void FakeHttpServer::AcceptLoop() {
  while (true) {
    int fd = ::accept4(listen_fd_, nullptr, nullptr, SOCK_CLOEXEC);
    if (fd < 0) {
      if (errno == EINTR) continue;
      return;  // Listening socket shut down.
    }
    MutexLock lock(&mu_);
    if (stopping_) {
      ::close(fd);
      return;
    }
    conn_fds_.push_back(fd);
    conn_threads_.emplace_back([this, fd] { Serve(fd); });
  }
}

void FakeHttpServer::Serve(int fd) {
  std::string buf;
  while (true) {
    size_t end;
    while ((end = buf.find("\r\n\r\n")) == std::string::npos) {
      if (!ReadMore(fd, buf)) return;  // The destructor closes the fd.
    }
    RecordedRequest req;
    std::string head = buf.substr(0, end);
    buf.erase(0, end + 4);
    size_t line_end = head.find("\r\n");
    std::string request_line = head.substr(0, line_end);
    size_t sp1 = request_line.find(' ');
    size_t sp2 = request_line.rfind(' ');
    req.method = request_line.substr(0, sp1);
    std::string target = request_line.substr(sp1 + 1, sp2 - sp1 - 1);
    size_t q = target.find('?');
    req.path = target.substr(0, q);
    if (q != std::string::npos) req.query = target.substr(q + 1);
    size_t pos = line_end == std::string::npos ? head.size() : line_end + 2;
    while (pos < head.size()) {
      size_t eol = head.find("\r\n", pos);
      if (eol == std::string::npos) eol = head.size();
      std::string line = head.substr(pos, eol - pos);
      pos = eol + 2;
      size_t colon = line.find(':');
      if (colon == std::string::npos) continue;
      std::string name = line.substr(0, colon);
      for (char& c : name) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
      size_t v = line.find_first_not_of(' ', colon + 1);
      req.headers[name] = v == std::string::npos ? "" : line.substr(v);
    }
    size_t content_length = 0;
    if (auto it = req.headers.find("content-length"); it != req.headers.end()) {
      content_length = std::stoul(it->second);
    }
    if (req.Header("expect") == "100-continue" && content_length > 0) {
      if (!SendAll(fd, "HTTP/1.1 100 Continue\r\n\r\n")) return;
    }
    while (buf.size() < content_length) {
      if (!ReadMore(fd, buf)) return;
    }
    req.body = buf.substr(0, content_length);
    buf.erase(0, content_length);
    {
      MutexLock lock(&mu_);
      requests_.push_back(req);
    }
    const std::string response = handler_(req);
    if (response.empty()) {  // The answer is lost: the connection drops after the request.
      ::shutdown(fd, SHUT_RDWR);
      return;
    }
    if (!SendAll(fd, response)) return;
  }
}

}  // namespace cairn::ufs::testing
