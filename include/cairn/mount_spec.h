// MountSpec: one entry of the mount table (namespace path -> under-storage root).
#ifndef CAIRN_MOUNT_SPEC_H_
#define CAIRN_MOUNT_SPEC_H_

#include <chrono>
#include <map>
#include <string>

namespace cairn {

struct MountSpec {
  std::string path;  // "/bucket_a", or "/" for a single mount at the root.
  std::string uri;   // "s3://bucket-a/prefix" or "file:///data/lake".
  // Under-storage options by name: endpoint, region, access_key, secret_key, session_token,
  // profile, path_style ("true"/"false"), max_retries, connect_timeout_ms, request_timeout_ms,
  // max_concurrency and max_bandwidth (caps on this mount's source requests, per process).
  std::map<std::string, std::string> options;
  // How long stat results and listings are trusted before the source is asked again
  // (0 = ask on every open).
  std::chrono::microseconds metadata_ttl{std::chrono::seconds(60)};
  // How many workers cache each page of this mount (hot-data replication): reads are spread over
  // the first `replicas` workers the ring names for a page, and a page filled on one of them is
  // also loaded on the others, so losing a worker loses no cached data. 1..8.
  int replicas = 1;
  // Read-only (the default): writes through the mount are answered with EROFS. Otherwise
  // writes go through the path's worker (docs/write-path.md): write-through (close returns
  // once the object is in the source) unless write_back, where close returns once the file is
  // durable in the worker's journal and the upload continues in the background.
  bool read_only = true;
  bool write_back = false;  // Only with read_only false.
};

}  // namespace cairn

#endif  // CAIRN_MOUNT_SPEC_H_
