// libcairn: the client core shared by the FUSE mount, the CLI and (later) the S3 gateway and the
// Python SDK.
//
// A Client resolves namespace paths ("/", "/<mount>/dir/file") through the mount table to
// under-storage objects, caches metadata and listings for the mount's TTL, and reads file bytes
// page by page from the cache workers chosen by consistent hashing. When a worker cannot be
// reached the range is read from the under-storage directly: callers see no error.
//
// Thread-safety: Client and FileReader are safe for concurrent use from many threads.
// Errors: NotFound (no such path), InvalidArgument (malformed path), FailedPrecondition (the
// object changed under an open FileReader: the reader must reopen), Unavailable (neither a
// worker nor the under-storage could serve the read), Corruption is never returned for cache
// faults (they are retried from the source) .
#ifndef CAIRN_CLIENT_H_
#define CAIRN_CLIENT_H_

#include <atomic>
#include <chrono>
#include <functional>
#include <cstdint>
#include <map>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "cairn/mount_spec.h"
#include "common/status.h"

namespace cairn {

namespace protocol {
class PageChannel;  // See src/protocol/page_channel.h.
}

// TLS on the page protocol (docs/security.md). An empty `ca_file` means plaintext, which a
// worker serving beyond loopback refuses.
struct TlsSettings {
  std::string ca_file;    // PEM bundle of the CAs that sign the workers' certificates.
  std::string cert_file;  // This end's certificate (mutual TLS: the principal it proves).
  std::string key_file;   // Its private key.
  bool enabled() const { return !ca_file.empty(); }
};

// What a client knows of the namespace: its cached stats and listing pages, each with its
// expiry (Client::ExportMetadata, ClientOptions::metadata_seed). Opaque; defined in
// src/client/metadata_cache.h.
struct MetadataSeed;

struct ClientOptions {
  std::vector<MountSpec> mounts;
  std::vector<std::string> workers;  // "host:port" of cache workers.
  // Cluster mode: etcd endpoints ("http://10.0.0.1:2379,http://10.0.0.2:2379"). The worker list
  // and the mount table then come from etcd and follow its changes (`mounts` and `workers` must
  // be empty). If etcd becomes unreachable the client keeps the last known ones.
  std::string etcd_endpoints;
  // TLS to etcd (https endpoints): `ca_file` empty means the system's CA bundle; a certificate
  // and key for an etcd that requires client certificates.
  TlsSettings etcd_tls;
  // Why plaintext http:// to an etcd beyond loopback is acceptable (logged); empty: such an
  // endpoint is refused (docs/security.md).
  std::string etcd_insecure_plaintext;
  // How long Create waits for the first read of etcd (Unavailable after it).
  std::chrono::milliseconds etcd_first_sync_timeout{10000};
  // When set, page reads go to this channel (an in-process worker, cairn up) instead of TCP
  // connections to `workers`; not owned, must outlive the client.
  protocol::PageChannel* local_channel = nullptr;
  uint32_t page_size = 1 << 20;                    // Must match the workers' page size.
  std::chrono::milliseconds worker_timeout{5000};  // Per page request deadline.
  uint32_t max_readahead_pages = 16;     // Upper bound of the adaptive sequential readahead window.
  uint64_t buffer_bytes = 256ull << 20;  // Client-side page buffer (readahead results).
  // A one-page object read whole (a dataset sample, a small file) goes straight into the
  // reader's memory instead of through the page buffer. For a process that reads each sample
  // once into memory of its own (the Python SDK, a DataLoader worker): a fresh buffer page costs
  // more in page faults than the read itself. A FUSE daemon keeps it false: its buffer serves
  // the kernel's repeated and concurrent reads of a small file.
  bool unbuffered_small_files = false;
  // Cached metadata to start with: Client::ExportMetadata of the client a forked child's parent
  // had (the Python SDK passes it on at fork), so that a DataLoader worker does not list again
  // what its parent listed. Entries keep their expiry; in cluster mode they are taken after the
  // first mount table arrives.
  std::shared_ptr<const MetadataSeed> metadata_seed;
  int connections_per_worker = 4;
  // Read cached pages straight from the page files of a worker on the same machine
  // (short-circuit), instead of over TCP. See docs/protocol.md.
  bool short_circuit = true;
  // Admission for this client's reads: a one-pass scan (preprocessing, a checksum job) sets it so
  // the workers serve its misses without caching them and the training set stays cached.
  bool no_cache = false;
  // TLS to the workers; a worker's certificate must name the host the client dials.
  TlsSettings tls;
  // A job token (`cairn token issue`): the workers authorize this client's requests as the
  // token's principal instead of its certificate's. Sent only over TLS or to a worker on this
  // machine. docs/security.md.
  std::string token;
  // Ask the workers for metadata (stat, directory listings) instead of the sources: they
  // answer with their own source credentials, so the job needs none, and under an
  // authorization policy they show only the names the job's grants allow. Off: the client
  // lists the sources itself (with the credentials of its environment). Ignored with
  // `local_channel` (an embedded worker shares the client's sources).
  bool metadata_via_workers = false;
  // How long opening a file for writing, Sync and Close may take (they may upload the rest of
  // a large file to the source, or read the current content for an open without truncate).
  std::chrono::milliseconds write_commit_timeout{15 * 60 * 1000};
  // How long a write waits for room on a worker that has none (its write-back budget is full
  // of files still uploading, or its spool disk is) before it fails with ResourceExhausted
  // (ENOSPC through FUSE). The write blocks meanwhile.
  std::chrono::milliseconds write_room_wait{60'000};
};

struct FileInfo {
  std::string name;  // Last path component ("" for "/").
  uint64_t size = 0;
  std::string version;
  int64_t mtime_ns = 0;
  bool is_dir = false;
};

struct DirPage {
  std::vector<FileInfo> entries;  // Sorted by name; no "." or "..".
  std::string next_token;         // Non-empty when more entries follow.
};

// An open file, pinned to the version seen at open: every byte it returns belongs to that
// version, never a mix.
//
// Bytes of a read left where they already lie (ReadInPlace): in order, each piece points into
// memory the reader holds (a page of the client's page buffer, kept alive by `owners`) or into
// the caller's scratch buffer. Valid while the view and the scratch buffer live; read-only.
struct ReadView {
  std::vector<std::span<const char>> pieces;
  std::vector<std::shared_ptr<const void>> owners;
  size_t size = 0;  // Sum of the pieces' sizes.

