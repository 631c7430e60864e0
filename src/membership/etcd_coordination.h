// EtcdCoordination: Coordination over etcd v3's JSON gateway (HTTP/1.1 + JSON, no gRPC
// dependency), with libcurl.
//
// Requests: unary POSTs to /v3/kv/{put,range,deleterange,txn} and /v3/lease/{grant,keepalive,
// revoke}; CompareAndSwap is one txn (compare MOD == expected, then put). Endpoints are tried in
// order starting from the last one that answered; the client fails over to the next only when a
// connection could not be made (so a request is never sent twice), and returns Unavailable when
// none could be reached or a request timed out.
//
// Watches: one thread and one streaming POST to /v3/watch per watch, parsing the newline-delimited
// JSON replies. When the stream breaks (etcd restarted, endpoint down) the thread reconnects with
// backoff, resuming at the revision after the last one delivered, so callers see no gap and no
// duplicate. A half-open connection (network partition without RST) is not detected; etcd's
// process death and restarts are.
//
// Replies are untrusted input: one of an unexpected shape is Internal (a watch delivers it as a
// final update), never an exception; bodies are buffered only up to the EtcdOptions caps.
//
// Thread-safety: thread-safe. WatchHandles must be destroyed before this object.
#ifndef CAIRN_MEMBERSHIP_ETCD_COORDINATION_H_
#define CAIRN_MEMBERSHIP_ETCD_COORDINATION_H_

#include <atomic>
#include <chrono>
#include <cstddef>
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "common/thread_annotations.h"
#include "membership/coordination.h"

namespace cairn::membership {

// TLS to etcd (https:// endpoints; docs/security.md): the CAs that sign etcd's certificate
// (empty: the system's bundle) and, for an etcd that requires client certificates
// (--client-cert-auth), this process's certificate and key.
struct EtcdTls {
  std::string ca_file;
  std::string cert_file;
  std::string key_file;
};

struct EtcdOptions {
  // Comma-separated base URLs: "http://127.0.0.1:2379,http://10.0.0.2:2379".
  std::string endpoints = "http://127.0.0.1:2379";
  EtcdTls tls;
  // Why plaintext http:// to an etcd beyond loopback is acceptable (logged); empty: Create
  // refuses such an endpoint (etcd holds the mount table, the policy and the worker list).
  std::string insecure_plaintext;
  long connect_timeout_ms = 1000;
  long request_timeout_ms = 5000;
  // Watch reconnect backoff: doubles from initial to max while etcd cannot be reached.
  std::chrono::milliseconds watch_backoff_initial{50};
  std::chrono::milliseconds watch_backoff_max{2000};
  // Caps on what one reply may make this process buffer. A larger unary reply (a range) fails
  // with ResourceExhausted; a longer watch-stream line (one event) ends the watch with a final
  // ResourceExhausted update (skipping the event would leave a gap).
  size_t max_reply_bytes = size_t{64} << 20;
  size_t max_watch_line_bytes = size_t{16} << 20;
};

class EtcdCoordination : public Coordination {
 public:
  // InvalidArgument if the endpoint list is empty, an entry is not http(s)://host:port, or an
  // http:// entry names a host beyond loopback without options.insecure_plaintext.
  // Does not contact etcd (the first call does).
  static StatusOr<std::unique_ptr<EtcdCoordination>> Create(EtcdOptions options);
  ~EtcdCoordination() override;
  EtcdCoordination(const EtcdCoordination&) = delete;
  EtcdCoordination& operator=(const EtcdCoordination&) = delete;

  StatusOr<int64_t> Put(std::string_view key, std::string_view value,
                        int64_t lease_id = 0) override;
  StatusOr<KeyValue> Get(std::string_view key) override;
  StatusOr<RangeResult> GetPrefix(std::string_view prefix) override;
  StatusOr<bool> Delete(std::string_view key) override;
  StatusOr<int64_t> CompareAndSwap(std::string_view key, int64_t expected_mod_revision,
                                   std::string_view value, int64_t lease_id = 0) override;
  StatusOr<int64_t> GrantLease(std::chrono::seconds ttl) override;
  Status KeepAlive(int64_t lease_id) override;
  Status RevokeLease(int64_t lease_id) override;
  StatusOr<std::unique_ptr<WatchHandle>> Watch(std::string_view prefix, int64_t start_revision,
                                               WatchCallback callback) override;

  // The endpoints in failover order, starting with the preferred one (for the watch threads).
  std::vector<std::string> EndpointsInOrder() const;
  // Marks `endpoint` as the one to try first (it just answered).
  void Prefer(const std::string& endpoint);
  const EtcdOptions& options() const { return options_; }

 private:
  class Stream;
  EtcdCoordination(EtcdOptions options, std::vector<std::string> endpoints);

  // POSTs `body` to `path` on the first reachable endpoint; returns the parsed JSON reply of a
  // 200, or the error mapped by ErrorReplyToStatus; Unavailable if nobody answered.
  // ResourceExhausted if the reply is larger than options_.max_reply_bytes.
  StatusOr<nlohmann::json> Post(const std::string& path, const nlohmann::json& body,
                                std::string_view context);

  const EtcdOptions options_;
  const std::vector<std::string> endpoints_;
  std::atomic<size_t> preferred_{0};
  Mutex pool_mu_;
  std::vector<void*> idle_handles_ GUARDED_BY(pool_mu_);  // CURL*, reused for keep-alive.
};

}  // namespace cairn::membership

#endif  // CAIRN_MEMBERSHIP_ETCD_COORDINATION_H_
