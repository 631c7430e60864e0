// SourceAllowList: the sources a worker agrees to read for mounts it is told about by etcd,
// whatever etcd says (docs/security.md). Without it, anyone who can write the mount table can
// make every worker serve any file its process can read (`/x=file:///`) or send signed
// requests to any host (`endpoint=`).
//
//   * A source entry is a URI prefix: "s3://bucket-a" (the whole bucket), "s3://bucket-b/team"
//     (that prefix and below, on '/' boundaries: not "s3://bucket-b/team2"), "file:///srv/lake".
//   * An endpoint entry is an S3 endpoint URL a mount's `endpoint` option may name ("http://
//     10.0.0.9:9000"); a mount without the option uses the worker's default (AWS) and needs none.
//   * An empty list allows everything of its kind (the default: the operator has not opted in;
//     the worker warns at start in cluster mode).
//
// Pure code; thread-compatible (immutable after Create).
#ifndef CAIRN_MOUNT_SOURCE_ALLOW_LIST_H_
#define CAIRN_MOUNT_SOURCE_ALLOW_LIST_H_

#include <string>
#include <vector>

#include "cairn/mount_spec.h"
#include "common/status.h"
#include "common/uri.h"

namespace cairn::mount {

class SourceAllowList {
 public:
  // InvalidArgument for an entry that is not a URI of a known scheme (s3, file), a file path
  // with "." or ".." segments, or an endpoint that is not an http(s) URL.
  static StatusOr<SourceAllowList> Create(const std::vector<std::string>& sources,
                                          const std::vector<std::string>& endpoints);
  SourceAllowList() = default;  // Allows everything.

  bool restricts_sources() const { return !sources_.empty(); }
  bool restricts_endpoints() const { return !endpoints_.empty(); }

  // OK, or PermissionDenied naming what is not allowed and the flag that would allow it.
  Status Check(const MountSpec& spec) const;

 private:
  std::vector<Uri> sources_;
  std::vector<std::string> endpoints_;  // Without a trailing '/'.
};

}  // namespace cairn::mount

#endif  // CAIRN_MOUNT_SOURCE_ALLOW_LIST_H_