  void Append(std::span<const char> piece) {
    if (piece.empty()) return;
    pieces.push_back(piece);
    size += piece.size();
  }
};

class FileReader {
 public:
  virtual ~FileReader() = default;
  virtual const FileInfo& info() const = 0;
  // Reads up to out.size() bytes at offset; returns bytes read (0 at or past end of file).
  // FailedPrecondition if the source object changed since open.
  virtual StatusOr<size_t> Read(uint64_t offset, std::span<char> out) = 0;

  // Reads min(scratch.size(), size - offset) bytes at offset (fewer only at end of file) without
  // copying those already in memory: the FUSE mount replies from the returned pieces with one
  // writev. Same errors as Read. This default reads everything into `scratch`.
  virtual StatusOr<ReadView> ReadInPlace(uint64_t offset, std::span<char> scratch) {
    ReadView view;
    size_t done = 0;
    while (done < scratch.size()) {
      StatusOr<size_t> n = Read(offset + done, scratch.subspan(done));
      if (!n.ok()) return n.status();
      if (*n == 0) break;
      if (*n > scratch.size() - done) {
        return InternalError("FileReader::Read returned more bytes than asked for");
      }
      done += *n;
    }
    view.Append(scratch.first(done));
    return view;
  }
};

// How to open a file for writing (Client::OpenForWrite).
struct WriteOptions {
  bool create = true;      // Create the file if it does not exist (else NotFound).
  bool exclusive = false;  // With create: AlreadyExists if the file exists (O_EXCL).
  bool truncate = true;    // Start empty; false: start from the current content.
};

// A file being written through the worker that owns its path (docs/write-path.md). Writes are
// sent as they come (several in flight; the bytes are copied, so the caller's buffer is free
// when Write returns); an error of an earlier write is reported by a later call. Sync and
// Close return once the whole file is in the source (write-through): the object appears there
// at once, never partly written, and its version is returned. A writer destroyed without a
// successful Close (or after Abort) leaves nothing behind.
//
// Thread-safety: safe for concurrent use; writes that overlap land in the order their Write
// calls returned, as with pwrite.
// Errors: NotFound (the worker lost the handle: it restarted, or the file idled too long),
// FailedPrecondition / AlreadyExists (the file changed in the source since it was opened;
// nothing was written), Unavailable / DeadlineExceeded (the worker is unreachable), and the
// source's errors from Sync and Close.
class FileWriter {
 public:
  virtual ~FileWriter() = default;
  virtual const std::string& path() const = 0;
  // Writes `data` at `offset` (the file grows; skipped ranges read as zeros).
  virtual Status Write(uint64_t offset, std::span<const char> data) = 0;
  // Sets the size (shorter: the rest is gone; longer: zeros).
  virtual Status Truncate(uint64_t size) = 0;
  virtual uint64_t size() const = 0;
  // Reads the file as written so far (after every Write and Truncate that returned) into `out`
  // from `offset`; returns the bytes read, fewer at the end of the file (0 past it). What tools
  // that read back a file they are still writing need (`git index-pack`, zip and HDF5 writers).
  // FailedPrecondition once the writer is closed or aborted.
  virtual StatusOr<size_t> ReadAt(uint64_t offset, std::span<char> out) = 0;
  // Makes everything written so far durable in the source (fsync); writing may go on (a Write,
  // Truncate or ReadAt from another thread meanwhile waits until it returns).
  virtual StatusOr<FileInfo> Sync() = 0;
  // Sync, then the file is closed (further calls fail). On an error the file stays open: the
  // caller may Close again or Abort.
  virtual StatusOr<FileInfo> Close() = 0;
  // Discards what was written since the last Sync (all of it if none). Idempotent.
  virtual Status Abort() = 0;
};

struct ClientStats {
  uint64_t page_reads = 0;           // Page requests sent to workers.
  uint64_t page_read_failures = 0;   // Worker failures that fell back to the under-storage.
  uint64_t fallback_bytes = 0;       // Bytes read from the under-storage directly.
  uint64_t checksum_failures = 0;    // Pages that failed end-to-end verification.
  uint64_t buffer_hits = 0;          // Reads served from the client page buffer (readahead).
  uint64_t unbuffered_reads = 0;     // One-page objects read whole into the caller's memory.
  uint64_t short_circuit_reads = 0;  // Page reads served from a local worker's files directly.
  uint64_t metadata_hits = 0;
  uint64_t metadata_misses = 0;
  uint64_t ring_updates = 0;         // Worker-set changes applied.
  uint64_t mount_table_updates = 0;  // Mount-table changes applied (cluster mode).
  uint64_t workers = 0;              // Workers in the current ring.
  bool etcd_connected = false;       // Cluster mode: etcd answered recently.
};

// Preloading (`cairn load`): see Client::Load.
struct LoadOptions {
  // Cap on the bytes the workers read from the source for this load, per second (0 = none).
  // Pages already cached cost nothing against it.
  uint64_t max_bytes_per_second = 0;
  // Page requests in flight. Each is a source read on some worker: keep it modest so loads do
  // not crowd out the workers' other readers.
  int parallelism = 32;
  // Copies to load per page: 0 = the mount's replica count.
  int replicas = 0;
  // Do not touch pages already cached (ask first); by default a cached page is touched, so
  // it counts as recently used and a job starting now finds it.
  bool skip_cached = false;
  // Load nothing: only report which pages are not cached (on every copy).
  bool verify_only = false;
  // Set by another thread to stop early (Load then returns what was done, with `cancelled`).
  const std::atomic<bool>* cancel = nullptr;
};

struct LoadProgress {
  uint64_t files_total = 0;  // Files found so far (final once listing_done).
  uint64_t files_done = 0;
  uint64_t bytes_total = 0;
  uint64_t bytes_done = 0;
  uint64_t pages_total = 0;
  uint64_t pages_done = 0;
  uint64_t pages_cached_before = 0;  // Pages every copy of which was cached already.
  uint64_t pages_loaded = 0;         // Pages some copy of which was read from the source.
  uint64_t pages_failed = 0;         // Pages a worker could not load (or no worker exists).
  uint64_t pages_missing = 0;        // verify_only: pages not cached on every copy.
  uint64_t bytes_from_source = 0;    // Bytes the workers read from the source for this load.
  bool listing_done = false;
  bool cancelled = false;
  double elapsed_seconds = 0;
  std::vector<std::string> missing_files;  // verify_only: files with missing pages (first 100).
  std::string first_error;                 // Why the first failed page failed ("" when none did).
};

struct FreeResult {
  uint64_t files = 0;
  uint64_t pages_dropped = 0;  // Cached copies dropped, over every worker.
  uint64_t failures = 0;       // Workers that did not answer (their copies may remain).
};

// The readers and writers a client returns use it: destroy them before it (as leveldb's
// iterators before their DB). The Python SDK keeps the client alive while any of its files is.
class Client {
 public:
  virtual ~Client() = default;

