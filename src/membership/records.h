// The values Cairn stores in etcd (layout version 1, docs/etcd-layout.md): worker records under
// kWorkersPrefix and the whole mount table under the single key kMountTableKey.
//
// Encoding is UTF-8 JSON. Decoders ignore unknown fields (fields may be added within v1) and
// reject missing required fields, wrong types and out-of-range numbers with InvalidArgument;
// they never crash on bad input. Encoders never fail: strings that are not valid UTF-8 are
// replaced by U+FFFD, so writers validate first (ValidateWorkerRecord, ValidateMountForStore in
// mount_store.h) to make that impossible.
//
// Thread-safety: free functions over values; safe from any thread.
#ifndef CAIRN_MEMBERSHIP_RECORDS_H_
#define CAIRN_MEMBERSHIP_RECORDS_H_

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "cairn/mount_spec.h"
#include "common/status.h"

namespace cairn::membership {

inline constexpr std::string_view kWorkersPrefix = "/cairn/v1/workers/";
inline constexpr std::string_view kMountTableKey = "/cairn/v1/mounts";
// The "version" field of the mount-table document; a decoder refuses any other.
inline constexpr int kMountTableVersion = 1;

// One worker's registration: where clients reach it and how big its cache is.
struct WorkerRecord {
  std::string id;               // Stable worker id, see ValidateWorkerId.
  std::string address;          // "host:port" of the data service; required.
  std::string metrics_address;  // "host:port" of the metrics endpoint; may be empty.
  uint64_t capacity_bytes = 0;  // Cache capacity (placement weight).
  int64_t start_time_unix_ms = 0;
  bool metrics_tls = false;  // The metrics endpoint serves HTTPS only.

  bool operator==(const WorkerRecord&) const = default;
};

// OK if `id` matches [A-Za-z0-9._:-]{1,128}; InvalidArgument (naming the id) otherwise.
Status ValidateWorkerId(std::string_view id);

// OK if the id is valid and the address (and the metrics address, when set) is host:port: a
// host name, an IPv4 address or a bracketed IPv6 address, and a port 1-65535. DecodeWorkerRecord
// applies it too: a record that anyone wrote into etcd never makes a client dial, or the CLI
// fetch, a URL. InvalidArgument otherwise.
Status ValidateWorkerRecord(const WorkerRecord& record);

// Whether `s` is valid UTF-8 (JSON strings must be).
bool IsValidUtf8(std::string_view s);

// kWorkersPrefix + id. The id is not validated here.
std::string WorkerKey(std::string_view id);

// {"id":..,"address":..,"metrics_address":..,"metrics_tls":..,"capacity_bytes":..,
//  "start_time_unix_ms":..}.
std::string EncodeWorkerRecord(const WorkerRecord& record);

// Parses a worker record. Required: id (a valid worker id) and address (strings). Optional:
// metrics_address (string, default ""), metrics_tls (bool, default false), capacity_bytes
// (non-negative integer, default 0), start_time_unix_ms (integer, default 0). InvalidArgument
// otherwise.
StatusOr<WorkerRecord> DecodeWorkerRecord(std::string_view json);

// {"version":1,"mounts":[{"path","uri","options":{..},"metadata_ttl_ms","replicas",
// "read_only","write_back"}, ...]}, in the given order. metadata_ttl is written in whole
// milliseconds (sub-millisecond parts are dropped).
std::string EncodeMountTable(const std::vector<MountSpec>& mounts);

// Parses a mount-table document. Required: version == 1 and the "mounts" array (may be empty);
// per mount, path and uri (strings). Optional: options (object of strings, default {}),
// metadata_ttl_ms (non-negative integer, default 60000), replicas (integer, default 1),
// read_only (bool, default true), write_back (bool, default false; not with read_only). Checks
// types only; the rules on values (paths, replicas, secrets, nesting) belong to
// ValidateMountForStore and mount::MountTable. InvalidArgument for malformed JSON, another version,
// a missing field or a wrong type, naming the mount index.
StatusOr<std::vector<MountSpec>> DecodeMountTable(std::string_view json);

}  // namespace cairn::membership

#endif  // CAIRN_MEMBERSHIP_RECORDS_H_
