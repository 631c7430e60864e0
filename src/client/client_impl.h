// ClientImpl: the libcairn Client (see include/cairn/client.h for the contract).
#ifndef CAIRN_CLIENT_CLIENT_IMPL_H_
#define CAIRN_CLIENT_CLIENT_IMPL_H_

#include <future>
#include <memory>
#include <optional>
#include <string>
#include <unordered_map>

#include "cairn/client.h"
#include "client/cache_ops.h"
#include "client/cluster_feed.h"
#include "client/metadata_cache.h"
#include "client/page_buffer.h"
#include "client/page_fetcher.h"
#include "client/write_keeper.h"
#include "common/thread_annotations.h"
#include "common/thread_pool.h"
#include "mount/mount_table.h"

namespace cairn::client {

class ClientImpl : public Client {
 public:
  // For tests: a client over an existing mount table and fetcher.
  ClientImpl(const ClientOptions& options, std::shared_ptr<const mount::MountTable> mounts,
             std::unique_ptr<PageFetcher> fetcher, Clock* clock);
  ~ClientImpl() override;

  StatusOr<FileInfo> Stat(std::string_view path) override;
  StatusOr<DirPage> ListDir(std::string_view path, std::string_view token,
                            int max_entries) override;
  StatusOr<std::unique_ptr<FileReader>> Open(std::string_view path) override;
  StatusOr<std::unique_ptr<FileWriter>> OpenForWrite(std::string_view path,
                                                     const WriteOptions& options) override;
  Status Remove(std::string_view path) override;
  Status Rename(std::string_view from, std::string_view to, bool no_replace) override;
  Status MakeDir(std::string_view path) override;
  Status SyncWrites(std::string_view path, std::chrono::milliseconds timeout) override;
  Status RemoveDir(std::string_view path) override;
  bool Writable(std::string_view path) override;
  void InvalidateMetadata(std::string_view path) override;
  std::shared_ptr<const MetadataSeed> ExportMetadata() override;
  // Takes in a parent client's cached metadata (ClientOptions::metadata_seed).
  void SeedMetadata(const MetadataSeed& seed);
  ClientStats Stats() const override;
  StatusOr<LoadProgress> Load(std::string_view path, const LoadOptions& options,
                              const std::function<void(const LoadProgress&)>& progress) override;
  StatusOr<FreeResult> Free(std::string_view path) override;
  Status Invalidate(std::string_view path) override;

  // Replaces the mount table (etcd watch). Open files keep the mount they were opened under;
  // cached metadata is dropped. InvalidArgument for a bad table: the previous one stays.
  Status SetMounts(std::vector<MountSpec> specs) EXCLUDES(mu_);
  // Replaces the worker set (etcd watch). See PageFetcher::SetWorkers.
  Status SetWorkers(std::vector<placement::WorkerNode> nodes);
  // Keeps workers and mounts in step with etcd from now on (owned; stopped first at
  // destruction). Call once, right after construction.
  void AttachFeed(std::unique_ptr<ClusterFeed> feed);