  // InvalidArgument for a bad mount table (duplicate or nested paths, bad URI, unknown scheme).
  static StatusOr<std::unique_ptr<Client>> Create(const ClientOptions& options);

  virtual StatusOr<FileInfo> Stat(std::string_view path) = 0;
  // One page of a directory listing; pass the previous next_token to continue.
  virtual StatusOr<DirPage> ListDir(std::string_view path, std::string_view token,
                                    int max_entries) = 0;
  virtual StatusOr<std::unique_ptr<FileReader>> Open(std::string_view path) = 0;
  // Opens a file for writing through the workers (write-through; docs/write-path.md). Errors:
  // FailedPrecondition (the mount is read-only), NotFound (no such file without create, or
  // its folder's mount), AlreadyExists (exclusive), InvalidArgument (a directory, a malformed
  // path), PermissionDenied (no write grant), Unavailable (no worker answered).
  virtual StatusOr<std::unique_ptr<FileWriter>> OpenForWrite(std::string_view path,
                                                             const WriteOptions& options) {
    return UnimplementedError("this client cannot write");
  }
  StatusOr<std::unique_ptr<FileWriter>> Create(std::string_view path) {
    return OpenForWrite(path, WriteOptions{});
  }
  // True when `path` lies in a write-through mount (the mount's root included).
  virtual bool Writable(std::string_view path) { return false; }
  // Removes a file from the source (through its worker). Errors as OpenForWrite, NotFound.
  virtual Status Remove(std::string_view path) {
    return UnimplementedError("this client cannot remove");
  }
  // Moves the file `from` to `to` in the same mount (folder sources move directories too),
  // replacing what `to` holds unless `no_replace` (then AlreadyExists). Atomic for `to`: no
  // reader sees a partial file under it (S3: a server-side copy, then a delete of `from`; both
  // names exist for a moment, and after a failure between the two). Errors as OpenForWrite,
  // plus NotFound (no `from`), Unimplemented (across mounts; a directory on S3),
  // InvalidArgument (a file onto a directory, a mount root), FailedPrecondition (a directory
  // onto a file or a non-empty directory).
  virtual Status Rename(std::string_view from, std::string_view to, bool no_replace = false) {
    return UnimplementedError("this client cannot rename");
  }
  // Creates an empty directory (S3: a "dir/" marker object). AlreadyExists when the name is
  // taken; NotFound when a folder source has no parent.
  virtual Status MakeDir(std::string_view path) {
    return UnimplementedError("this client cannot make directories");
  }
  // Removes an empty directory: NotFound, FailedPrecondition (not empty), InvalidArgument (a
  // file).
  virtual Status RemoveDir(std::string_view path) {
    return UnimplementedError("this client cannot remove directories");
  }
  // Waits until every file closed under `path` (a file or folder; "/" for everything) on a
  // write-back mount is in its source, on every worker this client knows (`cairn sync`). OK at
  // once where nothing waits; DeadlineExceeded (naming what still waits and why) after
  // `timeout`; Unavailable when a worker cannot be asked (its files are then unknown).
  virtual Status SyncWrites(std::string_view path, std::chrono::milliseconds timeout) {
    return UnimplementedError("this client cannot sync writes");
  }
  // Drops cached metadata for a path (and below), so the next Stat/Open asks the source.
  virtual void InvalidateMetadata(std::string_view path) = 0;
  // A copy of the cached metadata that has not expired, for ClientOptions::metadata_seed of a
  // new client (in a forked child). Null from a client that caches none.
  virtual std::shared_ptr<const MetadataSeed> ExportMetadata() { return nullptr; }

