// FakeClient: an in-memory cairn::Client for tests of the FUSE mount (and anything else that
// consumes the Client interface without a cluster).
//
// It models what a caller of the real client can observe:
//   - a namespace of directories and files, edited by the test through PutFile/AddDir/Remove
//     (the "under-storage" side); every PutFile gives the file a new version string;
//   - a metadata cache in front of it: Stat and Open answer from a cached FileInfo until the
//     cache entry is older than `metadata_ttl` (measured on the injected Clock) or
//     InvalidateMetadata drops it, so a test can see stale metadata and then its expiry;
//   - FileReaders pinned to the version seen at open: they return the bytes of that version
//     (as a cache holding the old pages would), or FailedPrecondition once the source changed
//     when `fail_reads_after_change` is set (as a cache miss that must refetch would);
//   - ListDir pages in name order with opaque continuation tokens, never more than
//     max_entries per page; listings read the live namespace (not the metadata cache);
//   - injected errors per path and a few counters so tests can assert on traffic.
//
// Paths are absolute, '/'-separated, without a trailing slash ("/" is the root). Malformed paths
// (relative, empty components, "." or "..") are InvalidArgument, like the real client.
//
// Thread-safety: all methods are safe to call concurrently; readers may outlive later edits of
// their file. The FakeClient must outlive the FileReaders it returns.
#ifndef CAIRN_FUSE_FAKE_CLIENT_H_
#define CAIRN_FUSE_FAKE_CLIENT_H_

#include <atomic>
#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <string_view>

#include "cairn/client.h"
#include "common/clock.h"
#include "common/status.h"
#include "common/thread_annotations.h"

namespace cairn::fuse {

struct FakeClientOptions {
  Clock* clock = Clock::Real();  // Not owned; must outlive the client.
  // How long Stat/Open may answer from cached metadata. Zero: always live.
  std::chrono::microseconds metadata_ttl{0};
  // When true, a reader whose file got a new version (or was removed) since open fails every
  // later Read with FailedPrecondition; when false it keeps serving the bytes of its version.
  bool fail_reads_after_change = false;
  // When positive, one Read returns at most this many bytes (a short read that is not end of
  // file), as a client that stops at page boundaries may; callers must loop.
  size_t read_chunk_limit = 0;
};

// Traffic counters (monotonic).
struct FakeClientCounters {
  uint64_t stat_calls = 0;
  uint64_t list_calls = 0;
  uint64_t open_calls = 0;
  uint64_t read_calls = 0;
  uint64_t read_bytes = 0;
  size_t max_read_span = 0;       // Largest buffer passed to FileReader::Read.
  int max_list_entries_seen = 0;  // Largest max_entries passed to ListDir.
};

class FakeClient : public Client {
 public:
  explicit FakeClient(FakeClientOptions options = {});
  ~FakeClient() override;

  FakeClient(const FakeClient&) = delete;
  FakeClient& operator=(const FakeClient&) = delete;

  // Creates or replaces the file at `path` (creating missing parent directories) and gives it
  // a fresh version. InvalidArgument for a malformed path or "/"; FailedPrecondition when
  // `path` or one of its parents is an existing entry of the other kind (a file where a
  // directory is needed or the reverse).
  Status PutFile(std::string_view path, std::string content, int64_t mtime_ns = 0);
  // Creates a directory (and missing parents). OK if it exists; errors as PutFile. (Not
  // Client::MakeDir: this fake's mounts are read-only to the FUSE layer.)
  Status AddDir(std::string_view path);
  // Removes a file or a whole subtree (also Client::Remove: this fake's mounts are read-only to
  // the FUSE layer, which therefore never calls it). NotFound if absent; InvalidArgument for "/".
  Status Remove(std::string_view path) override;

  // Makes every Stat/ListDir/Open of exactly `path`, and every Read of a reader opened on it,
  // fail with `status`; an OK status clears the injection.
  void InjectError(std::string_view path, Status status);

  FakeClientCounters counters() const;

  // Client interface; see cairn/client.h for the contract.
  StatusOr<FileInfo> Stat(std::string_view path) override;
  StatusOr<DirPage> ListDir(std::string_view path, std::string_view token,
                            int max_entries) override;
  StatusOr<std::unique_ptr<FileReader>> Open(std::string_view path) override;
  void InvalidateMetadata(std::string_view path) override;
  ClientStats Stats() const override;

 private:
  class Reader;
  struct Node {
    bool is_dir = false;
    std::shared_ptr<const std::string> content;  // Files only; shared with readers.
    std::string version;
    int64_t mtime_ns = 0;
  };
  static Node DirNode() {
    Node node;
    node.is_dir = true;
    return node;
  }
  struct CachedMeta {
    FileInfo info;
    std::shared_ptr<const std::string> content;  // The bytes of info.version (files).
    int64_t fetched_micros = 0;
  };

  // Resolves `path` through the metadata cache (refreshing it when expired); also returns the
  // content of the cached version for files.
  StatusOr<CachedMeta> LookupLocked(const std::string& path) REQUIRES(mu_);
  Status InjectedLocked(const std::string& path) const REQUIRES(mu_);
  Status EnsureDirsLocked(const std::string& path) REQUIRES(mu_);
  // Current version of `path` in the namespace, "" when absent.
  std::string LiveVersion(const std::string& path) const;
  void CountRead(size_t span, size_t bytes);

  const FakeClientOptions options_;
  mutable Mutex mu_;
  std::map<std::string, Node> nodes_ GUARDED_BY(mu_);  // Path -> node; "/" always present.
  std::map<std::string, CachedMeta> meta_cache_ GUARDED_BY(mu_);
  std::map<std::string, Status> injected_ GUARDED_BY(mu_);
  FakeClientCounters counters_ GUARDED_BY(mu_);
  uint64_t next_version_ GUARDED_BY(mu_) = 1;
  uint64_t metadata_hits_ GUARDED_BY(mu_) = 0;
  uint64_t metadata_misses_ GUARDED_BY(mu_) = 0;
};

// Checks that `path` is absolute and normalized ("/", "/a", "/a/b"): InvalidArgument otherwise.
Status ValidateClientPath(std::string_view path);

}  // namespace cairn::fuse

#endif  // CAIRN_FUSE_FAKE_CLIENT_H_
