#include "membership/etcd_process.h"

#include "net/stream.h"

#include <arpa/inet.h>
#include <curl/curl.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>
#include <vector>

namespace cairn::membership::testing {
namespace {

constexpr const char* kEtcdBinary = "/usr/bin/etcd";

size_t Discard(char*, size_t size, size_t n, void*) { return size * n; }

bool Healthy(const std::string& endpoint) {
  CURL* h = curl_easy_init();
  if (h == nullptr) return false;
  const std::string url = endpoint + "/health";
  curl_easy_setopt(h, CURLOPT_URL, url.c_str());
  curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
  curl_easy_setopt(h, CURLOPT_TIMEOUT_MS, 500L);
  curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, &Discard);
  long status = 0;
  bool ok = curl_easy_perform(h) == CURLE_OK &&
            curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &status) == CURLE_OK && status == 200;
  curl_easy_cleanup(h);
  return ok;
}

}  // namespace

StatusOr<std::unique_ptr<EtcdProcess>> EtcdProcess::Start() {
  if (::access(kEtcdBinary, X_OK) != 0) {
    return FailedPreconditionError(std::string(kEtcdBinary) +
                                   " is missing: run scripts/install-deps.sh (package "
                                   "etcd-server) to install the etcd used by the tests");
  }
  const char* tmp = std::getenv("TMPDIR");
  std::string tmpl = std::string(tmp != nullptr ? tmp : "/tmp") + "/cairn-etcd-XXXXXX";
  if (::mkdtemp(tmpl.data()) == nullptr) return ErrnoToStatus(errno, "mkdtemp " + tmpl);
  CAIRN_ASSIGN_OR_RETURN(uint16_t client_port, net::PickFreeLoopbackPort());
  CAIRN_ASSIGN_OR_RETURN(uint16_t peer_port, net::PickFreeLoopbackPort());
  if (peer_port == client_port) {
    CAIRN_ASSIGN_OR_RETURN(peer_port, net::PickFreeLoopbackPort());
  }
  std::unique_ptr<EtcdProcess> etcd(new EtcdProcess(tmpl, client_port, peer_port));
  CAIRN_RETURN_IF_ERROR(etcd->Launch());
  return etcd;
}

Status EtcdProcess::Launch() {
  const std::string client = endpoint();
  const std::string peer = "http://127.0.0.1:" + std::to_string(peer_port_);
  const std::string data = dir_ + "/data";
  const std::string cluster = "default=" + peer;
  const std::string log_path = dir_ + "/etcd.log";
  std::vector<std::string> args = {kEtcdBinary, "--data-dir",
                                   data,        "--listen-client-urls",
                                   client,      "--advertise-client-urls",
                                   client,      "--listen-peer-urls",
                                   peer,        "--initial-advertise-peer-urls",
                                   peer,        "--initial-cluster",
                                   cluster,     "--heartbeat-interval",
                                   "10",        "--election-timeout",
                                   "100"};
  std::vector<char*> argv;
  for (std::string& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  pid_t pid = ::fork();
  if (pid < 0) return ErrnoToStatus(errno, "fork");
  if (pid == 0) {
    ::prctl(PR_SET_PDEATHSIG, SIGKILL);  // Never outlive the test process.
    int log = ::open(log_path.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0644);
    if (log >= 0) {
      ::dup2(log, STDOUT_FILENO);
      ::dup2(log, STDERR_FILENO);
    }
    ::execv(argv[0], argv.data());
    ::_exit(127);
  }
  pid_ = pid;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
  while (!Healthy(client)) {
    int wstatus = 0;
    if (::waitpid(pid_, &wstatus, WNOHANG) == pid_) {
      pid_ = -1;
      return UnavailableError("etcd exited during start-up; log:\n" + Log());
    }
    if (std::chrono::steady_clock::now() > deadline) {
      return UnavailableError("etcd not healthy within 20 s; log:\n" + Log());
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return Status::Ok();
}

EtcdProcess::~EtcdProcess() {
  Kill();
  std::error_code ec;
  std::filesystem::remove_all(dir_, ec);
}

void EtcdProcess::Kill() {
  if (pid_ <= 0) return;
  ::kill(pid_, SIGKILL);
  int wstatus = 0;
  ::waitpid(pid_, &wstatus, 0);
  pid_ = -1;
}

Status EtcdProcess::Restart() {
  Kill();
  return Launch();
}

std::string EtcdProcess::endpoint() const {
  return "http://127.0.0.1:" + std::to_string(client_port_);
}

std::string EtcdProcess::Log() const {
  std::ifstream in(dir_ + "/etcd.log");
  std::stringstream ss;
  ss << in.rdbuf();
  std::string s = ss.str();
  return s.size() > 4000 ? s.substr(s.size() - 4000) : s;
}

}  // namespace cairn::membership::testing