  // Fills the cache with a file or everything under a folder, ahead of a job: lists the source
  // and asks the workers that own each page (every replica) to load it, `parallelism` pages at a
  // time. Calls `progress` (on the calling thread, at most about 4 times a second, and once at
  // the end). Re-running after an interruption only loads what is missing.
  // Errors: NotFound / InvalidArgument for the path, Unavailable if there is no worker; page
  // failures are counted in the result, not returned.
  virtual StatusOr<LoadProgress> Load(std::string_view path, const LoadOptions& options,
                                      const std::function<void(const LoadProgress&)>& progress) {
    return UnimplementedError("this client cannot load");
  }

  // Drops the cached pages of a file or of everything under a folder from every worker.
  virtual StatusOr<FreeResult> Free(std::string_view path) {
    return UnimplementedError("this client cannot free");
  }

  // Makes every client see the source's current state of `path` (and below) at once: drops this
  // client's cached metadata and, in cluster mode, tells every other client through etcd.
  virtual Status Invalidate(std::string_view path) {
    InvalidateMetadata(path);
    return Status::Ok();
  }
  virtual ClientStats Stats() const = 0;
};

// Visits every file at or under `path` (a file: just it) through the client's stat and listing
// path (pages of 1000, depth first, folders in name order); `visit` returns false to stop.
// Errors: those of Stat/ListDir (NotFound, InvalidArgument, Unavailable).
Status WalkFiles(Client* client, std::string_view path,
                 const std::function<bool(const std::string& path, const FileInfo& info)>& visit);

}  // namespace cairn

#endif  // CAIRN_CLIENT_H_
