// Cairn configuration: one JSON file shared by workers and clients (docs/configuration.md).
//
//   {
//     "page_size": "1MiB",
//     "mounts": [ { "path": "/lake", "uri": "s3://bucket/prefix", "metadata_ttl": "60s",
//                   "options": { "endpoint": "http://127.0.0.1:9000", "region": "us-east-1" } } ],
//     "workers": [ "10.0.0.5:7070" ],
//     "worker_timeout": "5s",
//     "worker": { "id": "w1", "listen": "0.0.0.0:7070", "metrics_listen": "0.0.0.0:9100",
//                 "cache_dirs": [ { "path": "/nvme0/cairn", "capacity": "3TiB" } ],
//                 "eviction_policy": "lru" }
//   }
//
// Every problem is reported as InvalidArgument naming the offending field.
#ifndef CAIRN_CONFIG_CONFIG_H_
#define CAIRN_CONFIG_CONFIG_H_

#include <chrono>
#include <string>
#include <string_view>
#include <vector>

#include "cairn/client.h"
#include "common/status.h"

namespace cairn::config {

struct CacheDir {
  std::string path;
  uint64_t capacity_bytes = 0;
};

inline constexpr std::string_view kDefaultMetricsListen = "0.0.0.0:9100";

struct WorkerConfig {
  std::string id;  // Stable identity; default: hostname + listen port.
  std::string listen = "0.0.0.0:7070";
  // Empty = no HTTP endpoint. The default becomes 127.0.0.1:9100 on a worker that serves
  // plaintext on loopback (its metrics stay as private as its pages).
  std::string metrics_listen = std::string(kDefaultMetricsListen);
  std::vector<CacheDir> cache_dirs;
  std::string eviction_policy = "lru";
  // Why this worker may serve plaintext beyond loopback (docs/security.md); empty: it may not,
  // and without TLS it only listens on a loopback address.
  std::string insecure_plaintext;
  // The metrics endpoint (docs/security.md): HTTPS with the worker's certificate when the worker
  // has TLS, /metrics then needing a client certificate of the cluster's CA unless
  // `metrics_allow_anonymous`. Plaintext beyond loopback needs a reason: this one, or
  // `insecure_plaintext` on a worker without TLS.
  std::string metrics_insecure_plaintext;
  bool metrics_allow_anonymous = false;
  // Public keys (PEM files from `cairn token keygen`) that sign the tokens this worker accepts
  // (docs/security.md); several while a key is rotated. Empty: tokens are refused.
  std::vector<std::string> token_public_keys;
  // Cluster mode: the sources (URI prefixes) and S3 endpoints this worker agrees to read for
  // mounts from etcd (mount/source_allow_list.h); empty: any.
  std::vector<std::string> allowed_sources;
  std::vector<std::string> allowed_endpoints;
  // Caps on all of this worker's source requests together (0 = none): docs/ufs.md.
  int ufs_max_concurrency = 0;
  uint64_t ufs_max_bytes_per_second = 0;
  // Closed files of write-back mounts waiting for upload, all together, before closes wait and
  // then fail with ENOSPC (docs/write-path.md). 0: a quarter of the cache capacity.
  uint64_t write_back_max_pending_bytes = 0;
  // How long a closed write-back file waits before its upload starts (a rename in that time
  // moves it without an upload; `cairn sync` starts it at once). Negative: the default, 1 s.
  std::chrono::milliseconds write_back_delay{-1};
  // How long a file open for writing keeps its handle without a request from its client (a
  // client holding the file open sends one well within it); then the write is aborted.
  // Negative: the default, 3 minutes.
  std::chrono::milliseconds write_idle_timeout{-1};
};

struct Config {
  ClientOptions client;  // mounts, workers, page size, timeouts.
  WorkerConfig worker;
};

// Parses JSON text. InvalidArgument with the field name on any problem.
StatusOr<Config> ParseConfig(std::string_view json_text);
// Reads and parses a file; NotFound if it does not exist.
StatusOr<Config> LoadConfigFile(const std::string& path);

// "PATH=URI" (as given to --mount) -> MountSpec; InvalidArgument otherwise.
StatusOr<MountSpec> ParseMountFlag(std::string_view flag);
// A mount's write mode: "read-only" (the default), "through" (writes reach the source before
// close returns) or "back" (close returns once the file is in the worker's journal;
// docs/write-path.md). Sets spec->read_only and spec->write_back. InvalidArgument otherwise.
Status ApplyWriteMode(std::string_view mode, MountSpec* spec);
std::string_view WriteModeName(const MountSpec& spec);
// "DIR" or "DIR:SIZE" (as given to --cache-dir); `default_capacity` when no size is given.
StatusOr<CacheDir> ParseCacheDirFlag(std::string_view flag, uint64_t default_capacity);

}  // namespace cairn::config

#endif  // CAIRN_CONFIG_CONFIG_H_