 private:
  std::shared_ptr<const mount::MountTable> Mounts() const EXCLUDES(mu_);
  // The writable mount holding file `path` (normalised): FailedPrecondition for a read-only
  // one, InvalidArgument for a mount root or a path above the mounts, NotFound for none.
  StatusOr<std::shared_ptr<const mount::Mount>> WritableMount(const std::string& path);
  static Status NoWriter(const std::string& path);  // No worker to write through.
  struct OwnerReply {
    std::shared_ptr<protocol::PageChannel> channel;  // The worker that answered.
    protocol::WriteReply reply;
  };
  // When a write request goes on from an owner that failed to answer to the next one.
  enum class FailOver {
    // Whenever the owner is down or stalled (Unavailable, DeadlineExceeded): for requests that
    // are harmless to repeat elsewhere (an open for writing: nothing shows before its close).
    kWhenUnanswered,
    // Only when the request never reached the owner (Unavailable without outcome_unknown()):
    // for requests that change names (rename, hand-over, remove). One the owner got and then
    // failed to answer (it crashed or stalled mid-way) may have taken effect, or may yet, and
    // another owner's answer would misreport it (a rename found half done answers "no such
    // file"): the caller gets the failure, marked outcome_unknown(), and may try again.
    kWhenNotSent,
    // Never: the path's first owner only, a request that never reached it sent again with
    // backoff (a few seconds: past the second a worker stays suspect). For name changes and
    // opens that keep the content on a write-back mount, whose files wait for their upload at
    // that owner: another worker would answer from the source alone (a rename moving the
    // object the waiting file replaces, a remove leaving the waiting file to be uploaded).
    kNever,
  };
  // Sends a write request to the path's owner, else, as `fail_over` allows, the next worker
  // the ring names. Other errors are the worker's answer.
  StatusOr<OwnerReply> AskOwners(const std::string& path, const protocol::WriteRequest& request,
                                 FailOver fail_over = FailOver::kWhenUnanswered);
  // FailOver::kNever's ask: `owner` (the path's first owner) only.
  StatusOr<OwnerReply> AskFirstOwner(std::shared_ptr<protocol::PageChannel> owner,
                                     const protocol::WriteRequest& request);
  // OpenWrite through AskOwners (as `fail_over` allows); an open without truncate refused for room
  // (its owner's write-back budget has none for the content it keeps) is sent again as RoomWait
  // schedules, for up to options_.write_room_wait, as a refused write is.
  StatusOr<OwnerReply> OpenOnOwner(const protocol::OpenWriteRequest& request, FailOver fail_over);
  // How a name change in `mount` fails over: kNever on a write-back mount, else kWhenNotSent.
  static FailOver NameChange(const mount::Mount& mount) {
    return mount.spec.write_back ? FailOver::kNever : FailOver::kWhenNotSent;
  }
  // Drops the cached metadata of a path written or removed, and its parent's listing.
  void ForgetWritten(const std::string& path);
  // After this client's own commit or remove of a file: its metadata is what the source now
  // holds (MetadataCache::NoteCommitted / NoteRemoved) where listings come from the source,
  // else forgotten as ForgetWritten does.
  void NoteCommitted(const std::string& path, const FileInfo& info);
  void NoteRemoved(const std::string& path);
  // The metadata TTL (us) of the mount of `path` when its listings come straight from the source
  // (patched after writes); nullopt otherwise.
  std::optional<int64_t> SourceListingTtl(const std::string& path);
  StatusOr<ObjectRef> ObjectRefFor(const std::string& path, FileInfo info);
  CacheOpsContext OpsContext();
  // Answers a stat miss from the parent directory's listing pages (one LIST per 1,000 names
  // instead of a HEAD per file: readers usually open many siblings), each page listed at most
  // once per directory and TTL, the pages walked in order up to kMaxListingPagesPerStat.
  // nullopt when the pages cannot decide (the name sorts beyond them, or a listing failed).
  static constexpr int kMaxListingPagesPerStat = 16;
  std::optional<StatusOr<FileInfo>> StatFromParentListing(const mount::Mount& mount,
                                                          const std::string& key,
                                                          const std::string& path);
  // ListPage (1,000 entries) with concurrent callers for one page coalesced: the first lists,
  // the others wait for its answer (read_many's threads and a DataLoader worker's first batch
  // miss on many siblings at once; each LIST of a large folder is slow and billed).
  StatusOr<DirPage> ListPageOnce(const mount::Mount& mount, const std::string& key,
                                 const std::string& path, const std::string& token)
      EXCLUDES(listings_mu_);
  // What `key` of `mount` (at namespace `path`) is: from a worker or the source (below).
  StatusOr<FileInfo> StatPath(const mount::Mount& mount, const std::string& key,
                              const std::string& path, const std::string& name);
  // One page of a directory, from a worker or the source, remembered in the metadata cache.
  StatusOr<DirPage> ListPage(const mount::Mount& mount, const std::string& key,
                             const std::string& path, std::string_view token, int max_entries);
  StatusOr<FileInfo> StatFromSource(const mount::Mount& mount, const std::string& key,
                                    const std::string& name);
  StatusOr<DirPage> ListFromSource(const mount::Mount& mount, const std::string& key,
                                   std::string_view token, int max_entries);
  StatusOr<FileInfo> StatFromWorkers(const std::string& path, const std::string& name);
  StatusOr<DirPage> ListFromWorkers(const std::string& path, std::string_view token,
                                    int max_entries);
  // Caches a listing page (and, but on write-back mounts, the stats of its entries) for the
  // mount's metadata TTL.
  void RememberListing(const mount::Mount& mount, const std::string& path, std::string_view token,
                       const DirPage& page);
  // Clients told to take metadata from the workers (they may hold no source credentials):
  // never from the source.
  bool WorkersOwnMetadata() const {
    return options_.metadata_via_workers && options_.local_channel == nullptr;
  }
  // Where `mount`'s metadata comes from: the workers for those clients, and for every
  // write-back mount (only the owner of a path knows a file closed there and not yet uploaded;
  // without an answering worker such a client falls back to the source).
  bool MetadataViaWorkers(const mount::Mount& mount) const {
    return WorkersOwnMetadata() || mount.spec.write_back;
  }

  const ClientOptions options_;
  Clock* const clock_;  // Not owned; never null.
  mutable Mutex mu_;
  std::shared_ptr<const mount::MountTable> mounts_ GUARDED_BY(mu_);
  std::atomic<uint64_t> mount_table_updates_{0};
  MetadataCache metadata_;
  Mutex listings_mu_;
  // Listings in flight (ListPageOnce), by path '\0' token.
  std::unordered_map<std::string, std::shared_future<StatusOr<DirPage>>> listings_
      GUARDED_BY(listings_mu_);
  std::unique_ptr<PageFetcher> fetcher_;
  // Keeps the handles of this client's files open for writing alive (shared with the writers,
  // which may outlive the client: its thread stops with the last of them).
  const std::shared_ptr<WriteKeeper> write_keeper_ = std::make_shared<WriteKeeper>();
  PageBuffer buffer_;
  std::atomic<uint64_t> buffer_hits_{0};
  std::atomic<uint64_t> unbuffered_reads_{0};
  std::atomic<uint64_t> metadata_hits_{0};
  std::atomic<uint64_t> metadata_misses_{0};
  // Declared late so it is destroyed early: queued readahead uses the members above.
  std::unique_ptr<ThreadPool> prefetch_pool_;
  // Declared last so it is destroyed first: its watch callbacks call SetMounts/SetWorkers.
  std::unique_ptr<ClusterFeed> feed_;
};

// Builds the page fetcher for the options: an in-process channel, or one RemoteChannel per
// worker on a rendezvous ring (none yet when the workers come from etcd).
StatusOr<std::unique_ptr<PageFetcher>> MakePageFetcher(const ClientOptions& options);

}  // namespace cairn::client

#endif  // CAIRN_CLIENT_CLIENT_IMPL_H_
