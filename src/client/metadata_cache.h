// MetadataCache: stat results (including "does not exist") and directory listing pages, each
// trusted for its mount's TTL. Bounded: when full, the oldest entries go first.
// Thread-safety: thread-safe.
#ifndef CAIRN_CLIENT_METADATA_CACHE_H_
#define CAIRN_CLIENT_METADATA_CACHE_H_

#include <list>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "cairn/client.h"
#include "common/clock.h"
#include "common/thread_annotations.h"

namespace cairn {

struct MetadataSeed {
  struct Item {
    std::string key;         // A path, or a path + '\0' + token for a listing page.
    int64_t expires_us = 0;  // On the cache's clock (steady: valid in a forked child too).
    std::optional<StatusOr<FileInfo>> stat;
    std::optional<DirPage> list;
  };
  std::vector<Item> items;  // Oldest first.
};

}  // namespace cairn

namespace cairn::client {

class MetadataCache {
 public:
  MetadataCache(Clock* clock, size_t max_entries) : clock_(clock), max_entries_(max_entries) {}

  // How a stat result was learnt: by asking the source (or a worker) about this very path, or
  // from something else (a page of the parent's listing, which may be older than the stat).
  enum class StatOrigin { kAsked, kDerived };

  // The cached result for a path: a FileInfo or a NotFound status. nullopt on miss/expiry.
  std::optional<StatusOr<FileInfo>> GetStat(const std::string& path) EXCLUDES(mu_);
  void PutStat(const std::string& path, const StatusOr<FileInfo>& info, int64_t ttl_us,
               StatOrigin origin = StatOrigin::kAsked) EXCLUDES(mu_);
  // True when the cached stat of `path` says it does not exist and was asked (kAsked) at most
  // `max_age_us` ago: what a create may tell the worker it saw (OpenWriteRequest::seen_absent).
  // Entries taken from a seed were asked by another process at an unknown time: never fresh.
  bool FreshlyAbsent(const std::string& path, int64_t max_age_us) EXCLUDES(mu_);

  std::optional<DirPage> GetList(const std::string& path, std::string_view token) EXCLUDES(mu_);
  void PutList(const std::string& path, std::string_view token, const DirPage& page, int64_t ttl_us)
      EXCLUDES(mu_);

  // Drops everything at `path` and below it, and the listing pages of its parent folder.
  void Invalidate(std::string_view path) EXCLUDES(mu_);
  // Drops everything at `path` and below it (not the parent's listing pages).
  void Forget(std::string_view path) EXCLUDES(mu_);
  // A file this client has just committed to the source: its stat becomes `info` (kDerived),
  // and the parent's cached listing pages show it, inserted into (or replaced in) the page whose
  // range holds its name, so that writing many files into one folder does not list the folder
  // again after each. Where the parent's pages up to that one are not all cached, or a
  // directory holds the name, the parent's pages are dropped instead (as Invalidate does).
  // What the cache says of the folders above it is made to agree (NoteFoldersAbove).
  void NoteCommitted(const std::string& path, const FileInfo& info, int64_t ttl_us) EXCLUDES(mu_);
  // A file this client has just removed: as NoteCommitted, the name taken out of the listing
  // and its stat NotFound (kDerived).
  void NoteRemoved(const std::string& path, int64_t ttl_us) EXCLUDES(mu_);

  // The newest `max_items` entries that have not expired, oldest first.
  std::shared_ptr<const MetadataSeed> Export(size_t max_items) EXCLUDES(mu_);
  // Adds the seed's entries that have not expired (the newest, if they do not all fit).
  void Import(const MetadataSeed& seed) EXCLUDES(mu_);

 private:
  struct Entry {
    int64_t expires_us = 0;
    int64_t asked_us = -1;  // When a kAsked stat was answered; -1 otherwise.
    std::optional<StatusOr<FileInfo>> stat;
    std::optional<DirPage> list;
    std::list<std::string>::iterator order;
  };
  void Insert(const std::string& key, Entry entry) REQUIRES(mu_);
  // Drops the entries at `path` and below it.
  void DropAtOrBelow(std::string_view path) REQUIRES(mu_);
  // NoteCommitted's and NoteRemoved's change to the parent's listing (`info` null: remove).
  // False when it could not be made (the parent's pages must then go).
  bool PatchParentListing(const std::string& parent, const std::string& name, const FileInfo* info)
      REQUIRES(mu_);
  void DropListings(const std::string& dir) REQUIRES(mu_);
  // What `dir`'s cached listing says of a directory `name`: none cached (its first page is
  // missing or expired), shown, or not shown (or pages up to its place missing).
  enum class Listed { kNoListing, kDirectory, kNotShown };
  Listed ListingShows(const std::string& dir, const std::string& name) REQUIRES(mu_);
  // A file committed at `path` makes every folder above it exist: a cached "does not exist"
  // (or a file) for one of them, and a cached listing of the folder above one that does not
  // show it, are dropped, up to the first folder its parent's listing already shows (a file
  // written into a new folder, then that folder stat'ed or listed, is seen).
  void NoteFoldersAbove(const std::string& path) REQUIRES(mu_);

  Clock* clock_;
  size_t max_entries_;
  Mutex mu_;
  std::unordered_map<std::string, Entry> entries_ GUARDED_BY(mu_);
  std::list<std::string> order_ GUARDED_BY(mu_);  // Insertion order, oldest first.
};

}  // namespace cairn::client

#endif  // CAIRN_CLIENT_METADATA_CACHE_H_
