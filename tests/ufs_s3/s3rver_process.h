// S3rverProcess: a real S3-compatible server (s3rver, from node_modules) in a child process, for
// integration tests of anything that talks S3.
//
// Start() runs `node <source>/node_modules/s3rver/bin/s3rver.js` with
// NODE_OPTIONS=--openssl-legacy-provider (Node >= 17 otherwise breaks s3rver's paginated
// ListObjectsV2), on 127.0.0.1 and a free port, storing into a fresh temp folder; waits until it
// answers; creates the requested buckets. The destructor stops it (SIGTERM, then SIGKILL after
// 2 s, by PID) and removes the folder. Credentials: S3RVER / S3RVER (s3rver does not verify
// signatures). If node or s3rver is missing, Start() fails with a message telling to run
// `npm ci` in the source folder: tests must fail, not skip.
//
// Known s3rver gaps that tests must not rely on: it ignores If-Match, mishandles suffix ranges
// ("bytes=-N"), can miss a common prefix whose only children are deeper folders, and serves one
// request at a time.
//
// Thread-safety: not thread-safe; one owner.
#ifndef CAIRN_TESTS_UFS_S3_S3RVER_PROCESS_H_
#define CAIRN_TESTS_UFS_S3_S3RVER_PROCESS_H_

#include <sys/types.h>

#include <memory>
#include <string>
#include <vector>

#include "common/status.h"
#include "ufs/ufs.h"

namespace cairn::testing {

class S3rverProcess {
 public:
  // Starts the server and creates `buckets`. FailedPrecondition if node or s3rver is missing,
  // Unavailable if it does not answer within 30 s (its log is included in the message).
  static StatusOr<std::unique_ptr<S3rverProcess>> Start(const std::vector<std::string>& buckets);
  ~S3rverProcess();
  S3rverProcess(const S3rverProcess&) = delete;
  S3rverProcess& operator=(const S3rverProcess&) = delete;

  // "http://127.0.0.1:<port>".
  std::string endpoint() const;
  int port() const { return port_; }
  // UfsOptions pointing at this server with its credentials, few retries and short timeouts.
  ufs::UfsOptions Options() const;
  // Creates a bucket (PUT on the bucket). OK if it exists already.
  Status CreateBucket(const std::string& bucket);
  // The server's combined stdout/stderr so far (for failure messages).
  std::string Log() const;

 private:
  S3rverProcess(pid_t pid, int port, std::string dir) : pid_(pid), port_(port), dir_(dir) {}

  pid_t pid_;
  int port_;
  std::string dir_;  // Temp folder: data/ for the server, s3rver.log.
};

// A TCP port on 127.0.0.1 that was free a moment ago (bind to port 0, read it back, close).
StatusOr<int> PickFreePort();

}  // namespace cairn::testing

#endif  // CAIRN_TESTS_UFS_S3_S3RVER_PROCESS_H_
