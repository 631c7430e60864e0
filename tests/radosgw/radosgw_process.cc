#include "radosgw/radosgw_process.h"

#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <random>

#include "net/stream.h"
#include "ufs/curl_pool.h"
#include "ufs/s3_digest.h"

#ifndef CAIRN_SOURCE_DIR
#error "CAIRN_SOURCE_DIR must be defined to the repository root"
#endif

namespace cairn::testing {
namespace {

const std::string kScript = std::string(CAIRN_SOURCE_DIR) + "/tests/radosgw/radosgw.sh";

std::string RandomAlnum(size_t n) {
  static constexpr char kChars[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789";
  std::random_device rd;
  std::string out;
  for (size_t i = 0; i < n; ++i) out += kChars[rd() % (sizeof(kChars) - 1)];
  return out;
}

// Runs `command` with a shell; returns its exit status and combined output.
std::pair<int, std::string> RunCommand(const std::string& command) {
  std::string output;
  FILE* pipe = ::popen((command + " 2>&1").c_str(), "r");
  if (pipe == nullptr) return {-1, "popen failed"};
  char buf[4096];
  size_t n;
  while ((n = std::fread(buf, 1, sizeof(buf), pipe)) > 0) output.append(buf, n);
  int status = ::pclose(pipe);
  return {WIFEXITED(status) ? WEXITSTATUS(status) : -1, output};
}

}  // namespace

StatusOr<std::unique_ptr<RadosgwProcess>> RadosgwProcess::Start(
    const std::vector<std::string>& buckets) {
  if (RunCommand("command -v radosgw && command -v ceph-osd").first != 0) {
    return FailedPreconditionError(
        "Ceph's radosgw is not installed: run scripts/install-deps.sh (Debian packages ceph-mon "
        "ceph-osd ceph-mgr radosgw ceph-common)");
  }
  const char* tmp = std::getenv("TMPDIR");
  std::string tmpl = std::string(tmp != nullptr ? tmp : "/tmp") + "/cairn-rgw-XXXXXX";
  if (::mkdtemp(tmpl.data()) == nullptr) return ErrnoToStatus(errno, "mkdtemp " + tmpl);
  CAIRN_ASSIGN_OR_RETURN(uint16_t port, net::PickFreeLoopbackPort());
  std::unique_ptr<RadosgwProcess> rgw(
      new RadosgwProcess(port, tmpl, "AK" + RandomAlnum(18), RandomAlnum(40)));
  auto [rc, output] = RunCommand("timeout 90 " + kScript + " start " + rgw->dir_ + " " +
                                 std::to_string(port) + " " + rgw->access_ + " " + rgw->secret_);
  if (rc != 0) {
    return UnavailableError("radosgw did not start (exit " + std::to_string(rc) + "): " + output);
  }
  for (const std::string& bucket : buckets) CAIRN_RETURN_IF_ERROR(rgw->CreateBucket(bucket));
  return rgw;
}

RadosgwProcess::~RadosgwProcess() {
  RunCommand(kScript + " stop " + dir_);
  std::error_code ec;
  std::filesystem::remove_all(dir_, ec);
}

ufs::UfsOptions RadosgwProcess::Options() const {
  ufs::UfsOptions o;
  o.endpoint = endpoint();
  o.region = "us-east-1";
  o.access_key = access_;
  o.secret_key = secret_;
  o.path_style = true;
  o.max_retries = 2;
  o.connect_timeout_ms = 2000;
  o.request_timeout_ms = 20000;
  o.max_connections = 8;
  return o;
}

Status RadosgwProcess::CreateBucket(const std::string& bucket) {
  ufs::s3::HttpClientOptions http_options;
  http_options.max_connections = 1;
  http_options.access_key = access_;
  http_options.secret_key = secret_;
  ufs::s3::HttpClient client(http_options);
  ufs::s3::HttpRequest req;
  req.method = "PUT";
  req.url = endpoint() + "/" + bucket;
  req.headers.push_back("x-amz-content-sha256: " + std::string(ufs::s3::kEmptySha256));
  req.timeout_ms = 10000;
  ufs::s3::TransportError transport;
  CAIRN_ASSIGN_OR_RETURN(ufs::s3::HttpResponse resp, client.Perform(req, &transport));
  if (resp.status != 200 && resp.status != 409) {
    return UnavailableError("creating bucket " + bucket + " answered HTTP " +
                            std::to_string(resp.status) + ": " + resp.body);
  }
  return Status::Ok();
}

}  // namespace cairn::testing
