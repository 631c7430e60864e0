#include "testing/raw_http_client.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include <cctype>

namespace cairn::testing {

RawHttpClient::RawHttpClient(uint16_t port, const std::string& source_ip) {
  fd_ = ::socket(AF_INET, SOCK_STREAM, 0);
  timeval timeout{5, 0};
  ::setsockopt(fd_, SOL_SOCKET, SO_RCVTIMEO, &timeout, sizeof(timeout));
  if (!source_ip.empty()) {
    sockaddr_in local{};
    local.sin_family = AF_INET;
    ::inet_pton(AF_INET, source_ip.c_str(), &local.sin_addr);
    if (::bind(fd_, reinterpret_cast<sockaddr*>(&local), sizeof(local)) != 0) return;
  }
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(port);
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  connected_ = ::connect(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0;
}

RawHttpClient::~RawHttpClient() { ::close(fd_); }

bool RawHttpClient::Send(const std::string& data) {
  return ::send(fd_, data.data(), data.size(), MSG_NOSIGNAL) == static_cast<ssize_t>(data.size());
}

std::optional<RawHttpResponse> RawHttpClient::Read(bool head_request) {
  size_t head_end;
  while ((head_end = buffer_.find("\r\n\r\n")) == std::string::npos) {
    if (!Fill()) return std::nullopt;
  }
  RawHttpResponse response;
  const std::string head = buffer_.substr(0, head_end);
  if (head.size() < 12 || head.compare(0, 9, "HTTP/1.1 ") != 0) return std::nullopt;
  response.status = std::stoi(head.substr(9, 3));
  size_t pos = head.find("\r\n");
  while (pos != std::string::npos) {
    const size_t next = head.find("\r\n", pos + 2);
    const std::string line =
        head.substr(pos + 2, next == std::string::npos ? next : next - pos - 2);
    const size_t colon = line.find(':');
    if (colon == std::string::npos) return std::nullopt;
    std::string name = line.substr(0, colon);
    for (char& c : name) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    const size_t value = line.find_first_not_of(' ', colon + 1);
    response.headers[name] = value == std::string::npos ? "" : line.substr(value);
    pos = next;
  }
  size_t length = 0;
  if (!head_request) {
    auto it = response.headers.find("content-length");
    if (it == response.headers.end()) return std::nullopt;
    length = std::stoul(it->second);
  }
  buffer_.erase(0, head_end + 4);
  while (buffer_.size() < length) {
    if (!Fill()) return std::nullopt;
  }
  response.body = buffer_.substr(0, length);
  buffer_.erase(0, length);
  return response;
}

bool RawHttpClient::ClosedByPeer() {
  char c;
  return buffer_.empty() && ::recv(fd_, &c, 1, 0) == 0;
}

bool RawHttpClient::Fill() {
  char chunk[4096];
  const ssize_t n = ::recv(fd_, chunk, sizeof(chunk), 0);
  if (n <= 0) return false;
  buffer_.append(chunk, static_cast<size_t>(n));
  return true;
}

std::string HttpGet(const std::string& path, const std::string& extra_headers) {
  return "GET " + path + " HTTP/1.1\r\nHost: localhost\r\n" + extra_headers + "\r\n";
}

}  // namespace cairn::testing
