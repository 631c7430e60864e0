// RadosgwProcess: a throwaway Ceph object gateway (radosgw) on 127.0.0.1, for integration tests
// that need strict S3 behaviour s3rver lacks: real SigV4 verification, If-None-Match / If-Match
// on writes, multipart uploads with S3's ETags, AbortMultipartUpload.
//
// Start() runs tests/radosgw/radosgw.sh (one mon, mgr, memstore OSD and radosgw under a fresh
// temp folder; ~15 s), creates a user with random keys and the requested buckets. The destructor
// stops every daemon by its pid file and removes the folder. The daemons detach from the test
// process: a test binary killed before its destructor runs leaves them behind (scripts/test.sh
// stops leftovers). If Ceph is missing, Start() fails with a message telling to run
// scripts/install-deps.sh: tests must fail, not skip.
//
// Thread-safety: not thread-safe; one owner.
#ifndef CAIRN_TESTS_RADOSGW_RADOSGW_PROCESS_H_
#define CAIRN_TESTS_RADOSGW_RADOSGW_PROCESS_H_

#include <memory>
#include <string>
#include <vector>

#include "common/status.h"
#include "ufs/ufs.h"

namespace cairn::testing {

class RadosgwProcess {
 public:
  // FailedPrecondition if Ceph is not installed; Unavailable if the gateway does not come up
  // within 90 s (the script's output is in the message).
  static StatusOr<std::unique_ptr<RadosgwProcess>> Start(const std::vector<std::string>& buckets);
  ~RadosgwProcess();
  RadosgwProcess(const RadosgwProcess&) = delete;
  RadosgwProcess& operator=(const RadosgwProcess&) = delete;

  // "http://127.0.0.1:<port>".
  std::string endpoint() const { return "http://127.0.0.1:" + std::to_string(port_); }
  // UfsOptions with this gateway's endpoint and keys, few retries and short timeouts.
  ufs::UfsOptions Options() const;
  // Creates a bucket (signed PUT). OK if it exists already.
  Status CreateBucket(const std::string& bucket);

 private:
  RadosgwProcess(int port, std::string dir, std::string access, std::string secret)
      : port_(port), dir_(std::move(dir)), access_(std::move(access)), secret_(std::move(secret)) {}

  int port_;
  std::string dir_;
  std::string access_;
  std::string secret_;
};

}  // namespace cairn::testing

#endif  // CAIRN_TESTS_RADOSGW_RADOSGW_PROCESS_H_
