#include "ufs_s3/s3rver_process.h"

#include "net/stream.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>

#include "ufs/curl_pool.h"

#ifndef CAIRN_SOURCE_DIR
#error "CAIRN_SOURCE_DIR must be defined to the repository root"
#endif

namespace cairn::testing {
namespace {

constexpr auto kStartTimeout = std::chrono::seconds(30);

std::string FindOnPath(const std::string& name) {
  const char* path = std::getenv("PATH");
  std::stringstream dirs(path != nullptr ? path : "/usr/local/bin:/usr/bin:/bin");
  std::string dir;
  while (std::getline(dirs, dir, ':')) {
    std::string candidate = (dir.empty() ? "." : dir) + "/" + name;
    if (::access(candidate.c_str(), X_OK) == 0) return candidate;
  }
  return "";
}

bool PortAnswers(int port) {
  int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return false;
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(port));
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  bool ok = ::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0;
  ::close(fd);
  return ok;
}

std::string ReadFile(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

}  // namespace

StatusOr<int> PickFreePort() {
  CAIRN_ASSIGN_OR_RETURN(uint16_t port, net::PickFreeLoopbackPort());
  return static_cast<int>(port);
}

StatusOr<std::unique_ptr<S3rverProcess>> S3rverProcess::Start(
    const std::vector<std::string>& buckets) {
  const std::string script = std::string(CAIRN_SOURCE_DIR) + "/node_modules/s3rver/bin/s3rver.js";
  const std::string node = FindOnPath("node");
  if (node.empty()) {
    return FailedPreconditionError("node is not on PATH; install Node.js and run `npm ci` in " +
                                   std::string(CAIRN_SOURCE_DIR));
  }
  if (::access(script.c_str(), R_OK) != 0) {
    return FailedPreconditionError(script + " is missing: run `npm ci` in " +
                                   std::string(CAIRN_SOURCE_DIR) +
                                   " to install the test S3 server (s3rver)");
  }
  const char* tmp = std::getenv("TMPDIR");
  std::string tmpl = std::string(tmp != nullptr ? tmp : "/tmp") + "/cairn-s3rver-XXXXXX";
  if (::mkdtemp(tmpl.data()) == nullptr) return ErrnoToStatus(errno, "mkdtemp " + tmpl);
  const std::string dir = tmpl;
  const std::string data_dir = dir + "/data";
  const std::string log_path = dir + "/s3rver.log";
  std::filesystem::create_directories(data_dir);
  CAIRN_ASSIGN_OR_RETURN(int port, PickFreePort());
  const std::string port_text = std::to_string(port);
  // Everything the child needs is built before fork(): after it, only async-signal-safe calls.
  std::vector<std::string> env_strings = {"NODE_OPTIONS=--openssl-legacy-provider"};
  for (char** e = environ; *e != nullptr; ++e) {
    if (std::strncmp(*e, "NODE_OPTIONS=", 13) != 0) env_strings.emplace_back(*e);
  }
  std::vector<char*> envp;
  for (std::string& e : env_strings) envp.push_back(e.data());
  envp.push_back(nullptr);
  const char* argv[] = {node.c_str(), script.c_str(),       "-d",   data_dir.c_str(),
                        "-a",         "127.0.0.1",          "-p",   port_text.c_str(),
                        "-s",         "--no-vhost-buckets", nullptr};

  pid_t pid = ::fork();
  if (pid < 0) return ErrnoToStatus(errno, "fork");
  if (pid == 0) {
    // Child: never outlive the test process, log to a file, exec node.
    ::prctl(PR_SET_PDEATHSIG, SIGKILL);
    int log = ::open(log_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (log >= 0) {
      ::dup2(log, STDOUT_FILENO);
      ::dup2(log, STDERR_FILENO);
    }
    ::execve(node.c_str(), const_cast<char* const*>(argv), envp.data());
    ::_exit(127);
  }
  std::unique_ptr<S3rverProcess> server(new S3rverProcess(pid, port, dir));
  auto deadline = std::chrono::steady_clock::now() + kStartTimeout;
  while (!PortAnswers(port)) {
    int wstatus = 0;
    if (::waitpid(pid, &wstatus, WNOHANG) == pid) {
      server->pid_ = -1;
      return UnavailableError("s3rver exited during start-up (status " + std::to_string(wstatus) +
                              "); log:\n" + server->Log());
    }
    if (std::chrono::steady_clock::now() > deadline) {
      return UnavailableError("s3rver did not answer on port " + port_text +
                              " within 30 s; log:\n" + server->Log());
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  for (const std::string& bucket : buckets) CAIRN_RETURN_IF_ERROR(server->CreateBucket(bucket));
  return server;
}

S3rverProcess::~S3rverProcess() {
  if (pid_ > 0) {
    ::kill(pid_, SIGTERM);
    auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(2);
    int wstatus = 0;
    while (::waitpid(pid_, &wstatus, WNOHANG) == 0) {
      if (std::chrono::steady_clock::now() > deadline) {
        ::kill(pid_, SIGKILL);
        ::waitpid(pid_, &wstatus, 0);
        break;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
  }
  std::error_code ec;
  std::filesystem::remove_all(dir_, ec);
}

std::string S3rverProcess::endpoint() const { return "http://127.0.0.1:" + std::to_string(port_); }

ufs::UfsOptions S3rverProcess::Options() const {
  ufs::UfsOptions o;
  o.endpoint = endpoint();
  o.region = "us-east-1";
  o.access_key = "S3RVER";
  o.secret_key = "S3RVER";
  o.path_style = true;
  o.max_retries = 2;
  o.connect_timeout_ms = 2000;
  o.request_timeout_ms = 20000;
  o.max_connections = 8;
  return o;
}

Status S3rverProcess::CreateBucket(const std::string& bucket) {
  ufs::s3::HttpClientOptions http_options;
  http_options.max_connections = 1;
  ufs::s3::HttpClient client(http_options);
  ufs::s3::HttpRequest req;
  req.method = "PUT";
  req.url = endpoint() + "/" + bucket;
  req.timeout_ms = 10000;
  ufs::s3::TransportError transport;
  CAIRN_ASSIGN_OR_RETURN(ufs::s3::HttpResponse resp, client.Perform(req, &transport));
  if (resp.status != 200 && resp.status != 409) {
    return UnavailableError("creating bucket " + bucket + " answered HTTP " +
                            std::to_string(resp.status) + ": " + resp.body);
  }
  return Status::Ok();
}

std::string S3rverProcess::Log() const { return ReadFile(dir_ + "/s3rver.log"); }

}  // namespace cairn::testing
